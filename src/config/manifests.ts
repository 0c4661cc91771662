/**
 * Reads Kubernetes manifests from files and directories: multi-document YAML,
 * JSON (an object, an array, or a `List`), recursively for directories
 * (.yaml, .yml, .json). Problems never throw: each is returned with its source
 * and, for syntax errors, the line, so a caller can report them all at once.
 */
import { readdir, stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { readBoundedFile, readBoundedStream, mib, type ReadResult } from './read-file.ts';
import { jsonSyntaxError } from './json-error.ts';
import { jsonScan, parseYamlDocuments } from './yaml.ts';
import type { InputBudget } from './input-budget.ts';
import type { ManifestDocument, ManifestError } from './manifest-document.ts';
import { isObject } from '../util/is-object.ts';

export interface ManifestReadResult {
  documents: ManifestDocument[];
  errors: ManifestError[];
}

const MANIFEST_EXTENSIONS = new Set(['.yaml', '.yml', '.json']);
/**
 * `portal test` suites (cli.portal.dev/v1alpha1 Test). They live beside the
 * policies and manifests they test, so a directory walk skips them: they are
 * neither rules nor objects to evaluate. A suite named explicitly is still read.
 */
export const SUITE_FILE = /\.portal-test\.ya?ml$/;
/**
 * Largest manifest file read. The API server stores at most ~1.5 MiB per
 * object (etcd's default request limit), so 16 MiB is over ten of the largest
 * objects; parsing costs ~100x the file size in memory (a 20 MB file of small
 * Pods peaked at ~3.4 GB RSS in `portal test`), so much larger files would
 * exhaust the heap and crash instead of being reported.
 */
export const MAX_MANIFEST_BYTES = 16 * 1024 * 1024;

/** Size limits of one readManifests call, checked before any file is read. */
export interface ReadLimits {
  /** Largest single file. */
  maxFileBytes: number;
  /** Largest sum of all files found. */
  maxTotalBytes: number;
  /** What the files are, for messages ("manifest", "rule file"). */
  what: string;
  /** Directory entries one path argument may walk. @default MAX_DIRECTORY_ENTRIES */
  maxEntries?: number;
}

export const MANIFEST_LIMITS: Readonly<ReadLimits> = Object.freeze({
  maxFileBytes: MAX_MANIFEST_BYTES,
  // `portal test` over a repository reads one file at a time and keeps only
  // the parsed objects, so only the per-file size needs a bound.
  maxTotalBytes: Number.POSITIVE_INFINITY,
  what: 'manifest',
});
const utf8 = new TextDecoder('utf-8', { fatal: true });


function reason(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  if (err?.code === 'ENOENT') return 'no such file or directory';
  if (err?.code === 'EACCES') return 'permission denied';
  if (err?.code === 'EISDIR') return 'is a directory';
  return err instanceof Error ? err.message : String(e);
}

/**
 * Directory entries one readManifests call may look at. A large repository
 * has ~10^5 files outside node_modules; more means a path such as `/` or a
 * home directory was given by mistake (or by a hostile suite), and the walk
 * is stopped with an error instead of reading the disk.
 */
export const MAX_DIRECTORY_ENTRIES = 200_000;

class TooManyEntries extends Error {}

/** Symbolic links are not followed into directories (a link loop cannot make the walk endless). */
async function listFiles(dir: string, out: string[], budget: { left: number }): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true });
  budget.left -= entries.length;
  if (budget.left < 0) throw new TooManyEntries();
  entries.sort((a, b) => a.name.localeCompare(b.name));
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await listFiles(path, out, budget);
    else if (MANIFEST_EXTENSIONS.has(extname(entry.name).toLowerCase()) && !SUITE_FILE.test(entry.name)) out.push(path);
  }
}

/** Objects of one parsed value: lists and arrays are flattened. */
function flatten(value: unknown, source: string, docNo: number, result: ManifestReadResult, counter: { n: number }): void {
  if (value === null || value === undefined) return; // an empty document
  if (Array.isArray(value)) {
    for (const item of value) flatten(item, source, docNo, result, counter);
    return;
  }
  if (!isObject(value)) {
    result.errors.push({ source, message: `document ${docNo + 1} is a ${typeof value}, not a Kubernetes object` });
    return;
  }
  const kind = value['kind'];
  if (typeof kind === 'string' && kind.endsWith('List') && Array.isArray(value['items'])) {
    for (const item of value['items'] as unknown[]) flatten(item, source, docNo, result, counter);
    return;
  }
  result.documents.push({ source, index: counter.n++, object: value });
}

function parseYaml(text: string, source: string, result: ManifestReadResult, budget: InputBudget | undefined): void {
  const counter = { n: 0 };
  parseYamlDocuments(text, budget?.allowance()).forEach((doc, docNo) => {
    if (!doc.ok) result.errors.push({ source, message: doc.message });
    else flatten(doc.value, source, docNo, result, counter);
  });
}

function parseJson(text: string, source: string, result: ManifestReadResult, budget: InputBudget | undefined): void {
  const scan = jsonScan(text);
  const problem = scan.problem ?? budget?.charge({ keys: scan.keys, documents: 1 });
  if (problem) {
    result.errors.push({ source, message: problem });
    return;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    result.errors.push({ source, message: jsonSyntaxError(text, e) });
    return;
  }
  flatten(value, source, 0, result, { n: 0 });
}

/** The name standard input goes by in messages (`portal test … -`). */
export const STDIN_SOURCE = '<stdin>';

/** The file as text, or undefined after recording why it cannot be a manifest. */
async function readText(file: string, result: ManifestReadResult, limits: Readonly<ReadLimits>, stdin: ReadOptions['stdin']): Promise<string | undefined> {
  const bound = { maxBytes: limits.maxFileBytes, what: limits.what };
  const read: ReadResult =
    file !== STDIN_SOURCE
      ? await readBoundedFile(file, bound)
      : stdin
        ? await readBoundedStream(stdin(), bound)
        : { ok: false, message: 'standard input is not available here' };
  if (!read.ok) {
    result.errors.push({ source: file, message: read.message });
    return undefined;
  }
  const bytes = read.bytes;
  // YAML and JSON are text; a NUL byte or invalid UTF-8 means a binary file
  // (an image, an archive) given by mistake, which YAML would otherwise
  // misreport as one odd string or a syntax error deep inside.
  if (bytes.includes(0)) {
    result.errors.push({ source: file, message: 'is a binary file (it contains NUL bytes), not YAML or JSON' });
    return undefined;
  }
  try {
    return utf8.decode(bytes);
  } catch {
    result.errors.push({ source: file, message: 'is not UTF-8 text, so not YAML or JSON; check that this is the manifest you meant' });
    return undefined;
  }
}

export interface ReadOptions {
  /**
   * What the path `-` reads (standard input: the CLI passes process.stdin).
   * Without it, `-` is a file name like any other.
   */
  stdin?: () => AsyncIterable<Buffer | string>;
  /**
   * The run's budget for all inputs together (input-budget.ts): bytes,
   * documents and keys are charged file by file; the first file over it is
   * named, and the files after it are not read.
   */
  budget?: InputBudget;
}

export async function readManifests(paths: readonly string[], limits: Readonly<ReadLimits> = MANIFEST_LIMITS, options: ReadOptions = {}): Promise<ManifestReadResult> {
  const result: ManifestReadResult = { documents: [], errors: [] };
  // Listing first, nothing read yet; problems keep the order of `paths`.
  const listed: ({ files: string[] } | { error: ManifestError })[] = [];
  let stdinTaken = false;
  for (const path of paths) {
    if (path === '-' && options.stdin) {
      // Standard input can be read once; a second `-` would silently read nothing.
      listed.push(stdinTaken ? { error: { source: STDIN_SOURCE, message: '`-` (standard input) is given more than once' } } : { files: [STDIN_SOURCE] });
      stdinTaken = true;
      continue;
    }
    try {
      const info = await stat(path);
      if (!info.isDirectory()) listed.push({ files: [path] });
      else {
        const files: string[] = [];
        await listFiles(path, files, { left: limits.maxEntries ?? MAX_DIRECTORY_ENTRIES });
        listed.push(files.length > 0 ? { files } : { error: { source: path, message: 'directory holds no .yaml, .yml or .json files' } });
      }
    } catch (e) {
      const message = e instanceof TooManyEntries ? `holds more than ${(limits.maxEntries ?? MAX_DIRECTORY_ENTRIES).toLocaleString('en-US')} files and directories; name the directories that hold the manifests` : `cannot read: ${reason(e)}`;
      listed.push({ error: { source: path, message } });
    }
  }
  if (Number.isFinite(limits.maxTotalBytes)) {
    // Sizes before any parsing: an oversized set costs a few stat calls.
    const all = listed.flatMap((l) => ('files' in l ? l.files : []));
    let total = 0;
    for (const file of all) {
      const size = file === STDIN_SOURCE ? 0 : await stat(file).then((i) => i.size, () => 0);
      // A file over the per-file limit is refused on its own, by name, when it is read.
      if (size <= limits.maxFileBytes) total += size;
    }
    if (total > limits.maxTotalBytes) {
      result.errors.push({
        source: paths.join(', '),
        message: `${all.length} files hold ${mib(total)}, over the ${mib(limits.maxTotalBytes)} limit for all ${limits.what}s together; nothing was read: keep only the rules you mean to load`,
      });
      return result;
    }
  }
  for (const l of listed) {
    if ('error' in l) {
      result.errors.push(l.error);
      continue;
    }
    for (const file of l.files) {
      if (options.budget?.crossed) return result;
      const text = await readText(file, result, limits, options.stdin);
      if (text === undefined) continue;
      const overBytes = options.budget?.chargeBytes(Buffer.byteLength(text));
      if (overBytes !== undefined) result.errors.push({ source: file, message: overBytes });
      else if (extname(file).toLowerCase() === '.json') parseJson(text, file, result, options.budget);
      else parseYaml(text, file, result, options.budget);
    }
  }
  return result;
}
