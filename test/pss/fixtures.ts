/**
 * Loads the rule library (policies/) and the rule fixtures (test/fixtures/)
 * for the library tests. A fixture states its expectation in a header
 * comment: `# expect: pass` or `# expect: fail at <path>`, where the path is
 * the field a violation must point at (or a prefix of it, since a missing
 * field is reported at the property that should hold it). Where the Pod
 * Security version changes the answer, one line per version range:
 * `# expect v1.0-v1.33: pass` and `# expect v1.34+: fail at <path>`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import type { EvaluationInput, KubeObject, PortalRuleObject } from '../../src/policy/index.ts';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const POLICIES = join(ROOT, 'policies');
export const FIXTURES = join(ROOT, 'test', 'fixtures');

export interface LoadedRule {
  file: string;
  object: PortalRuleObject;
}

export function loadRuleFiles(dir: string): LoadedRule[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => ({ file: join(dir, f), object: parse(readFileSync(join(dir, f), 'utf8')) as PortalRuleObject }));
}

/** One expectation of a fixture, for the Pod Security versions from..to (minor numbers; to = Infinity: and later, latest included). */
export interface Expectation {
  from: number;
  to: number;
  result: 'pass' | 'fail';
  /** Where the violation must point (fail only). */
  path?: string;
}

export interface Fixture {
  file: string;
  /** The rule directory it belongs to (`compliant` for the all-rules fixtures). */
  group: string;
  object: KubeObject;
  /** The expectation at the latest version. */
  expect: { result: 'pass' } | { result: 'fail'; path: string };
  /** Every expectation, covering v1.0 to latest without gaps or overlaps. */
  expectations: Expectation[];
}

/**
 * `# expect: pass` / `# expect: fail at PATH` hold at every version.
 * `# expect v1.A+: ...` (v1.A and later, latest included) and
 * `# expect v1.A-v1.B: ...` (both ends included) split the versions; together
 * a file's lines must cover v1.0 to latest exactly once.
 */
const EXPECT_LINE = /^# expect(?: v1\.(0|[1-9]\d*)(?:(\+)|-v1\.(0|[1-9]\d*)))?: (?:(pass)|fail at (\S+))$/gm;

export function parseExpectations(file: string, text: string): Expectation[] {
  const out: Expectation[] = [];
  for (const m of text.matchAll(EXPECT_LINE)) {
    const from = m[1] === undefined ? 0 : Number(m[1]);
    const to = m[1] === undefined || m[2] === '+' ? Infinity : Number(m[3]);
    out.push(m[4] === 'pass' ? { from, to, result: 'pass' } : { from, to, result: 'fail', path: m[5] as string });
  }
  if (out.length === 0) throw new Error(`${file}: no "# expect: pass" or "# expect: fail at <path>" header`);
  out.sort((a, b) => a.from - b.from);
  let next = 0;
  for (const e of out) {
    if (e.from !== next || e.to < e.from) throw new Error(`${file}: the "# expect" lines must cover v1.0 to latest exactly once (a gap or overlap at v1.${next})`);
    next = e.to + 1;
  }
  if (next !== Infinity) throw new Error(`${file}: the last "# expect" line must be open-ended (v1.N+)`);
  return out;
}

/** The expectation in force at a version (minor number, Infinity = latest). */
export function expectationAt(fx: Fixture, version: number): Expectation {
  const e = fx.expectations.find((x) => version >= x.from && version <= x.to);
  if (!e) throw new Error(`${fx.file}: no expectation at v1.${version}`);
  return e;
}

export function loadFixtures(dir: string): Fixture[] {
  const out: Fixture[] = [];
  for (const group of readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort()) {
    for (const f of readdirSync(join(dir, group)).sort()) {
      if (!f.endsWith('.yaml')) continue;
      const file = join(dir, group, f);
      const text = readFileSync(file, 'utf8');
      const expectations = parseExpectations(file, text);
      const latest = expectations.at(-1) as Expectation;
      const named = f.startsWith('good-') ? 'pass' : f.startsWith('bad-') ? 'fail' : 'unnamed';
      const expect = latest.result === 'pass' ? ({ result: 'pass' } as const) : ({ result: 'fail', path: latest.path as string } as const);
      if (named !== expect.result) throw new Error(`${file}: the file name (good-/bad-) and the "# expect" header at latest disagree`);
      out.push({ file, group, object: parse(text) as KubeObject, expect, expectations });
    }
  }
  return out;
}

/** An offline evaluation of an object, as `portal test` does it. */
export function auditInput(object: KubeObject, extraNamespaceLabels: Record<string, string> = {}): EvaluationInput {
  const [group, version] = (object.apiVersion ?? '').includes('/')
    ? (object.apiVersion ?? '').split('/')
    : ['', object.apiVersion ?? ''];
  const namespace = object.metadata?.namespace ?? 'default';
  return {
    operation: 'AUDIT',
    kind: { group: group ?? '', version: version ?? '', kind: object.kind ?? '' },
    subResource: '',
    namespace,
    name: object.metadata?.name ?? '',
    object,
    oldObject: null,
    namespaceLabels: { ...extraNamespaceLabels, 'kubernetes.io/metadata.name': namespace },
  };
}

/** True when `path` is `expected` or lies under it. */
export function pathUnder(path: string, expected: string): boolean {
  return path === expected || path.startsWith(`${expected}.`) || path.startsWith(`${expected}[`);
}
