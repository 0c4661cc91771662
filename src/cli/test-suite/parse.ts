/**
 * A suite file's text → a validated SuiteSpec, or its problems with line and
 * column. The YAML is parsed keeping node positions (yaml's CST and
 * LineCounter), the value is checked against schemas/portal-test.schema.json
 * with ajv, and every ajv error is mapped back to the node it is about, so
 * `portal test` can say "suite.portal-test.yaml:14:13: results[2].result must
 * be one of …".
 */
import { readFile } from 'node:fs/promises';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { isMap, isPair, isScalar, isSeq, LineCounter, parseAllDocuments, type Document, type Node } from 'yaml';
import { firstDuplicateKey, yamlNestingProblem } from '../../config/yaml.ts';
import { closest } from '../../config/args.ts';
import { SUITE_API_VERSION, SUITE_KIND, type Position, type SuiteProblem, type SuiteSpec } from './format.ts';
import { parseRfc3339 } from '../../policy/index.ts';

/** The schema ships in the repository and the image (schemas/), three levels above src/cli/test-suite and dist/cli/test-suite. */
export const SCHEMA_URL = new URL('../../../schemas/portal-test.schema.json', import.meta.url);

/**
 * Aliases allowed in one suite. Anchors help reuse a list of names; the
 * limit keeps an alias bomb ("billion laughs") from expanding into gigabytes.
 */
const MAX_ALIASES = 100;

let validator: Promise<ValidateFunction> | undefined;

function schemaValidator(): Promise<ValidateFunction> {
  validator ??= readFile(SCHEMA_URL, 'utf8').then((text) => {
    // verbose: errors carry their parentSchema, whose property names make the "did you mean".
    const ajv = new Ajv({ allErrors: true, strict: true, verbose: true, logger: false });
    return ajv.compile(JSON.parse(text) as object);
  });
  return validator;
}

/** A path into the suite: keys and sequence indexes. */
export type SuitePath = readonly (string | number)[];

/** Finds where a path of the suite is written. */
export interface Locator {
  /** The value at `path` (or, for a key with no value, the key); the nearest existing ancestor otherwise. */
  at(path: SuitePath): Position;
}

export type ParseResult = { ok: true; suite: SuiteSpec; locate: Locator } | { ok: false; problems: SuiteProblem[] };

/** `results[2].result` for the path `results/2/result`. */
export function pathText(path: SuitePath): string {
  let out = '';
  for (const seg of path) out += typeof seg === 'number' ? `[${seg}]` : out === '' ? seg : `.${seg}`;
  return out || '(the document)';
}

function locator(doc: Document, lines: LineCounter): Locator & { keyOf(path: SuitePath, key: string): Position } {
  const pos = (offset: number): Position => {
    const p = lines.linePos(offset);
    return { line: p.line, column: p.col };
  };
  const start = (n: Node | null | undefined, fallback: number): number => n?.range?.[0] ?? fallback;
  /** The node at `path`, the key node of its pair, and how far the walk got. */
  const walk = (path: SuitePath): { node: Node | null | undefined; key: Node | null | undefined; offset: number } => {
    let node = doc.contents as Node | null;
    let key: Node | null | undefined;
    let offset = start(node, 0);
    for (const seg of path) {
      if (isMap(node)) {
        const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(seg));
        if (!pair) break;
        key = pair.key as Node;
        node = pair.value as Node | null;
        offset = start(node, start(key, offset));
      } else if (isSeq(node) && typeof seg === 'number') {
        const item = node.items[seg] as Node | undefined;
        if (!item) break;
        key = undefined;
        node = item;
        offset = start(node, offset);
      } else break;
    }
    return { node, key, offset };
  };
  return {
    at: (path) => pos(walk(path).offset),
    keyOf: (path, key) => {
      const { node, offset } = walk(path);
      if (isMap(node)) {
        const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === key);
        if (pair) return pos(start(pair.key as Node, offset));
      }
      return pos(offset);
    },
  };
}

function decode(pointer: string, value: unknown): (string | number)[] {
  if (pointer === '') return [];
  const out: (string | number)[] = [];
  let cur = value;
  for (const raw of pointer.slice(1).split('/')) {
    const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(cur)) {
      const i = Number(seg);
      out.push(i);
      cur = cur[i];
    } else {
      out.push(seg);
      cur = cur !== null && typeof cur === 'object' ? (cur as Record<string, unknown>)[seg] : undefined;
    }
  }
  return out;
}

const show = (v: unknown): string => (typeof v === 'string' ? JSON.stringify(v) : v === null ? 'null' : Array.isArray(v) ? 'a list' : typeof v === 'object' ? 'a mapping' : String(v));

function valueAt(value: unknown, path: SuitePath): unknown {
  let cur = value;
  for (const seg of path) cur = cur !== null && typeof cur === 'object' ? (cur as Record<string | number, unknown>)[seg] : undefined;
  return cur;
}

/** Known property names of the object at an error's schema location, for "did you mean". */
function knownProperties(e: ErrorObject): string[] {
  const schema = e.parentSchema as { properties?: Record<string, unknown> } | undefined;
  return Object.keys(schema?.properties ?? {});
}

/** One ajv error as a sentence about the suite, and the place it is about. */
function explain(e: ErrorObject, value: unknown, locate: ReturnType<typeof locator>): { path: SuitePath; position: Position; message: string } {
  const path = decode(e.instancePath, value);
  const where = pathText(path);
  const got = valueAt(value, path);
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'additionalProperties': {
      const prop = String(p['additionalProperty']);
      const hint = closest(prop, knownProperties(e));
      const known = knownProperties(e).join(', ');
      return {
        path: [...path, prop],
        position: locate.keyOf(path, prop),
        message: `${path.length ? `${where}: ` : ''}unknown field "${prop}"${hint ? ` (did you mean "${hint}"?)` : ''}; known fields: ${known}`,
      };
    }
    case 'required':
      return { path, position: locate.at(path), message: `${path.length ? `${where}: ` : ''}missing required field "${String(p['missingProperty'])}"` };
    case 'enum':
      return { path, position: locate.at(path), message: `${where} must be one of ${(p['allowedValues'] as unknown[]).join(', ')} (got ${show(got)})` };
    case 'const':
      return { path, position: locate.at(path), message: `${where} must be ${show(p['allowedValue'])} (got ${show(got)})` };
    case 'type':
      return { path, position: locate.at(path), message: `${where} must be ${p['type'] === 'array' ? 'a list' : p['type'] === 'object' ? 'a mapping' : `a ${String(p['type'])}`} (got ${show(got)})` };
    case 'minItems':
      return { path, position: locate.at(path), message: `${where} must list at least ${String(p['limit'])} item${p['limit'] === 1 ? '' : 's'}` };
    case 'minLength':
      return { path, position: locate.at(path), message: `${where} must not be empty` };
    case 'maxLength':
      return { path, position: locate.at(path), message: `${where} must be at most ${String(p['limit'])} characters` };
    case 'pattern':
      return { path, position: locate.at(path), message: `${where} must be an RFC 3339 time such as 2026-11-25T00:00:00Z (got ${show(got)})` };
    case 'anyOf':
      return { path, position: locate.at(path), message: `${where} must be a path (a string) or a mapping {name, labels} (got ${show(got)})` };
    default:
      return { path, position: locate.at(path), message: `${where} ${e.message ?? 'is invalid'}` };
  }
}

/**
 * Parses and validates one suite. `file` is how problems name it. Every
 * problem found is returned at once, in file order.
 */
export async function parseSuite(file: string, text: string): Promise<ParseResult> {
  // Nesting first: yaml composes recursively, and deep flow nesting overflows (or aborts) it.
  const deep = yamlNestingProblem(text);
  if (deep) return { ok: false, problems: [{ file, message: deep }] };
  const lines = new LineCounter();
  // yaml's own duplicate-key check is quadratic in a map's keys (issue 31): firstDuplicateKey replaces it.
  const docs = parseAllDocuments(text, { lineCounter: lines, prettyErrors: true, uniqueKeys: false });
  const list = Array.isArray(docs) ? docs : [];
  const problems: SuiteProblem[] = [];
  const nonEmpty = list.filter((d) => d.contents !== null || d.errors.length > 0);
  if (nonEmpty.length === 0) return { ok: false, problems: [{ file, message: `holds no YAML document; a suite is one document of apiVersion ${SUITE_API_VERSION}, kind ${SUITE_KIND}` }] };
  for (const doc of nonEmpty) {
    for (const err of doc.errors) {
      const at = err.linePos?.[0];
      const what = err.message.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '') ?? err.message;
      problems.push({ file, ...(at ? { position: { line: at.line, column: at.col } } : {}), message: `invalid YAML: ${what}` });
    }
  }
  for (const doc of problems.length === 0 ? nonEmpty : []) {
    const duplicate = firstDuplicateKey(doc.contents);
    if (duplicate) {
      const p = lines.linePos(duplicate.range?.[0] ?? 0);
      problems.push({ file, position: { line: p.line, column: p.col }, message: 'invalid YAML: Map keys must be unique' });
    }
  }
  if (problems.length > 0) return { ok: false, problems };
  const doc = nonEmpty[0] as Document;
  const second = nonEmpty[1];
  if (second) {
    const p = lines.linePos(second.range[0]);
    return { ok: false, problems: [{ file, position: { line: p.line, column: p.col }, message: 'a suite file holds one Test document; this is a second one (write one suite per file)' }] };
  }
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: MAX_ALIASES });
  } catch (e) {
    return { ok: false, problems: [{ file, message: `invalid YAML: ${e instanceof Error ? e.message : String(e)}` }] };
  }
  const locate = locator(doc, lines);
  const o = value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  if (!o || o['apiVersion'] !== SUITE_API_VERSION || o['kind'] !== SUITE_KIND) {
    const got = o ? `apiVersion ${show(o['apiVersion'])}, kind ${show(o['kind'])}` : show(value);
    return {
      ok: false,
      problems: [
        {
          file,
          position: locate.at([]),
          message: `not a Portal test suite: expected apiVersion ${SUITE_API_VERSION} and kind ${SUITE_KIND} (got ${got}); to evaluate manifests against rules, use 'portal test --policies DIR FILE...'`,
        },
      ],
    };
  }
  const validate = await schemaValidator();
  if (!validate(value)) {
    const errors = validate.errors ?? [];
    // An anyOf error stands for its branches: report it alone.
    const anyOf = errors.filter((e) => e.keyword === 'anyOf').map((e) => e.instancePath);
    const kept = errors.filter((e) => e.keyword === 'anyOf' || !anyOf.some((p) => e.instancePath === p || e.instancePath.startsWith(`${p}/`)));
    const seen = new Set<string>();
    for (const e of kept) {
      const x = explain(e, value, locate);
      if (seen.has(x.message)) continue;
      seen.add(x.message);
      problems.push({ file, position: x.position, message: x.message });
    }
  } else {
    problems.push(...checkSemantics(file, value as SuiteSpec, locate));
  }
  if (problems.length > 0) {
    problems.sort((a, b) => (a.position?.line ?? 0) - (b.position?.line ?? 0) || (a.position?.column ?? 0) - (b.position?.column ?? 0));
    return { ok: false, problems };
  }
  return { ok: true, suite: value as SuiteSpec, locate };
}

/** What the schema cannot say: fields that go together, real dates. */
function checkSemantics(file: string, s: SuiteSpec, locate: Locator): SuiteProblem[] {
  const out: SuiteProblem[] = [];
  const op = s.operation ?? 'CREATE';
  if (op === 'UPDATE' && (s.oldResources ?? []).length === 0) {
    out.push({ file, position: locate.at(['operation']), message: 'operation UPDATE needs oldResources: the files holding each resource as it was before the change' });
  }
  if (op !== 'UPDATE' && s.oldResources !== undefined) {
    out.push({ file, position: locate.at(['oldResources']), message: `oldResources is only for operation UPDATE (this suite's operation is ${op})` });
  }
  // The schema checks the shape; this the date itself (2026-02-30 is not one), as exceptions' expiresAt is parsed.
  if (s.now !== undefined && parseRfc3339(s.now) === undefined) {
    out.push({ file, position: locate.at(['now']), message: `now is not a valid RFC 3339 time: ${JSON.stringify(s.now)}; write it like 2026-12-31T00:00:00Z` });
  }
  const namespaces = new Map<string, number>();
  (s.namespaces ?? []).forEach((n, i) => {
    if (typeof n === 'string') return;
    const first = namespaces.get(n.name);
    if (first !== undefined) out.push({ file, position: locate.at(['namespaces', i, 'name']), message: `namespaces[${i}]: namespace "${n.name}" is already given at namespaces[${first}]` });
    else namespaces.set(n.name, i);
  });
  return out;
}
