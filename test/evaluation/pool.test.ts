// Issue 16 item 1: evaluation in worker threads with a hard deadline. The
// pool against real worker threads (piscina): rule changes reach every
// worker, including one started to replace a worker that was terminated at
// the deadline; a task waits for the revision it was submitted at; a rule
// stuck past the deadline costs its worker and gives `error` for that rule
// only; a full queue refuses at once.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { Registry } from 'prom-client';
import { EvaluationPool } from '../../src/evaluation/pool.ts';
import { exemptNamespaces } from '../../src/policy/review/answer.ts';
import { NamespaceLabelStore } from '../../src/policy/namespace-label-store.ts';
import { decideAdmission, evaluate, RuleSet, type KubeObject } from '../../src/policy/index.ts';
import { ParamStore, VapSet, type ValidatingAdmissionPolicy, type ValidatingAdmissionPolicyBinding, type VapAttributes } from '../../src/policy/vap/index.ts';
import { clusterRule, input, pod } from '../policy/support.ts';
import { decideByReview, hugePod, slowRule } from './support.ts';

const logger = pino({ level: 'silent' });
const pools: EvaluationPool[] = [];
after(() => Promise.all(pools.map((p) => p.close())));

function newPool(rules: RuleSet, opts: { workers?: number; timeoutMs?: number; maxQueue?: number; pipeline?: number } = {}, vap?: { vaps: VapSet; params: ParamStore }): EvaluationPool {
  const pool = new EvaluationPool(
    {
      name: 'test',
      workers: opts.workers ?? 1,
      timeoutMs: opts.timeoutMs ?? 10_000,
      ...(opts.maxQueue !== undefined ? { maxQueue: opts.maxQueue } : {}),
      ...(opts.pipeline !== undefined ? { pipeline: opts.pipeline } : {}),
    },
    { rules, ...vap },
    { logger, registry: new Registry() },
  );
  pools.push(pool);
  return pool;
}

/** Worker start-up (a thread, and tsx compiling the engine) takes seconds on a busy machine: out of the deadline tests' way. */
async function warm(pool: EvaluationPool): Promise<void> {
  await pool.whenReady();
}

void describe('evaluation pool', { timeout: 600_000 }, () => {
  void it('a wait for workers ends when the pool closes: rejected as closed, never pending for ever', async () => {
    const pool = newPool(new RuleSet());
    // Two synced threads never come from a one-worker pool: only close() can end this wait.
    const waiting = pool.whenReady(2);
    await pool.whenReady(1);
    await pool.close();
    await assert.rejects(waiting, (err: Error & { code?: string }) => err.code === 'PORTAL_CLOSED' && /pool is closed/.test(err.message));
  });

  void it('decides as decideAdmission does, in a worker', async () => {
    const rules = new RuleSet();
    rules.upsert(clusterRule('no-privileged'));
    const pool = newPool(rules);
    await warm(pool);
    for (const privileged of [false, true]) {
      const inp = input(pod({ privileged }), { namespace: 'default', name: 'web' });
      assert.deepEqual(await decideByReview(pool, inp), decideAdmission(rules, inp));
    }
    const audit = input(pod({ privileged: true }), { namespace: 'default', name: 'web', operation: 'AUDIT' });
    assert.deepEqual(await pool.audit(audit), evaluate(rules, audit));
  });

  void it('a task waits for the revision it was submitted at: a rule change is in force for the next request on every worker', async () => {
    const rules = new RuleSet();
    rules.upsert(clusterRule('no-privileged', { enforcement: 'Warn' }));
    const pool = newPool(rules, { workers: 2 });
    await warm(pool);
    const inp = input(pod({ privileged: true }), { namespace: 'default', name: 'web' });
    // Both workers busy at once, so both hold the rules.
    const before = await Promise.all([decideByReview(pool, inp), decideByReview(pool, inp), decideByReview(pool, inp), decideByReview(pool, inp)]);
    for (const d of before) assert.equal(d.allowed, true);
    for (let generation = 2; generation <= 5; generation++) {
      const enforcement = generation % 2 === 0 ? 'Deny' : 'Warn';
      rules.upsert(clusterRule('no-privileged', { enforcement }, generation));
      // Submitted right after the change, to workers that idle (blocked on Atomics.wait) and have not read it yet.
      const after = await Promise.all([decideByReview(pool, inp), decideByReview(pool, inp), decideByReview(pool, inp), decideByReview(pool, inp)]);
      for (const d of after) assert.equal(d.allowed, enforcement === 'Warn', `generation ${generation} (${enforcement}) is in force`);
    }
    rules.remove('PortalClusterRule/no-privileged');
    rules.upsert(clusterRule('other', { match: { kinds: [{ apiGroups: [''], kinds: ['ConfigMap'] }] } }));
    assert.deepEqual(await decideByReview(pool, inp), { allowed: true, warnings: [] });
  });

  void it('a rule stuck past the deadline is abandoned, its worker replaced; only that rule errs', async () => {
    const rules = new RuleSet();
    rules.upsert(clusterRule('no-privileged'));
    rules.upsert(slowRule('slow-nonroot', 'Warn'));
    const pool = newPool(rules, { timeoutMs: 1000, workers: 2 });
    await warm(pool);
    const huge = hugePod(true);
    const d = await decideByReview(pool, input(huge, { namespace: 'default', name: 'web' }));
    // The Deny rule kept its real verdict (fail), the slow Warn rule is an error (a warning under failurePolicy Fail).
    assert.equal(d.allowed, false);
    assert.match((d as { message: string }).message, /^no-privileged: Privileged containers are not allowed/);
    assert.deepEqual(d.warnings, ['rule slow-nonroot could not be evaluated: the evaluation deadline (1000 ms) passed while it ran; it was abandoned']);
    assert.equal(pool.stats().abandoned, 1);

    // The replacement worker starts from a snapshot, and later changes reach it.
    rules.upsert(clusterRule('no-privileged', { enforcement: 'Warn' }, 2));
    rules.remove('PortalClusterRule/slow-nonroot');
    const small = input(pod({ privileged: true }), { namespace: 'default', name: 'web' });
    const later = await decideByReview(pool, small);
    assert.deepEqual(later, decideAdmission(rules, small));
    assert.equal(later.allowed, true);
    assert.equal(pool.stats().abandoned, 1);
  });

  void it('a Deny rule stuck past the deadline denies (failurePolicy Fail), the audit reports error', async () => {
    const rules = new RuleSet();
    rules.upsert(slowRule('slow-nonroot', 'Deny'));
    const pool = newPool(rules, { timeoutMs: 1000, workers: 2 });
    await warm(pool);
    const huge = hugePod(false);
    const d = await decideByReview(pool, input(huge, { namespace: 'default', name: 'web' }));
    assert.deepEqual(d, {
      allowed: false,
      code: 403,
      message: 'rule slow-nonroot could not be evaluated: the evaluation deadline (1000 ms) passed while it ran; it was abandoned',
      warnings: [],
      deniedBy: ['slow-nonroot'],
    });
    const verdicts = await pool.audit(input(huge, { namespace: 'default', name: 'web', operation: 'AUDIT' }));
    assert.deepEqual(
      verdicts.map((v) => [v.rule, v.result]),
      [['slow-nonroot', 'error']],
    );
    // Two abandoned while running (and the audit's retry may also have waited past its deadline for a replacement).
    assert.ok((pool.stats().abandoned as number) >= 2);
  });

  void it("the audit's deadlines count from a worker's start: neither the queue nor a replacement worker's start-up eats them", async () => {
    const rules = new RuleSet();
    rules.upsert(clusterRule('no-privileged'));
    rules.upsert(slowRule('slow-nonroot', 'Deny'));
    // One worker and a short deadline: a replacement's start-up (a thread, tsx compiling the engine) is about as long.
    const pool = new EvaluationPool({ name: 'test', workers: 1, timeoutMs: 1000 }, { rules }, { logger, registry: new Registry() });
    pools.push(pool);
    // Not warmed: the first evaluations wait for the worker's start-up too.
    const huge = input(hugePod(true), { namespace: 'default', name: 'huge', operation: 'AUDIT' });
    const small = input(pod({ privileged: true }), { namespace: 'default', name: 'web', operation: 'AUDIT' });
    // Submitted together: the small ones wait behind the stuck rule, its abandon and the replacement worker's start-up.
    const [slow, ...others] = await Promise.all([pool.audit(huge), pool.audit(small), pool.audit(small)]);
    // The stuck rule errs; no-privileged keeps its real verdict, evaluated again by the replacement with a fresh deadline.
    assert.deepEqual(
      slow!.map((v) => [v.rule, v.result]),
      [
        ['no-privileged', 'fail'],
        ['slow-nonroot', 'error'],
      ],
    );
    for (const verdicts of others) assert.deepEqual(verdicts, evaluate(rules, small));
    assert.ok((pool.stats().abandoned as number) >= 1);
  });

  void it('closing refuses the evaluations that wait for a worker without a deadline of their own: the close does not wait on them', async () => {
    const rules = new RuleSet();
    rules.upsert(clusterRule('no-privileged'));
    // One batch at a time, of one evaluation, on a worker still starting: the second waits in the pool.
    const pool = new EvaluationPool({ name: 'test', workers: 1, timeoutMs: 10_000, maxBatch: 1, pipeline: 1 }, { rules }, { logger, registry: new Registry() });
    pools.push(pool);
    const audit = input(pod({ privileged: true }), { namespace: 'default', name: 'web', operation: 'AUDIT' });
    const sent = pool.audit(audit);
    const waiting = pool.audit(audit);
    await new Promise((resolve) => setImmediate(resolve)); // the first is sent
    const closed = pool.close();
    await assert.rejects(waiting, (err: Error & { code?: string }) => err.code === 'PORTAL_CLOSED' && /pool is closed/.test(err.message));
    // The one sent is still evaluated, once the worker is up, before the pool closes.
    assert.deepEqual(await sent, evaluate(rules, audit));
    await closed;
  });

  void it('evaluations submitted together travel in one task; each gets its own answer', async () => {
    const rules = new RuleSet();
    rules.upsert(clusterRule('no-privileged'));
    const pool = newPool(rules);
    await warm(pool);
    const inputs = Array.from({ length: 10 }, (_, i) => input(pod({ privileged: i % 2 === 0 }), { namespace: 'default', name: `web-${i}` }));
    const before = pool.stats() as { batches: number; batchedItems: number };
    const decisions = await Promise.all(inputs.map((inp) => decideByReview(pool, inp)));
    decisions.forEach((d, i) => assert.deepEqual(d, decideAdmission(rules, inputs[i]!), `web-${i}`));
    const after = pool.stats() as { batches: number; batchedItems: number };
    assert.equal(after.batchedItems - before.batchedItems, 10);
    assert.ok(after.batches - before.batches < 10, `${after.batches - before.batches} tasks for 10 evaluations submitted together`);
  });

  // Pipeline 1: one batch per worker, as on a replica pinned to one core (pool-config.ts, pipelineFor).
  for (const pipeline of [2, 1]) void it(`a slow evaluation does not hold the others sent in its batch: they are taken back and answered by another worker (${pipeline} batches per worker)`, async () => {
    const rules = new RuleSet();
    rules.upsert(clusterRule('no-privileged'));
    rules.upsert(slowRule('slow-nonroot', 'Deny'));
    const pool = newPool(rules, { timeoutMs: 5000, workers: 2, pipeline });
    await warm(pool);
    const huge = hugePod(false);
    // The threads compile a rule on its first use (adr/0021): one untimed round first, so that both have
    // compiled the rules (the slow one's worker, and the one the others are taken back to) and the round
    // below orders answers by evaluation, not by which thread compiled first.
    await Promise.all([huge, ...[0, 1, 2, 3].map((i) => pod({ privileged: i % 2 === 0 }))].map((o, i) => decideByReview(pool, input(o, { namespace: 'tenant-a', name: `warm-${i}` }))));
    const events: string[] = [];
    // Submitted in one turn, the slow one first: one batch, whose worker claims the slow one.
    const slow = decideByReview(pool, input(huge, { namespace: 'tenant-a', name: 'huge' })).then((d) => {
      events.push('slow');
      return d;
    });
    // In the slow one's namespace, so that fair queuing (by namespace) batches them with it.
    const inputs = Array.from({ length: 4 }, (_, i) => input(pod({ privileged: i % 2 === 0 }), { namespace: 'tenant-a', name: `web-${i}` }));
    const others = inputs.map((inp, i) =>
      decideByReview(pool, inp).then((d) => {
        events.push(`other ${i}`);
        return d;
      }),
    );
    const decided = await Promise.all(others);
    decided.forEach((d, i) => assert.deepEqual(d, decideAdmission(rules, inputs[i]!), `web-${i}`));
    const d = await slow;
    assert.deepEqual(events.slice(-1), ['slow'], 'the others were answered while the slow one ran');
    // Its own verdict (a violation, or the error at the deadline on a slower machine): a denial either way.
    assert.equal(d.allowed, false);
    assert.match((d as { message: string }).message, /slow-nonroot/);
    assert.ok((pool.stats().reclaims as number) >= 1);
  });

  void it('when every worker is stuck and the queue is full, a new task is refused at once', async () => {
    const rules = new RuleSet();
    rules.upsert(slowRule('slow-nonroot', 'Deny'));
    const pool = newPool(rules, { timeoutMs: 2_000, maxQueue: 1 });
    await warm(pool);
    const object = hugePod(false);
    const huge = input(object, { namespace: 'default', name: 'web' });
    const stuck = [decideByReview(pool, huge), decideByReview(pool, huge)]; // one running, one queued
    await assert.rejects(decideByReview(pool, huge), (err: Error) => {
      assert.match(err.message, /^portal is overloaded: 1 evaluations are already waiting for the 1 test evaluation worker; refused rather than queued\. This is overload, not a policy verdict$/);
      return true;
    });
    for (const d of await Promise.all(stuck)) assert.equal(d.allowed, false);
    assert.equal(pool.stats().rejected, 1);
  });

  void it('ValidatingAdmissionPolicies, their bindings and params reach the workers', async () => {
    const rules = new RuleSet();
    const vaps = new VapSet();
    const params = new ParamStore();
    const pool = newPool(rules, {}, { vaps, params });
    await warm(pool);
    const policy: ValidatingAdmissionPolicy = {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: 'max-replicas', generation: 1 },
      spec: {
        paramKind: { apiVersion: 'v1', kind: 'ConfigMap' },
        matchConstraints: { resourceRules: [{ apiGroups: ['apps'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['deployments'] }] },
        validations: [{ expression: 'object.spec.replicas <= int(params.data.max)', message: 'too many replicas' }],
      },
    } as unknown as ValidatingAdmissionPolicy;
    const binding = {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: 'max-replicas-binding', resourceVersion: '1' },
      spec: { policyName: 'max-replicas', validationActions: ['Deny'], paramRef: { name: 'limits', namespace: 'default', parameterNotFoundAction: 'Deny' } },
    } as unknown as ValidatingAdmissionPolicyBinding;
    const deployment = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web', namespace: 'default' }, spec: { replicas: 5 } } as KubeObject;
    const attrs: VapAttributes = {
      operation: 'AUDIT',
      kind: { group: 'apps', version: 'v1', kind: 'Deployment' },
      resource: { group: 'apps', version: 'v1', resource: 'deployments' },
      subResource: '',
      namespace: 'default',
      name: 'web',
      namespaced: true,
      object: deployment,
      oldObject: null,
    } as VapAttributes;
    const ns = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'default' } } as KubeObject;
    const local = () => vaps.evaluate(attrs, { namespaceObject: ns, params });
    assert.deepEqual(await pool.vap(attrs, ns), []);
    vaps.upsertPolicy(policy);
    vaps.upsertBinding(binding);
    params.setScope('v1/ConfigMap', { ok: true, namespaced: true });
    params.put('v1/ConfigMap', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'limits', namespace: 'default' }, data: { max: '3' } } as KubeObject);
    const failing = await pool.vap(attrs, ns);
    assert.deepEqual(failing, local());
    assert.equal(failing[0]?.result, 'fail');
    params.put('v1/ConfigMap', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'limits', namespace: 'default' }, data: { max: '10' } } as KubeObject);
    const passing = await pool.vap(attrs, ns);
    assert.deepEqual(passing, local());
    assert.equal(passing[0]?.result, 'pass');
  });

  void it('answers a whole review in a worker, with the namespace labels mirrored like the rules and the exempt namespaces', async () => {
    const rules = new RuleSet();
    rules.upsert(clusterRule('no-privileged-in-prod', { match: { namespaceSelector: { matchLabels: { env: 'prod' } } } }));
    const namespaces = new NamespaceLabelStore();
    namespaces.set('shop', { env: 'dev' });
    const pool = new EvaluationPool({ name: 'test', workers: 1, timeoutMs: 10_000, exempt: exemptNamespaces(['portal-system']) }, { rules, namespaces }, { logger, registry: new Registry() });
    pools.push(pool);
    await warm(pool);
    const review = (namespace: string, uid: string): string =>
      JSON.stringify({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: { uid, kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', namespace, name: 'web', object: pod({ namespace, privileged: true }) },
      });
    const answer = async (namespace: string, uid: string) => {
      const a = await pool.review(review(namespace, uid));
      return { decision: a.outcome.decision, request: a.outcome.request, wire: JSON.parse(a.payload) as { response: { uid: string; allowed: boolean; status?: { code: number } } } };
    };
    const dev = await answer('shop', 'u1');
    assert.equal(dev.decision, 'allow');
    assert.deepEqual(dev.wire.response, { uid: 'u1', allowed: true });
    assert.deepEqual(dev.request, { uid: 'u1', operation: 'CREATE', kind: { group: '', version: 'v1', kind: 'Pod' }, namespace: 'shop', name: 'web' });
    // A label change reaches the worker before the next review (same revision order as rule changes).
    namespaces.set('shop', { env: 'prod' });
    const prod = await answer('shop', 'u2');
    assert.equal(prod.decision, 'deny');
    assert.equal(prod.wire.response.uid, 'u2');
    assert.equal(prod.wire.response.status?.code, 403);
    // An exempt namespace is allowed unevaluated, whatever its labels.
    namespaces.set('portal-system', { env: 'prod' });
    assert.equal((await answer('portal-system', 'u4')).decision, 'exempt');
    // Malformed and too deep: the 400s, from the worker.
    const bad = await pool.review('{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u5"}}');
    assert.equal(bad.outcome.decision, 'invalid');
    assert.equal(bad.outcome.httpStatus, 400);
    assert.equal((JSON.parse(bad.payload) as { response: { uid: string } }).response.uid, 'u5');
    assert.equal((await pool.review('['.repeat(100_000))).outcome.httpStatus, 400);
  });
});
