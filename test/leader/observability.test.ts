/**
 * Leader-election observability against the real embedded API server:
 * Kubernetes Events on the Lease (recorder.ts) when a replica becomes leader
 * and when it stops leading, and the four portal_leader_* metrics as a leader
 * and a follower see them (each elector has its own prom-client Registry).
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { CoreV1Event } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import type { ApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import { leaderElectionConfig } from '../../src/leader/config.ts';
import { LeaderElector } from '../../src/leader/elector.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { apiServer, clientFor, readLease, until } from './cluster.ts';

/**
 * Roomier than FAST: these tests count exact event and metric sequences, so
 * a renewal that misses its deadline on a busy machine (a spurious demotion
 * and re-election) must not happen. The handover itself is a release, which
 * does not wait for the lease to expire.
 */
const ROOMY = { leaseDurationMs: 6000, renewDeadlineMs: 4000, retryPeriodMs: 200 };

interface Running {
  elector: LeaderElector;
  registry: Registry;
  stop(): Promise<void>;
}

/** An elector as user `name` (identity `<name>_test`) with a Registry the test reads. */
function start(t: TestContext, api: ApiServer, name: string): Running {
  const registry = new Registry();
  const elector = new LeaderElector(leaderElectionConfig({ leaseNamespace: 'default', ...ROOMY }), {
    client: clientFor(api, name),
    identity: `${name}_test`,
    logger: silentLogger(),
    registry,
  });
  const controller = new AbortController();
  const done = elector.run(controller.signal);
  const stop = async () => {
    controller.abort();
    await done;
  };
  t.after(stop);
  return { elector, registry, stop };
}

/** The value of a metric without labels (for a histogram: the named sample, e.g. `_count`). */
async function metric(registry: Registry, name: string, sample = name): Promise<number> {
  const m = registry.getSingleMetric(name);
  assert.ok(m, `metric ${name} registered`);
  const { values } = await m.get();
  const v = values.find((x) => (x as { metricName?: string }).metricName === sample || (sample === name && (x as { metricName?: string }).metricName === undefined));
  assert.ok(v, `sample ${sample} of ${name}`);
  return v.value;
}

async function leaseEvents(api: ApiServer): Promise<CoreV1Event[]> {
  const list = await clientFor(api, 'admin').core.listNamespacedEvent({ namespace: 'default' });
  return list.items.filter((e) => e.involvedObject.kind === 'Lease');
}

test('Events on the Lease: "<id> became leader" and "<id> stopped leading", involvedObject = the Lease', async (t) => {
  const api = await apiServer(t);
  const a = start(t, api, 'a');
  await until('a to lead', 15000, () => a.elector.isLeader());
  const lease = await readLease(clientFor(api, 'admin'));
  const uid = lease.metadata?.uid;
  assert.ok(uid);

  const became = async (id: string) => (await leaseEvents(api)).find((e) => e.message === `${id} became leader`);
  await until('the BecameLeader event of a', 15000, async () => (await became('a_test')) !== undefined);
  const e = (await became('a_test'))!;
  assert.deepEqual(
    { apiVersion: e.involvedObject.apiVersion, kind: e.involvedObject.kind, name: e.involvedObject.name, namespace: e.involvedObject.namespace, uid: e.involvedObject.uid },
    { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', name: 'portal-leader', namespace: 'default', uid },
  );
  assert.equal(e.reason, 'LeaderElection');
  assert.equal(e.type, 'Normal');
  assert.equal(e.metadata.namespace, 'default');
  assert.equal(e.source?.component, 'portal');
  assert.equal(e.reportingInstance, 'a_test');
  assert.match(e.metadata.name ?? '', /^portal-leader\./);

  // A follower records nothing while it follows.
  const b = start(t, api, 'b');
  await until('b to observe a', 15000, () => b.elector.debugVars().lease_holder === 'a_test');
  assert.equal((await leaseEvents(api)).filter((x) => x.reportingInstance === 'b_test').length, 0);

  // Graceful stop: a releases (its run() flushes the event), b takes over.
  await a.stop();
  const stopped = (await leaseEvents(api)).find((x) => x.message === 'a_test stopped leading');
  assert.ok(stopped, 'the stopped-leading event is written before run() resolves');
  assert.equal(stopped.reason, 'LeaderElection');
  assert.equal(stopped.involvedObject.kind, 'Lease');
  assert.equal(stopped.involvedObject.name, 'portal-leader');
  assert.equal(stopped.involvedObject.namespace, 'default');
  assert.equal(stopped.involvedObject.uid, uid);
  await until('the BecameLeader event of b', 15000, async () => (await became('b_test')) !== undefined);
  assert.equal((await became('b_test'))?.involvedObject.uid, uid, 'same Lease object, new holder');
  // Exactly one event per transition, none duplicated.
  const messages = (await leaseEvents(api)).map((x) => x.message).sort();
  assert.deepEqual(messages, ['a_test became leader', 'a_test stopped leading', 'b_test became leader']);
});

test('metrics: is_leader, transitions, acquire duration and held seconds for a leader and a follower', async (t) => {
  const api = await apiServer(t);
  const a = start(t, api, 'a');
  await until('a to lead', 15000, () => a.elector.isLeader());
  const bStartedAt = performance.now();
  const b = start(t, api, 'b');
  await until('b to observe a', 15000, () => b.elector.debugVars().lease_holder === 'a_test');

  assert.equal(await metric(a.registry, 'portal_leader_is_leader'), 1);
  assert.equal(await metric(a.registry, 'portal_leader_transitions_total'), 1);
  assert.equal(await metric(a.registry, 'portal_leader_acquire_duration_seconds', 'portal_leader_acquire_duration_seconds_count'), 1);
  const acquired = await metric(a.registry, 'portal_leader_acquire_duration_seconds', 'portal_leader_acquire_duration_seconds_sum');
  // No Lease existed: a created it on the first try.
  assert.ok(acquired >= 0 && acquired < 1, `acquire took ${acquired}s`);
  const held1 = await metric(a.registry, 'portal_leader_held_seconds_total');
  await until('held seconds to grow while leading', 15000, async () => (await metric(a.registry, 'portal_leader_held_seconds_total')) > held1 + 0.1);

  assert.equal(await metric(b.registry, 'portal_leader_is_leader'), 0);
  assert.equal(await metric(b.registry, 'portal_leader_transitions_total'), 0);
  assert.equal(await metric(b.registry, 'portal_leader_acquire_duration_seconds', 'portal_leader_acquire_duration_seconds_count'), 0);
  assert.equal(await metric(b.registry, 'portal_leader_held_seconds_total'), 0);

  // Handover: a stops (releases), b acquires.
  const campaignStart = performance.now();
  await a.stop();
  await until('b to lead', 15000, () => b.elector.isLeader());
  assert.equal(await metric(a.registry, 'portal_leader_is_leader'), 0);
  assert.equal(await metric(a.registry, 'portal_leader_transitions_total'), 1, 'a counted one term only');
  const heldA = await metric(a.registry, 'portal_leader_held_seconds_total');
  assert.ok(heldA > held1, `held ${heldA}s`);

  assert.equal(await metric(b.registry, 'portal_leader_is_leader'), 1);
  assert.equal(await metric(b.registry, 'portal_leader_transitions_total'), 1);
  assert.equal(await metric(b.registry, 'portal_leader_acquire_duration_seconds', 'portal_leader_acquire_duration_seconds_count'), 1);
  // b campaigned from its start until the handover: at least until a stopped, at most until now.
  const bAcquire = (await metric(b.registry, 'portal_leader_acquire_duration_seconds', 'portal_leader_acquire_duration_seconds_sum')) * 1000;
  assert.ok(bAcquire >= campaignStart - bStartedAt && bAcquire <= performance.now() - bStartedAt, `b acquire ${bAcquire}ms`);
  await until('b held seconds to grow', 15000, async () => (await metric(b.registry, 'portal_leader_held_seconds_total')) > 0.05);

  // The former leader's counter stays where it was (a counter never goes back, and it no longer grows).
  await until('b to lead for a while', 15000, async () => (await metric(b.registry, 'portal_leader_held_seconds_total')) > 0.3);
  assert.equal(await metric(a.registry, 'portal_leader_held_seconds_total'), heldA);

  // The exposition text a scrape would see.
  const text = await b.registry.metrics();
  assert.match(text, /^portal_leader_is_leader 1$/m);
  assert.match(text, /^portal_leader_transitions_total 1$/m);
  assert.match(text, /^portal_leader_acquire_duration_seconds_bucket\{le="\+Inf"\} 1$/m);
  assert.match(text, /^# TYPE portal_leader_held_seconds_total counter$/m);
});
