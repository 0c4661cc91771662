/**
 * The one way Portal reads a file a user named (manifests, rule files,
 * `--config`, the chart's values): regular files only, and never more than a
 * stated number of bytes, whatever the file claims to be.
 *
 * Why not `readFile`: it follows a symlink to `/dev/zero` and reads until the
 * heap is gone (17-22 GB measured, issue 16), and it blocks forever on a FIFO
 * nobody writes to. So the path is `stat`ed first (a FIFO, device or socket
 * is refused before it is opened: opening a FIFO blocks, opening some devices
 * has effects), then opened non-blocking, checked again on the open handle
 * (the path may have been swapped in between), and read up to the limit plus
 * one byte, so a file that grows while it is read is still refused.
 *
 * Problems never throw: they come back as a message that completes "FILE: ".
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readlinkSync, readSync, statSync, type Stats } from 'node:fs';
import { open, stat } from 'node:fs/promises';

export type ReadResult = { ok: true; bytes: Buffer } | { ok: false; message: string };

/** What to call the file in messages ("manifest", "rule file", "--config file"). */
export interface ReadBound {
  maxBytes: number;
  what: string;
}

// O_NONBLOCK: opening a FIFO without a writer returns at once instead of
// waiting for one (the handle is then refused as not a regular file).
// O_NOCTTY: a terminal device never becomes our controlling terminal.
const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (constants.O_NOCTTY ?? 0);
const CHUNK = 64 * 1024;

export const mib = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MiB`;

/** What a file that is not regular is, for the refusal. */
function typeOf(info: Stats): string {
  if (info.isDirectory()) return 'a directory';
  if (info.isFIFO()) return 'a FIFO (named pipe)';
  if (info.isCharacterDevice()) return 'a character device';
  if (info.isBlockDevice()) return 'a block device';
  if (info.isSocket()) return 'a socket';
  return 'not a regular file';
}

/** Why a file of this type is not read, or undefined for a regular file. */
function notRegular(info: Stats, linkTarget: string | undefined): string | undefined {
  if (info.isFile()) return undefined;
  const what = linkTarget !== undefined ? `is a symlink to ${linkTarget}, ${typeOf(info)}` : `is ${typeOf(info)}`;
  return `${what}; only regular files are read`;
}

/** `size` is what stat said, or the bytes read when reading stopped at the limit. */
function tooLarge(size: number, bound: ReadBound): string {
  const over = size > bound.maxBytes + 1 ? `file is ${mib(size)}, over` : 'file holds more than';
  return `${over} the ${mib(bound.maxBytes)} limit for a ${bound.what}; split it into smaller files`;
}

function reason(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  switch (err?.code) {
    case 'ENOENT':
      return 'cannot read: no such file or directory';
    case 'EACCES':
      return 'cannot read: permission denied';
    case 'EISDIR':
      return 'cannot read: is a directory';
    case 'ELOOP':
      return 'cannot read: too many levels of symbolic links (a symlink loop)';
    case 'ENXIO':
      return 'is a socket or a device without a reader, not a regular file';
    default:
      return `cannot read: ${err instanceof Error ? err.message : String(e)}`;
  }
}

function sizeOf(info: Stats, bound: ReadBound, linkTarget?: string): string | undefined {
  return notRegular(info, linkTarget) ?? (info.size > bound.maxBytes ? tooLarge(info.size, bound) : undefined);
}

/** Where a symlink points, for the message (undefined when `path` is not one). */
function linkOf(path: string): string | undefined {
  try {
    return lstatSync(path).isSymbolicLink() ? readlinkSync(path) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The buffer to read the next bytes into: `target` while it has room, else
 * one twice as large (never larger than the limit plus the one byte that
 * proves a file too large), or undefined once the limit is passed.
 */
function room(target: Buffer, length: number, bound: ReadBound): Buffer | undefined {
  if (length < target.length) return target;
  if (target.length > bound.maxBytes) return undefined;
  const grown = Buffer.allocUnsafe(Math.min(bound.maxBytes + 1, Math.max(CHUNK, target.length * 2)));
  target.copy(grown, 0, 0, length);
  return grown;
}

/** Sized for the file as it was when checked, plus one byte to notice growth. */
const firstBuffer = (info: Stats, bound: ReadBound): Buffer => Buffer.allocUnsafe(Math.min(bound.maxBytes + 1, info.size + 1));

/** What reading a file asks of the file system, one step at a time (the async and the sync reader answer the same steps). */
type Step = { op: 'stat' } | { op: 'open' } | { op: 'fstat' } | { op: 'read'; target: Buffer; offset: number; length: number };
type Answer = Stats | number | undefined;

/**
 * The one bounded read: checks the file before and after opening it (a
 * link, a device, a size over the bound, a file that grows while read) and
 * reads into a buffer that grows up to the bound. Yields the I/O it needs.
 */
function* boundedRead(path: string, bound: ReadBound): Generator<Step, ReadResult, Answer> {
  const first = (yield { op: 'stat' }) as Stats;
  const before = sizeOf(first, bound, first.isFile() ? undefined : linkOf(path));
  if (before) return { ok: false, message: before };
  yield { op: 'open' };
  const info = (yield { op: 'fstat' }) as Stats;
  const now = sizeOf(info, bound);
  if (now) return { ok: false, message: now };
  let target: Buffer | undefined = firstBuffer(info, bound);
  let length = 0;
  for (;;) {
    target = room(target, length, bound);
    if (!target) return { ok: false, message: tooLarge(length, bound) };
    const n = (yield { op: 'read', target, offset: length, length: target.length - length }) as number;
    if (n === 0) return { ok: true, bytes: target.subarray(0, length) };
    length += n;
  }
}

/** The file's bytes, at most `bound.maxBytes` of them, or why not. */
export async function readBoundedFile(path: string, bound: ReadBound): Promise<ReadResult> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    const steps = boundedRead(path, bound);
    let answer: Answer;
    for (;;) {
      const next = steps.next(answer);
      if (next.done) return next.value;
      const step = next.value;
      if (step.op === 'stat') answer = await stat(path);
      else if (step.op === 'open') answer = void (handle = await open(path, OPEN_FLAGS));
      else if (step.op === 'fstat') answer = await handle!.stat();
      else answer = (await handle!.read(step.target, step.offset, step.length, null)).bytesRead;
    }
  } catch (e) {
    return { ok: false, message: reason(e) };
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

/** readBoundedFile for the synchronous configuration loader (`--config`). */
export function readBoundedFileSync(path: string, bound: ReadBound): ReadResult {
  let fd: number | undefined;
  try {
    const steps = boundedRead(path, bound);
    let answer: Answer;
    for (;;) {
      const next = steps.next(answer);
      if (next.done) return next.value;
      const step = next.value;
      if (step.op === 'stat') answer = statSync(path);
      else if (step.op === 'open') answer = void (fd = openSync(path, OPEN_FLAGS));
      else if (step.op === 'fstat') answer = fstatSync(fd!);
      else answer = readSync(fd!, step.target, step.offset, step.length, null);
    }
  } catch (e) {
    return { ok: false, message: reason(e) };
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * A stream (standard input) read to its end, at most `bound.maxBytes`: on
 * more, reading stops and the rest is not consumed.
 */
export async function readBoundedStream(stream: AsyncIterable<Buffer | string>, bound: ReadBound): Promise<ReadResult> {
  const chunks: Buffer[] = [];
  let length = 0;
  try {
    for await (const chunk of stream) {
      const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      length += b.length;
      if (length > bound.maxBytes) return { ok: false, message: tooLarge(bound.maxBytes + 1, bound) };
      chunks.push(b);
    }
  } catch (e) {
    return { ok: false, message: reason(e) };
  }
  return { ok: true, bytes: Buffer.concat(chunks, length) };
}
