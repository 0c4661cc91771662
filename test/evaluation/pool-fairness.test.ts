// Issue 31 item 2: fair shares in the evaluation pool, against real worker
// threads. A namespace whose evaluations take long waits behind its own load
// (another namespace's review is answered before the flood's later ones),
// fills only its own share of the queue (refused as overload naming it),
// and an evaluation that cannot start in time for its request is refused as
// overload, not left to eat its budget in the queue. Asserted by the order
// of events and the answers, not by timing.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { Registry } from 'prom-client';
import { EvaluationPool } from '../../src/evaluation/pool.ts';
import type { EvaluationPoolConfig } from '../../src/evaluation/pool-config.ts';
import { RuleSet, type KubeObject } from '../../src/policy/index.ts';
import { input, namespacedRule, pod } from '../policy/support.ts';
import { decideByReview, hugePod, reviewOf, slowRule } from './support.ts';

const logger = pino({ level: 'silent' });
const pools: EvaluationPool[] = [];
after(() => Promise.all(pools.map((p) => p.close())));

async function newPool(rules: RuleSet, config: Partial<EvaluationPoolConfig>): Promise<EvaluationPool> {
  const pool = new EvaluationPool({ name: 'test', workers: 1, timeoutMs: 10_000, ...config }, { rules }, { logger, registry: new Registry() });
  pools.push(pool);
  await pool.whenReady();
  return pool;
}

/** A rule whose evaluation walks every `args` entry with a regex: ~100s of ms on a Pod of 20k of them (CEL cost ~400k, under the 1M limit). */
const ARGS_RULE = namespacedRule('tenant-a', 'args-format', {
  validate: { message: 'args must be key=value', cel: { expressions: [{ expression: "object.spec.containers.all(c, !has(c.args) || c.args.all(a, a.matches('^([a-z0-9]+[-.])*[a-z0-9]+=[a-z0-9]+$')))" }] } },
});

function argsPod(n: number): KubeObject {
  const p = pod({ namespace: 'tenant-a' }) as { spec: { containers: { args?: string[] }[] } };
  p.spec.containers[0]!.args = Array.from({ length: n }, (_, i) => `opt-${i}.x=value${i}`);
  return p as unknown as KubeObject;
}

void describe('evaluation pool: fair shares', { timeout: 300_000 }, () => {
  void it("another namespace's review is answered before a flooding namespace's later ones", async () => {
    const rules = new RuleSet();
    rules.upsert(ARGS_RULE);
    const pool = await newPool(rules, {});
    const heavy = input(argsPod(20_000), { namespace: 'tenant-a', name: 'flood' });
    const events: string[] = [];
    const flood = Array.from({ length: 4 }, (_, i) => decideByReview(pool, heavy).then((d) => (events.push(`a${i}`), d)));
    const bob = decideByReview(pool, input(pod({ namespace: 'tenant-b' }), { namespace: 'tenant-b', name: 'web' })).then((d) => (events.push('b'), d));
    assert.equal((await bob).allowed, true);
    for (const d of await Promise.all(flood)) assert.equal(d.allowed, true);
    // At most the evaluations already running or claimed when bob's arrived go before it: never the whole flood.
    assert.ok(events.indexOf('b') <= 2, events.join(' '));
  });

  void it("the audit's evaluations are queued by namespace too: one namespace's heavy objects do not hold another's report", async () => {
    const rules = new RuleSet();
    rules.upsert(ARGS_RULE);
    // As the audit's pool is built (cluster-mode.ts): no request waits on it.
    const pool = await newPool(rules, {});
    const heavy = input(argsPod(20_000), { namespace: 'tenant-a', name: 'flood', operation: 'AUDIT' });
    const events: string[] = [];
    const flood = Array.from({ length: 4 }, (_, i) => pool.audit(heavy).then((v) => (events.push(`a${i}`), v)));
    const other = pool.audit(input(pod({ namespace: 'tenant-b' }), { namespace: 'tenant-b', name: 'web', operation: 'AUDIT' })).then((v) => (events.push('b'), v));
    assert.deepEqual(await other, []);
    for (const v of await Promise.all(flood)) assert.equal(v[0]?.result, 'pass');
    assert.ok(events.indexOf('b') <= 2, events.join(' '));
  });

  void it("a namespace fills only its own share of the queue: refused as overload naming it, other namespaces are not", async () => {
    const rules = new RuleSet();
    rules.upsert(slowRule('slow-nonroot', 'Deny'));
    const pool = await newPool(rules, { timeoutMs: 1000, flowQueue: 2 });
    const huge = input(hugePod(false), { namespace: 'tenant-a', name: 'huge' });
    const stuck = [decideByReview(pool, huge), decideByReview(pool, huge)];
    await assert.rejects(decideByReview(pool, huge), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'PORTAL_QUEUE_FULL');
      assert.equal(err.message, 'portal is overloaded: namespace tenant-a already has 2 evaluations waiting or running (its share of the 1 test evaluation worker); refused rather than queued. This is overload, not a policy verdict');
      return true;
    });
    const other = input(pod({ namespace: 'tenant-b' }), { namespace: 'tenant-b', name: 'web' });
    // Not refused: its real verdict (the rule matches every namespace's Pods; this one has no lists to compare, so it passes).
    const d = await decideByReview(pool, other);
    assert.deepEqual(d, { allowed: true, warnings: [] });
    for (const d of await Promise.all(stuck)) assert.equal(d.allowed, false);
    assert.equal(pool.stats().rejected, 1);
  });

  void it('an evaluation that cannot start in time for its request is refused as overload; its budget never counted the wait', async () => {
    const rules = new RuleSet();
    rules.upsert(slowRule('slow-nonroot', 'Deny'));
    // Answer due 1.5 s after submission: a first evaluation must start within 400 ms to have its whole 1 s.
    const pool = await newPool(rules, { timeoutMs: 1000, requestMs: 1500, graceMs: 100 });
    // Runs until abandoned at its deadline (1 s from its start), holding the only worker.
    const blocker = pool.review(reviewOf(input(hugePod(false), { namespace: 'tenant-a', name: 'huge' })));
    const behind = pool.review(reviewOf(input(pod({ namespace: 'tenant-a' }), { namespace: 'tenant-a', name: 'small' })));
    await assert.rejects(behind, (err: Error & { code?: string }) => {
      assert.equal(err.code, 'PORTAL_QUEUE_FULL');
      assert.match(err.message, /^portal is overloaded: the evaluation waited \d+ ms behind the load of namespace tenant-a for one of the 1 test evaluation worker and could not start in time to be answered within the webhook's timeout\. This is overload, not a policy verdict$/);
      return true;
    });
    const a = await blocker;
    assert.equal(a.outcome.decision, 'deny');
    assert.match(a.outcome.response.status?.message ?? '', /^rule slow-nonroot could not be evaluated: the evaluation deadline \(1000 ms\) passed while it ran/);
    assert.equal(pool.stats().rejected, 1);
  });
});
