/**
 * Reads one suite file as text, refusing what is not a small regular UTF-8
 * file. The file is opened non-blocking and checked on the open descriptor,
 * so a FIFO or device named `*.portal-test.yaml` is refused instead of
 * blocking the run, and a file swapped after it was listed is still checked.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';

/**
 * Largest suite file. YAML parsing costs ~100x the text in memory (see
 * MAX_MANIFEST_BYTES), so 1 MiB stays near 100 MB; the shipped Pod Security
 * suite, which names every verdict of 19 rules on ~170 fixtures, is ~70 KB.
 */
export const MAX_SUITE_BYTES = 1024 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });

export type ReadResult = { ok: true; text: string } | { ok: false; message: string };

function reason(e: unknown): string {
  const code = (e as NodeJS.ErrnoException)?.code;
  if (code === 'ENOENT') return 'no such file or directory';
  if (code === 'EACCES') return 'permission denied';
  if (code === 'ELOOP') return 'too many levels of symbolic links';
  return e instanceof Error ? e.message : String(e);
}

export async function readSuiteFile(path: string): Promise<ReadResult> {
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    return { ok: false, message: `cannot read: ${reason(e)}` };
  }
  try {
    const info = await handle.stat();
    if (info.isDirectory()) return { ok: false, message: 'is a directory' };
    if (!info.isFile()) return { ok: false, message: 'is not a regular file (a FIFO, socket or device); a suite is a YAML file' };
    if (info.size > MAX_SUITE_BYTES) {
      return { ok: false, message: `file is ${(info.size / 1024 / 1024).toFixed(1)} MiB, over the 1 MiB limit for a suite; split it into several suites` };
    }
    // Read at most one byte past the limit: the file may have grown since the stat.
    const buffer = Buffer.alloc(MAX_SUITE_BYTES + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length > MAX_SUITE_BYTES) return { ok: false, message: 'file grew over the 1 MiB limit for a suite while it was read' };
    }
    const bytes = buffer.subarray(0, length);
    if (bytes.includes(0)) return { ok: false, message: 'is a binary file (it contains NUL bytes), not YAML' };
    try {
      return { ok: true, text: utf8.decode(bytes) };
    } catch {
      return { ok: false, message: 'is not UTF-8 text, so not YAML' };
    }
  } catch (e) {
    return { ok: false, message: `cannot read: ${reason(e)}` };
  } finally {
    await handle.close();
  }
}
