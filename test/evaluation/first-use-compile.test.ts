// adr/0020: an evaluation thread's copy of the rules compiles a rule version
// when it first evaluates something the rule applies to, not when the change
// arrives; it takes the main thread's verdict on whether the version
// compiled, so it keeps the same version in force; and the time of that
// first compile does not count against the evaluation's own deadline.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { Registry } from 'prom-client';
import { EvaluationPool } from '../../src/evaluation/pool.ts';
import { evaluate, RuleSet, type RuleVerdict } from '../../src/policy/index.ts';
import { clusterRule, input, pod } from '../policy/support.ts';
import { bigSchema } from '../support/big-rule.ts';

const big = (generation = 1, schema: unknown = bigSchema('t')) =>
  clusterRule('big', { validate: { message: 'annotations must be short', schema: schema as Record<string, unknown> } }, generation);
const longAnnotation = (): ReturnType<typeof pod> => {
  const p = pod({ name: 'web', namespace: 'default' });
  return { ...p, metadata: { ...p.metadata, annotations: { 'example.com/t-key-0': 'x'.repeat(100) } } };
};
const configMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'default' } };

/** A copy fed every change of `original` (as a worker is, through the pool's channel). */
function copyOf(original: RuleSet): RuleSet {
  const copy = new RuleSet({}, { compile: 'on-first-use' });
  for (const c of original.snapshot()) copy.apply(c);
  original.onChange((c) => copy.apply(c));
  return copy;
}

const pending = (rules: RuleSet): boolean | undefined => rules.candidates('Pod').specific[0]?.entry.code?.pending;
const brief = (vs: RuleVerdict[]) => vs.map((v) => ({ rule: v.rule, result: v.result, message: v.message }));

void describe('rules compiled on first use', { timeout: 300_000 }, () => {
  void it('a copy compiles a rule only when it evaluates something the rule applies to, and decides as the original', () => {
    const original = new RuleSet();
    const copy = copyOf(original);
    original.upsert(big());
    assert.equal(pending(original), false, 'the original compiles at upsert');
    assert.equal(pending(copy), true, 'the copy has not compiled it');
    assert.deepEqual(evaluate(copy, input(configMap)), []);
    assert.equal(pending(copy), true, 'a ConfigMap does not make it compile');
    const verdicts = evaluate(copy, input(longAnnotation()));
    assert.equal(pending(copy), false);
    assert.deepEqual(brief(verdicts), brief(evaluate(original, input(longAnnotation()))));
    assert.equal(verdicts[0]?.result, 'fail');
  });

  void it('a version the original rejected is rejected on the copy without compiling, and the last good one stays in force', () => {
    const original = new RuleSet();
    const copy = copyOf(original);
    original.upsert(big(1));
    original.upsert(big(2, { type: 'no-such-type' }));
    const late = copyOf(original); // from a snapshot, as a replacement thread
    for (const rules of [original, copy, late]) {
      const state = rules.state('PortalClusterRule/big');
      assert.equal(state?.ready, false);
      assert.match(state?.message ?? '', /^generation 2 rejected, generation 1 stays in force: /);
      assert.equal(state?.message, original.state('PortalClusterRule/big')?.message);
      assert.equal(evaluate(rules, input(longAnnotation()))[0]?.result, 'fail', 'generation 1 still decides');
    }
    // A rule that never compiled: the copies deny with the original's reason.
    original.upsert({ ...clusterRule('broken', { validate: { message: 'm', schema: { type: 'no-such-type' } } }), metadata: { name: 'broken', generation: 1 } });
    const reason = (rules: RuleSet) => evaluate(rules, input(longAnnotation())).find((v) => v.rule === 'broken');
    assert.equal(reason(original)?.result, 'error');
    assert.deepEqual(brief([reason(copy)!]), brief([reason(original)!]));
    assert.deepEqual(brief([reason(copyOf(original))!]), brief([reason(original)!]));
  });

  void it('in the pool, a first-use compile longer than the evaluation deadline does not abandon the rule', async () => {
    const rules = new RuleSet();
    rules.upsert(big());
    // 20 ms per evaluation (+20 ms grace): compiling the 62 KB schema takes several times that.
    const pool = new EvaluationPool({ name: 'first-use', workers: 1, timeoutMs: 20 }, { rules }, { logger: pino({ level: 'silent' }), registry: new Registry() });
    after(() => pool.close());
    await pool.whenReady();
    const first = await pool.audit(input(longAnnotation()));
    assert.deepEqual(first.map((v) => v.result), ['fail'], JSON.stringify(first));
    assert.equal(pool.stats()['abandoned'], 0);
    // Compiled now: the next evaluation is an ordinary one.
    assert.deepEqual((await pool.audit(input(pod({ name: 'ok', namespace: 'default' })))).map((v) => v.result), ['pass']);
  });
});
