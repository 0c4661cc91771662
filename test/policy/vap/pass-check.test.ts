/**
 * The generated pass check of a policy (src/policy/vap/pass-check.ts) must
 * change nothing but time: every result equals the general evaluation's
 * (a VapSet whose engine makes no pass check), at every cost, including
 * where the evaluation's 10,000,000-unit budget runs out half-way, inside a
 * variable, or on a variable shared with another policy of the request.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { celEngine } from '../../../src/policy/vap/cel-adapter.ts';
import type { ExpressionEngine } from '../../../src/policy/vap/engine.ts';
import { passCheck } from '../../../src/policy/vap/pass-check.ts';
import { binding, ctx, deployment, policy, VapSet, type ValidatingAdmissionPolicy, type VapAttributes } from './support.ts';

/** The same engine without a pass check: every evaluation takes the general path. */
function generalOnly(): ExpressionEngine<unknown> {
  const e = celEngine() as ExpressionEngine<unknown>;
  return { compile: e.compile.bind(e), run: e.run.bind(e) };
}

function sets(policies: ValidatingAdmissionPolicy[]): [VapSet, VapSet] {
  const fast = new VapSet();
  const general = new VapSet(generalOnly());
  for (const s of [fast, general]) {
    for (const p of policies) {
      s.upsertPolicy(p);
      s.upsertBinding(binding(`${p.metadata.name}-binding`, { policyName: p.metadata.name }));
    }
  }
  return [fast, general];
}

function withItems(n: number, extra: Record<string, unknown> = {}): VapAttributes {
  const a = deployment(3);
  (a.object as { spec: Record<string, unknown> }).spec = { replicas: 3, items: Array.from({ length: n }, (_, i) => i), ...extra };
  return a;
}

/** Both sets on the same requests: the same results, in the same order. */
function same(policies: ValidatingAdmissionPolicy[], requests: VapAttributes[]): void {
  const [fast, general] = sets(policies);
  for (const a of requests) assert.deepEqual(fast.evaluate(a, ctx()), general.evaluate(a, ctx()), `items: ${String((a.object as { spec: { items?: unknown[] } }).spec.items?.length)}`);
}

void describe('the pass check of a policy', () => {
  void it('gives the general path results on passing, failing, erroring and skipped evaluations', () => {
    same(
      [
        policy('plain', { validations: [{ expression: 'object.spec.replicas <= 5', message: 'too many' }] }),
        policy('vars', {
          variables: [
            { name: 'n', expression: 'object.spec.replicas' },
            { name: 'twice', expression: 'variables.n * 2' },
          ],
          validations: [{ expression: 'variables.twice < 12' }, { expression: 'variables.n != 4', messageExpression: "'n is ' + string(variables.n)" }],
        }),
        policy('shared', { variables: [{ name: 'n', expression: 'object.spec.replicas' }], validations: [{ expression: 'variables.n >= 0' }] }),
        // A variable that fails, its error absorbed by `||`: the general path admits.
        policy('absorbed', { variables: [{ name: 'bad', expression: 'object.spec.replicas / 0 == 1' }], validations: [{ expression: 'variables.bad || true' }] }),
        policy('conditions', { matchConditions: [{ name: 'small', expression: 'object.spec.replicas < 4' }], validations: [{ expression: 'object.spec.replicas != 2' }] }),
        policy('non-bool', { failurePolicy: 'Ignore', validations: [{ expression: 'object.spec.?missing.orValue(true)' }] }),
        policy('runtime', { validations: [{ expression: "object.spec.items.all(x, x != 3) || object.spec.nope == 'x'" }] }),
      ],
      [withItems(0), withItems(5), ...[1, 2, 3, 4, 6].map((r) => deployment(r))],
    );
  });

  void it('runs out of budget where the general path does, to the unit: in a validation, in a variable, on a shared variable', () => {
    // 11 validations over 172,000 items (about 880,000 units each) bring an evaluation near its 10,000,000 units; the
    // comparison of two strings of length L (L/10 units) then crosses the budget at one L.
    const heavy = Array.from({ length: 11 }, () => ({ expression: 'object.spec.items.all(x, x >= 0)' }));
    const tune = { expression: 'object.spec.s == object.spec.t' };
    const kept = { name: 'kept', expression: 'object.spec.items.filter(x, x >= 0)' };
    const cases: [string, ValidatingAdmissionPolicy[]][] = [
      ['in a validation', [policy('p', { validations: [...heavy, tune] })]],
      ['in a variable read last', [policy('p', { variables: [{ name: 'v', expression: 'object.spec.s == object.spec.t' }], validations: [...heavy, { expression: 'variables.v' }] })]],
      [
        'on a shared variable',
        [
          policy('a', { variables: [kept], validations: [{ expression: 'size(variables.kept) >= 0' }] }),
          policy('p', { variables: [kept], validations: [...heavy.slice(0, 10), tune, { expression: 'size(variables.kept) >= 0' }] }),
        ],
      ],
    ];
    for (const [what, policies] of cases) {
      const [fast, general] = sets(policies);
      const request = (l: number): VapAttributes => withItems(172_000, { s: 'x'.repeat(l), t: 'x'.repeat(l) });
      const passes = (l: number): boolean => general.evaluate(request(l), ctx()).find((r) => r.policy === 'p')?.result === 'pass';
      // The shortest string that makes p fail on cost, by bisection.
      let [lo, hi] = [0, 4_000_000];
      assert.ok(passes(lo) && !passes(hi), `${what}: the budget is crossed between ${lo} and ${hi}`);
      while (hi - lo > 1) {
        const mid = Math.floor((lo + hi) / 2);
        if (passes(mid)) lo = mid;
        else hi = mid;
      }
      for (let l = hi - 25; l <= hi + 25; l += 5) assert.deepEqual(fast.evaluate(request(l), ctx()), general.evaluate(request(l), ctx()), `${what}, L = ${l}`);
    }
  });

  void it('generates no text of the policy into its source', () => {
    const names = ['"); throw 1; ("', '*/ throw 1; /*', '`${x}`'];
    const check = passCheck({ variables: names.map((name) => ({ name, exec: () => 1 })), conditions: [(c) => Object.keys(c['variables'] as object).length === 3], texts: [], mark: (v) => v });
    assert.equal(check({}, null, {}, null, null, undefined, undefined), true);
    assert.doesNotMatch(String(check), /throw 1/);
  });
});
