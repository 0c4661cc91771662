// Issue 18 on the evaluation pool (adr/0013, adr/0014): PortalExceptions reach
// the worker threads through the RuleSet's replicated changes, and a worker
// judges them exactly as the main thread does — whether it got them in its
// start-up snapshot or as a change afterwards, with the same
// --exception-namespaces and --max-exception-lifetime, and with expiry judged
// at the evaluation's `now`.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { Registry } from 'prom-client';
import { EvaluationPool } from '../../src/evaluation/pool.ts';
import { decideAdmission, evaluate, exceptionKey, RuleSet, type ExceptionOptions, type RuleSetChange } from '../../src/policy/index.ts';
import { clusterRule, exception, input, pod } from '../policy/support.ts';
import { decideByReview } from './support.ts';

const logger = pino({ level: 'silent' });
const pools: EvaluationPool[] = [];
after(() => Promise.all(pools.map((p) => p.close())));

async function newPool(rules: RuleSet, workers = 2): Promise<EvaluationPool> {
  const pool = new EvaluationPool({ name: 'test', workers, timeoutMs: 10_000 }, { rules }, { logger, registry: new Registry() });
  pools.push(pool);
  await pool.whenReady();
  return pool;
}

const privileged = (namespace: string, name = 'node-agent-1') => input(pod({ privileged: true, namespace, name }), { namespace, name });

/** Rules plus one covering exception, as a RuleSet on the main thread holds them. */
function ruleSet(options: ExceptionOptions = {}): RuleSet {
  const rules = new RuleSet(options);
  rules.upsert(clusterRule('no-priv'));
  return rules;
}

void describe('exceptions on the evaluation pool', { timeout: 300_000 }, () => {
  void it('a snapshot replays options, rules and exceptions: a copy judges every input as the original does', () => {
    const original = ruleSet({ exceptionNamespaces: ['portal-system'], maxLifetimeMs: 7 * 86_400_000 });
    original.upsertException(exception('monitoring', 'agent', { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: ['node-agent-*'] } }, { creationTimestamp: '2026-06-01T00:00:00Z' }));
    original.upsertException(exception('monitoring', 'short', { expiresAt: '2026-06-02T00:00:00Z' }, { creationTimestamp: '2026-06-01T00:00:00Z' }));
    original.upsertException(exception('portal-system', 'everywhere', { expiresAt: '2026-06-03T00:00:00Z' }, { creationTimestamp: '2026-06-01T00:00:00Z' }));
    original.upsertException({ apiVersion: 'portal.dev/v1alpha1', kind: 'PortalException', metadata: { namespace: 'monitoring', name: 'broken' }, spec: { rules: [] } });
    // As the pool sends it: structured-cloned.
    const changes = structuredClone(original.snapshot());
    assert.equal(changes[0]?.op, 'options', 'the options come first, before any exception is compiled');
    const copy = new RuleSet();
    for (const c of changes) copy.apply(c);
    assert.deepEqual(copy.options, original.options);
    assert.deepEqual(copy.exceptionStates(), original.exceptionStates());
    for (const at of ['2026-06-01T12:00:00Z', '2026-06-02T12:00:00Z', '2026-06-20T00:00:00Z']) {
      for (const [ns, name] of [['monitoring', 'node-agent-1'], ['monitoring', 'web'], ['team-a', 'web'], ['portal-system', 'x']] as const) {
        const inp = { ...privileged(ns, name), now: Date.parse(at), operation: 'AUDIT' as const };
        assert.deepEqual(evaluate(copy, inp), evaluate(original, inp), `${ns}/${name} at ${at}`);
      }
    }
  });

  void it('a copy of a copy too: options applied to a RuleSet that holds exceptions compile them again', () => {
    const copy = new RuleSet();
    copy.upsertException(exception('portal-system', 'everywhere'));
    const seen: RuleSetChange[] = [];
    copy.onChange((c) => seen.push(c));
    assert.equal(copy.exceptionStates()[0]?.privileged, false);
    copy.apply({ op: 'options', options: { exceptionNamespaces: ['portal-system'] } });
    assert.equal(copy.exceptionStates()[0]?.privileged, true, 'judged with the new options');
    assert.deepEqual(seen.map((c) => c.op), ['options', 'upsertException']);
  });

  void it('workers judge exceptions from their snapshot and from later changes, as decideAdmission does on the main thread', async () => {
    const rules = ruleSet({ exceptionNamespaces: ['portal-system'] });
    // In force before the workers start: reaches them in the snapshot.
    rules.upsertException(exception('monitoring', 'agent', { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: ['node-agent-*'] } }));
    const pool = await newPool(rules);
    const agent = privileged('monitoring');
    const elsewhere = privileged('team-a', 'web');

    // Several at once, so both workers answer.
    for (const d of await Promise.all([1, 2, 3, 4].map(() => decideByReview(pool, agent)))) {
      assert.equal(d.allowed, true);
      assert.deepEqual(d.exempted, [{ rule: 'no-priv', exception: 'monitoring/agent' }]);
      assert.deepEqual(d, decideAdmission(rules, agent));
    }
    assert.equal((await decideByReview(pool, elsewhere)).allowed, false, 'an exception exempts only its own namespace');

    // A privileged exception, created while the workers run: a change on the channel.
    rules.upsertException(exception('portal-system', 'everywhere', { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: ['web'] } }));
    for (const d of await Promise.all([1, 2, 3, 4].map(() => decideByReview(pool, elsewhere)))) {
      assert.deepEqual(d.exempted, [{ rule: 'no-priv', exception: 'portal-system/everywhere' }], 'every worker has it for the next request');
    }

    // Deleted: denied again on every worker.
    rules.removeException(exceptionKey({ metadata: { namespace: 'monitoring', name: 'agent' } }));
    for (const d of await Promise.all([1, 2, 3, 4].map(() => decideByReview(pool, agent)))) assert.equal(d.allowed, false);

    // Expiry is judged when the worker evaluates: no change is sent when an exception expires.
    const expiresAt = Date.now() + 1500;
    rules.upsertException(exception('monitoring', 'brief', { expiresAt: new Date(expiresAt).toISOString() }));
    assert.equal((await decideByReview(pool, agent)).allowed, true, 'in force before its expiresAt');
    const remaining = expiresAt - Date.now();
    if (remaining > 0) await new Promise((r) => setTimeout(r, remaining + 1));
    for (const d of await Promise.all([1, 2, 3, 4].map(() => decideByReview(pool, agent)))) assert.equal(d.allowed, false, 'expired on every worker');

    // An audit task carries the instant it is judged at (the audit fixes one per object).
    const audit = { ...agent, operation: 'AUDIT' as const, now: expiresAt - 1 };
    assert.deepEqual(await pool.audit(audit), evaluate(rules, audit));
    assert.equal((await pool.audit(audit)).find((v) => v.rule === 'no-priv')?.exception, 'monitoring/brief');
  });

  void it('--max-exception-lifetime reaches the workers: an exception that outlives it exempts nothing there either', async () => {
    const rules = ruleSet({ maxLifetimeMs: 3_600_000 });
    const created = new Date().toISOString();
    rules.upsertException(exception('monitoring', 'forever', {}, { creationTimestamp: created }));
    const pool = await newPool(rules, 1);
    const agent = privileged('monitoring');
    assert.equal(decideAdmission(rules, agent).allowed, false, 'refused on the main thread');
    assert.equal((await decideByReview(pool, agent)).allowed, false, 'and in the worker');
    rules.upsertException(exception('monitoring', 'forever', { expiresAt: new Date(Date.now() + 600_000).toISOString() }, { creationTimestamp: created, generation: 2 }));
    assert.equal((await decideByReview(pool, agent)).allowed, true, 'within the cap: in force in the worker');
  });
});
