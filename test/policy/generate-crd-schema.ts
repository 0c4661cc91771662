/**
 * Regenerates src/policy/crd-schema.generated.ts and
 * src/policy/exception-crd-schema.generated.ts from the CRD manifests, the
 * single source of truth (src/policy does no file I/O, so it embeds a copy).
 * The parts the schemas share (label selectors, status conditions: the CRDs
 * repeat them, and the exception's match is the rule's) are written once, in
 * src/policy/crd-shared.generated.ts, and referenced from both.
 * Run: node --import tsx test/policy/generate-crd-schema.ts
 * test/policy/crd.test.ts fails when the copies and the manifests drift apart.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

const root = fileURLToPath(new URL('../..', import.meta.url));
export const CRD_FILES = {
  PortalRule: `${root}charts/portal/crds/portal.dev_portalrules.yaml`,
  PortalClusterRule: `${root}charts/portal/crds/portal.dev_portalclusterrules.yaml`,
} as const;
export const EXCEPTION_CRD_FILE = `${root}charts/portal/crds/portal.dev_portalexceptions.yaml`;
export const GENERATED_FILE = `${root}src/policy/crd-schema.generated.ts`;
export const EXCEPTION_GENERATED_FILE = `${root}src/policy/exception-crd-schema.generated.ts`;
export const SHARED_GENERATED_FILE = `${root}src/policy/crd-shared.generated.ts`;

export function crdSchema(file: string): unknown {
  const crd = parse(readFileSync(file, 'utf8')) as {
    spec: { versions: { name: string; schema: { openAPIV3Schema: unknown } }[] };
  };
  const version = crd.spec.versions.find((v) => v.name === 'v1alpha1');
  if (!version) throw new Error(`${file}: no v1alpha1 version`);
  return version.schema.openAPIV3Schema;
}

/** A repeated subtree is hoisted when its JSON is at least this long: smaller ones cost more to name than to repeat. */
const MIN_SHARED_JSON = 200;
const REF = (name: string): string => `@@ref:${name}@@`;

interface Shared {
  /** Hoisted subtrees by constant name, each with references to others as REF markers. */
  consts: Map<string, unknown>;
  rule: unknown;
  exception: unknown;
}

/** Every object subtree of `value` with its path (keys joined), parents before children. */
function* subtrees(value: unknown, path: string[]): Generator<{ node: object; path: string[] }> {
  if (value === null || typeof value !== 'object') return;
  if (!Array.isArray(value)) yield { node: value, path };
  for (const [k, v] of Object.entries(value)) yield* subtrees(v, [...path, k]);
}

function replaceAll(value: unknown, json: string, marker: string): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (!Array.isArray(value) && JSON.stringify(value) === json) return marker;
  if (Array.isArray(value)) return value.map((v) => replaceAll(v, json, marker));
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replaceAll(v, json, marker)]));
}

/** `namespaceSelector.properties` → NAMESPACE_SELECTOR_PROPERTIES (the last two meaningful keys). */
function constName(path: string[], taken: ReadonlySet<string>): string {
  // namespaceSelector and objectSelector are both a metav1.LabelSelector.
  const keys = path.filter((k) => k !== 'properties' && k !== 'items').map((k) => (k.endsWith('Selector') ? 'labelSelector' : k));
  const last = path.at(-1) === 'properties' || path.at(-1) === 'items' ? [keys.at(-1) ?? 'schema', path.at(-1)!] : [keys.at(-1) ?? 'schema'];
  const base = last.map((k) => k.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase()).join('_');
  let name = base;
  for (let n = 2; taken.has(name); n++) name = `${base}_${n}`;
  return name;
}

/**
 * Hoists, largest saving first, every object subtree that occurs more than
 * once across both schemas (and within the constants hoisted so far) into
 * a named constant, until nothing large repeats.
 */
export function sharedParts(rule: unknown, exception: unknown): Shared {
  const consts = new Map<string, unknown>();
  let trees: Record<string, unknown> = { rule, exception };
  for (;;) {
    const seen = new Map<string, { count: number; path: string[] }>();
    for (const [root, tree] of [...Object.entries(trees), ...consts]) {
      for (const { node, path } of subtrees(tree, [root])) {
        const json = JSON.stringify(node);
        if (json.length < MIN_SHARED_JSON || path.length === 1) continue;
        const s = seen.get(json);
        if (s) s.count++;
        else seen.set(json, { count: 1, path });
      }
    }
    const best = [...seen].filter(([, s]) => s.count > 1).sort(([a, x], [b, y]) => b.length * (y.count - 1) - a.length * (x.count - 1) || (a < b ? -1 : 1))[0];
    if (!best) break;
    const [json, { path }] = best;
    const name = constName(path, new Set(consts.keys()));
    trees = Object.fromEntries(Object.entries(trees).map(([k, v]) => [k, replaceAll(v, json, REF(name))]));
    for (const [k, v] of consts) consts.set(k, replaceAll(v, json, REF(name)));
    consts.set(name, JSON.parse(json));
  }
  return { consts, rule: trees['rule'], exception: trees['exception'] };
}

/** JSON of `value` with each REF marker as the constant's name. */
function source(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(/"@@ref:([A-Z0-9_]+)@@"/g, '$1');
}

function referenced(value: unknown): string[] {
  return [...JSON.stringify(value).matchAll(/@@ref:([A-Z0-9_]+)@@/g)].map((m) => m[1]!);
}

function shared(): Shared {
  return sharedParts(crdSchema(CRD_FILES.PortalClusterRule), crdSchema(EXCEPTION_CRD_FILE));
}

function header(from: string): string[] {
  return [`// GENERATED from ${from} by`, '// `node --import tsx test/policy/generate-crd-schema.ts`. Do not edit by hand:', '// edit the CRD manifest and regenerate.', ''];
}

function importLine(names: string[]): string[] {
  return names.length === 0 ? [] : [`import { ${[...new Set(names)].sort().join(', ')} } from './crd-shared.generated.ts';`, ''];
}

export function renderShared(): string {
  const { consts } = shared();
  // Each constant after those it references.
  const order: string[] = [];
  const visit = (name: string): void => {
    if (order.includes(name)) return;
    for (const r of referenced(consts.get(name))) visit(r);
    order.push(name);
  };
  for (const name of [...consts.keys()].sort()) visit(name);
  return [
    ...header('charts/portal/crds/portal.dev_portal{clusterrules,exceptions}.yaml'),
    '/* The parts of the Portal CRD schemas that occur more than once, written once. */',
    '',
    ...order.flatMap((name) => [`export const ${name}: Readonly<Record<string, unknown>> = ${source(consts.get(name))};`, '']),
  ].join('\n');
}

export function renderGenerated(): string {
  const { rule } = shared();
  return [
    ...header('charts/portal/crds/portal.dev_portalclusterrules.yaml'),
    ...importLine(referenced(rule)),
    '/** The openAPIV3Schema of PortalRule and PortalClusterRule (identical). */',
    `export const RULE_CRD_OPENAPI_SCHEMA: Readonly<Record<string, unknown>> = ${source(rule)};`,
    '',
  ].join('\n');
}

export function renderExceptionGenerated(): string {
  const { exception } = shared();
  return [
    ...header('charts/portal/crds/portal.dev_portalexceptions.yaml'),
    ...importLine(referenced(exception)),
    '/** The openAPIV3Schema of PortalException. */',
    `export const EXCEPTION_CRD_OPENAPI_SCHEMA: Readonly<Record<string, unknown>> = ${source(exception)};`,
    '',
  ].join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(SHARED_GENERATED_FILE, renderShared());
  writeFileSync(GENERATED_FILE, renderGenerated());
  writeFileSync(EXCEPTION_GENERATED_FILE, renderExceptionGenerated());
  console.log(`wrote ${SHARED_GENERATED_FILE}, ${GENERATED_FILE} and ${EXCEPTION_GENERATED_FILE}`);
}
