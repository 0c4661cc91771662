/**
 * LabelSelector matching is implemented once (issue 10 item 4): the engine,
 * the embedded API server (`?labelSelector=`, PodDisruptionBudgets) and its
 * webhook dispatch agree on every selector, because they share
 * policy/label-selector.ts.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import fc from 'fast-check';
import { fromLabelSelectorObject, matchLabels, parseLabelSelector } from '../../packages/devcluster/src/apiserver/selectors.ts';
import { matchesLabelSelector } from '../../packages/devcluster/src/webhook/label-selector.ts';
import { selectorMatches } from '../../src/policy/label-selector.ts';
import type { LabelSelector, LabelSelectorRequirement } from '../../src/policy/types.ts';

const key = fc.constantFrom('app', 'tier', 'example.com/team');
const value = fc.constantFrom('a', 'b', 'c');
const requirement: fc.Arbitrary<LabelSelectorRequirement> = fc.oneof(
  fc.record({ key, operator: fc.constantFrom('In' as const, 'NotIn' as const), values: fc.uniqueArray(value, { minLength: 1, maxLength: 3 }) }),
  fc.record({ key, operator: fc.constantFrom('Exists' as const, 'DoesNotExist' as const) }),
);
const selector: fc.Arbitrary<LabelSelector> = fc.record(
  { matchLabels: fc.dictionary(key, value, { maxKeys: 2 }), matchExpressions: fc.array(requirement, { maxLength: 3 }) },
  { requiredKeys: [] },
);
const labels = fc.option(fc.dictionary(key, value, { maxKeys: 3 }), { nil: undefined });

/** The same selector in kube-apiserver's query-string syntax. */
function queryString(s: LabelSelector): string {
  return [
    ...Object.entries(s.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`),
    ...(s.matchExpressions ?? []).map((r) =>
      r.operator === 'In' ? `${r.key} in (${r.values!.join(',')})` : r.operator === 'NotIn' ? `${r.key} notin (${r.values!.join(',')})` : r.operator === 'Exists' ? r.key : `!${r.key}`,
    ),
  ].join(',');
}

test('engine, API server (query string and PDB object) and webhook dispatch agree on every selector', () => {
  fc.assert(
    fc.property(selector, labels, (s, l) => {
      const engine = selectorMatches(s, l);
      assert.equal(matchLabels(parseLabelSelector(queryString(s)), l), engine, `query ${queryString(s)}`);
      assert.equal(matchLabels(fromLabelSelectorObject(s)!, l), engine, 'PDB selector');
      assert.equal(matchesLabelSelector(s, l), engine, 'webhook dispatch');
    }),
    { numRuns: 2000 },
  );
});

test('the embedded API server and its webhook dispatch match through policy/label-selector.ts', () => {
  // The dev cluster reaches the product through its one entry point (ADR 0015), which re-exports the engine's matching.
  const entry = readFileSync(new URL('../../src/exports/dev-api.ts', import.meta.url), 'utf8');
  assert.match(entry, /export \{[^}]*\b(requirementsMatch|selectorMatches)\b[^}]*\} from '\.\.\/policy\/label-selector\.ts'/);
  for (const file of ['../../packages/devcluster/src/apiserver/selectors.ts', '../../packages/devcluster/src/webhook/label-selector.ts']) {
    const text = readFileSync(new URL(file, import.meta.url), 'utf8');
    assert.match(text, /import \{[^}]*\b(requirementsMatch|selectorMatches)\b[^}]*\} from 'portal\/dev-api'/, `${file} uses the engine's matching`);
    assert.doesNotMatch(text, /case 'In':[\s\S]*includes\(/, `${file} has no matching of its own`);
  }
});
