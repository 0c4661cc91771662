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
import { exceptionKey, ruleKey, validateExceptionShape, validateRule, type PortalExceptionObject, type PortalRuleObject } from '../policy/index.ts';
import { loadVapDocuments, type VapDocuments } from '../sources/vap-files.ts';
import type { ManifestDocument, ManifestError } from './manifest-document.ts';

export type { ManifestDocument, ManifestError };

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

/**
 * Rule files are held to much less, checked on the file sizes before
 * anything is read or parsed (YAML parsing costs ~100x the text in memory:
 * a 10 MB rule file took over 1 GB before the rules were rejected):
 * - 1 MiB per file: a rule's schema is at most 64 KiB serialized
 *   (MAX_SCHEMA_BYTES), so a file holds a dozen of the largest rules; the
 *   whole Pod Security library is 72 KB in 15 files;
 * - 16 MiB per rule directory: ~250 of the largest rules, far beyond a real
 *   policy set, and at ~100x still inside a 2 GiB heap.
 * Every rule is compiled and evaluated on each replica, inside the 30 s a
 * webhook may take at most, so a rule set this large is a mistake to report,
 * not a load to carry.
 */
export const RULE_FILE_LIMITS: Readonly<ReadLimits> = Object.freeze({
  maxFileBytes: 1024 * 1024,
  maxTotalBytes: 16 * 1024 * 1024,
  what: 'rule file',
});

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

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

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

/** How a message names a document: its kind and name, or its position in the file. */
function documentLabel(doc: ManifestDocument): string {
  const name = isObject(doc.object['metadata']) ? doc.object['metadata']['name'] : undefined;
  return `${String(doc.object['kind'] ?? 'object')} ${typeof name === 'string' ? `"${name}"` : `#${doc.index + 1}`}`;
}

/** Namespace of a namespaced manifest without one, as `kubectl apply` would create it. */
const DEFAULT_NAMESPACE = 'default';

/**
 * Rules from a directory (or file): every document must be a valid
 * PortalRule / PortalClusterRule (validateRule, schema compiled), a valid
 * PortalException (in "default" when it names no namespace), a valid
 * ValidatingAdmissionPolicy or binding, or a param object of some policy's
 * paramKind; rule and exception keys must be unique. Invalid documents are
 * reported, not returned.
 */
export async function loadRulesFromDirectory(dir: string): Promise<{ rules: PortalRuleObject[]; exceptions: PortalExceptionObject[]; errors: ManifestError[]; vap: VapDocuments }> {
  const read = await readManifests([dir], RULE_FILE_LIMITS);
  const errors = [...read.errors];
  const rules: PortalRuleObject[] = [];
  const exceptions: PortalExceptionObject[] = [];
  const seen = new Map<string, string>();
  const others: ManifestDocument[] = [];
  /** Keeps a valid object whose key is new; reports an invalid or a duplicate one (`unique`: the rule its key breaks). */
  const accept = <T>(doc: ManifestDocument, checked: { ok: true; value: T } | { ok: false; problems: string[] }, key: (v: T) => string, what: string, unique: string, into: T[]): void => {
    const label = documentLabel(doc);
    if (!checked.ok) {
      errors.push({ source: doc.source, message: `${label} is invalid:\n  - ${checked.problems.join('\n  - ')}` });
      return;
    }
    const k = key(checked.value);
    const where = seen.get(k);
    if (where !== undefined) {
      errors.push({ source: doc.source, message: `${label}: duplicate of the ${what} already defined in ${where}; ${unique}` });
      return;
    }
    seen.set(k, doc.source);
    into.push(checked.value);
  };
  for (const doc of read.documents) {
    const kind = doc.object['kind'];
    if (kind === 'PortalException') {
      const meta = isObject(doc.object['metadata']) ? doc.object['metadata'] : {};
      const object = { ...doc.object, metadata: { ...meta, namespace: typeof meta['namespace'] === 'string' && meta['namespace'] !== '' ? meta['namespace'] : DEFAULT_NAMESPACE } };
      // The lifetime is judged where the exception is used (it depends on --max-exception-lifetime and the time).
      const checked = validateExceptionShape(object);
      accept(doc, checked.ok ? { ok: true, value: checked.exception } : checked, exceptionKey, 'exception', 'names must be unique in a namespace', exceptions);
    } else if (kind === 'PortalRule' || kind === 'PortalClusterRule') {
      const checked = validateRule(doc.object);
      accept(doc, checked.ok ? { ok: true, value: checked.rule } : checked, ruleKey, 'rule', 'rule names must be unique', rules);
    } else others.push(doc);
  }
  const vap = loadVapDocuments(others);
  errors.push(...vap.errors);
  for (const doc of vap.unexpected) {
    errors.push({
      source: doc.source,
      message: `${documentLabel(doc)}: unexpected kind; a policy directory holds PortalRule, PortalClusterRule, PortalException, ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding objects, and the param objects of a policy's paramKind`,
    });
  }
  // Files were read in order: report problems in file order too (the sort is stable).
  errors.sort((a, b) => (a.source < b.source ? -1 : a.source > b.source ? 1 : 0));
  return { rules, exceptions, errors, vap: { policies: vap.policies, bindings: vap.bindings, params: vap.params } };
}
