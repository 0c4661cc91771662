/**
 * Loads the rule library (policies/) and the rule fixtures (test/fixtures/)
 * for the library tests. A fixture states its expectation in a header
 * comment: `# expect: pass` or `# expect: fail at <path>`, where the path is
 * the field a violation must point at (or a prefix of it, since a missing
 * field is reported at the property that should hold it).
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

export interface Fixture {
  file: string;
  /** The rule directory it belongs to (`compliant` for the all-rules fixtures). */
  group: string;
  object: KubeObject;
  expect: { result: 'pass' } | { result: 'fail'; path: string };
}

export function loadFixtures(dir: string): Fixture[] {
  const out: Fixture[] = [];
  for (const group of readdirSync(dir).sort()) {
    for (const f of readdirSync(join(dir, group)).sort()) {
      if (!f.endsWith('.yaml')) continue;
      const file = join(dir, group, f);
      const text = readFileSync(file, 'utf8');
      const header = /^# expect: (pass|fail at (\S+))$/m.exec(text);
      if (!header) throw new Error(`${file}: no "# expect: pass" or "# expect: fail at <path>" header`);
      const expected = f.startsWith('good-') ? 'pass' : f.startsWith('bad-') ? 'fail' : 'unnamed';
      const expect = header[2] === undefined ? ({ result: 'pass' } as const) : ({ result: 'fail', path: header[2] } as const);
      if (expected !== expect.result) throw new Error(`${file}: file name and "# expect" header disagree`);
      out.push({ file, group, object: parse(text) as KubeObject, expect });
    }
  }
  return out;
}

/** An offline evaluation of an object, as `portal test` does it. */
export function auditInput(object: KubeObject): EvaluationInput {
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
    namespaceLabels: { 'kubernetes.io/metadata.name': namespace },
  };
}

/** True when `path` is `expected` or lies under it. */
export function pathUnder(path: string, expected: string): boolean {
  return path === expected || path.startsWith(`${expected}.`) || path.startsWith(`${expected}[`);
}
