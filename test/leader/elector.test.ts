/**
 * client-go's leaderelection scenarios (docs/design.md §10.4), each against the real
 * embedded API server through client-node, plus Portal's watch-based handover.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { V1MicroTime } from '@kubernetes/client-node';
import { mergePatchOptions, type KubeClient } from '../../src/kube/client.ts';
import { apiServer, clientFor, LEASE_PATH, readLease, requestCount, runElector, until } from './cluster.ts';

const MICRO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

async function createLease(admin: KubeClient, spec: { holderIdentity: string; leaseDurationSeconds: number; leaseTransitions?: number }) {
  const now = new V1MicroTime(new Date());
  return admin.coordination.createNamespacedLease({
    namespace: 'default',
    body: { metadata: { name: 'portal-leader', namespace: 'default' }, spec: { ...spec, acquireTime: now, renewTime: now, leaseTransitions: spec.leaseTransitions ?? 0 } },
  });
}

test('acquires when no Lease exists (creates it, MicroTime with six digits)', async (t) => {
  const api = await apiServer(t);
  const a = runElector(t, api, 'a');
  await until('a to lead', 2000, () => a.elector.isLeader());
  const lease = await readLease(clientFor(api, 'admin'));
  assert.equal(lease.spec?.holderIdentity, 'a_test');
  assert.equal(lease.spec?.leaseDurationSeconds, 1);
  assert.equal(lease.spec?.leaseTransitions, 0);
  assert.match(String(lease.spec?.renewTime), MICRO);
  assert.match(String(lease.spec?.acquireTime), MICRO);
  assert.deepEqual(a.leaders, ['a_test']);
  assert.equal(a.elector.term()?.epochString, `${lease.metadata?.uid}/0`);
});

test('acquires an empty-holder Lease at once and counts a transition', async (t) => {
  const api = await apiServer(t);
  await createLease(clientFor(api, 'admin'), { holderIdentity: '', leaseDurationSeconds: 15, leaseTransitions: 3 });
  const start = performance.now();
  const a = runElector(t, api, 'a');
  await until('a to lead', 2000, () => a.elector.isLeader());
  // No waiting for the 15 s duration: an empty holder is free.
  assert.ok(performance.now() - start < 500, `took ${performance.now() - start}ms`);
  const lease = await readLease(clientFor(api, 'admin'));
  assert.equal(lease.spec?.holderIdentity, 'a_test');
  assert.equal(lease.spec?.leaseTransitions, 4);
});

test('takes over a Lease whose holder stopped renewing only after leaseDurationSeconds', async (t) => {
  const api = await apiServer(t);
  await createLease(clientFor(api, 'admin'), { holderIdentity: 'ghost', leaseDurationSeconds: 1 });
  const start = performance.now();
  const a = runElector(t, api, 'a');
  await until('a to lead', 4000, () => a.elector.isLeader());
  const took = performance.now() - start;
  // Never before the lease could have expired (1 s after a observed it), and
  // no later than leaseDuration + 2 × 2.2 × retryPeriod (+ request slack).
  assert.ok(took >= 1000, `took over after ${took}ms, before the lease expired`);
  assert.ok(took <= 1000 + 2 * 2.2 * 200 + 300, `took over after ${took}ms`);
  const lease = await readLease(clientFor(api, 'admin'));
  assert.equal(lease.spec?.leaseTransitions, 1);
  assert.deepEqual(a.leaders, ['ghost', 'a_test']);
});

test('does not acquire a held Lease that keeps changing', async (t) => {
  const api = await apiServer(t);
  const admin = clientFor(api, 'admin');
  await createLease(admin, { holderIdentity: 'ghost', leaseDurationSeconds: 1 });
  // A live holder: renews every 200 ms.
  let renewing = true;
  const renewer = (async () => {
    while (renewing) {
      await admin.coordination.patchNamespacedLease(
        { name: 'portal-leader', namespace: 'default', body: { spec: { renewTime: new V1MicroTime(new Date()) } } },
        mergePatchOptions(),
      );
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  t.after(() => {
    renewing = false;
    return renewer;
  });
  const a = runElector(t, api, 'a');
  // Proved from the API server's request log, not from time: a campaigner
  // reads the Lease once per attempt and waits at least retryPeriod (200 ms,
  // jitter only adds; nothing wakes it early since the holder never becomes
  // "") before the next, so 7 reads span over one leaseDuration (1 s) since
  // a first observed the holder. Up to that point a wrote nothing.
  await until('a to read the held Lease 7 times', 10_000, async () => (await requestCount(api, 'a', `GET ${LEASE_PATH}`)) >= 7, { intervalMs: 50 });
  assert.deepEqual(
    api.auditLog().filter((e) => e.user === 'a' && e.resource === 'leases'),
    [],
    'a never wrote the Lease (no create, no update)',
  );
  assert.equal(a.elector.isLeader(), false);
  assert.equal(a.started, 0);
  assert.equal(a.elector.debugVars().lease_holder, 'ghost');
  renewing = false;
  await renewer;
  const stoppedAt = performance.now();
  await until('a to lead after the holder stopped', 3000, () => a.elector.isLeader());
  assert.ok(performance.now() - stoppedAt >= 800, 'took over before the lease could have expired');
});

test('renews an already-held Lease: renewTime moves, acquireTime and transitions stay', async (t) => {
  const api = await apiServer(t);
  const admin = clientFor(api, 'admin');
  const a = runElector(t, api, 'a');
  await until('a to lead', 2000, () => a.elector.isLeader());
  const first = await readLease(admin);
  // Wait for three renewals (one per 200 ms retry period) instead of sleeping.
  let later = first;
  let renewals = 0;
  await until('three renewals', 3000, async () => {
    const lease = await readLease(admin);
    if (String(lease.spec?.renewTime) !== String(later.spec?.renewTime)) {
      renewals++;
      later = lease;
    }
    return renewals >= 3;
  });
  assert.equal(later.spec?.holderIdentity, 'a_test');
  assert.equal(String(later.spec?.acquireTime), String(first.spec?.acquireTime));
  assert.equal(later.spec?.leaseTransitions, first.spec?.leaseTransitions);
  assert.notEqual(String(later.spec?.renewTime), String(first.spec?.renewTime));
  assert.ok(Number(later.metadata?.resourceVersion) > Number(first.metadata?.resourceVersion));
  assert.equal(a.started, 1, 'renewals do not start a new term');
  assert.equal(a.elector.isLeader(), true);
});

test('releases on cancel (holder "", duration 1) and a watching follower takes over at once', async (t) => {
  const api = await apiServer(t);
  const a = runElector(t, api, 'a');
  await until('a to lead', 2000, () => a.elector.isLeader());
  const b = runElector(t, api, 'b');
  await until('b to observe a', 2000, () => b.leaders.includes('a_test'));
  const stopAt = performance.now();
  await a.stop();
  assert.equal(a.elector.isLeader(), false);
  assert.equal(a.stopped, 1);
  await until('b to lead', 1000, () => b.elector.isLeader());
  const handover = performance.now() - stopAt;
  // Through the watch, not the 200–440 ms jittered retry or the 1 s lease.
  assert.ok(handover < 250, `handover took ${handover}ms`);
  assert.deepEqual(b.leaders, ['a_test', '', 'b_test'], 'b saw the release ("") before taking over');
  const lease = await readLease(clientFor(api, 'admin'));
  assert.equal(lease.spec?.holderIdentity, 'b_test');
  assert.equal(lease.spec?.leaseTransitions, 1);
});

test('release leaves holder "" and leaseDurationSeconds 1 when nobody else campaigns', async (t) => {
  const api = await apiServer(t);
  const a = runElector(t, api, 'a');
  await until('a to lead', 2000, () => a.elector.isLeader());
  await a.stop();
  const lease = await readLease(clientFor(api, 'admin'));
  assert.equal(lease.spec?.holderIdentity, '');
  assert.equal(lease.spec?.leaseDurationSeconds, 1);
  assert.match(String(lease.spec?.renewTime), MICRO);
  assert.equal(a.elector.counters.releases, 1);
});

test('release retries on 409 with a fresh read', async (t) => {
  const api = await apiServer(t);
  const admin = clientFor(api, 'admin');
  const a = runElector(t, api, 'a');
  await until('a to lead', 2000, () => a.elector.isLeader());
  // Slow down a's requests so a concurrent writer lands between its Get and its Update.
  api.faults.setLatency(100, { user: 'a' });
  let writing = true;
  let n = 0;
  const writer = (async () => {
    while (writing) {
      await admin.coordination.patchNamespacedLease(
        { name: 'portal-leader', namespace: 'default', body: { metadata: { annotations: { 'test/touch': String(n++) } } } },
        mergePatchOptions(),
      );
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  t.after(() => {
    writing = false;
    return writer;
  });
  const stopped = a.stop();
  await until('a release conflict', 3000, () => a.elector.counters.releaseConflicts >= 1);
  writing = false;
  await writer;
  await stopped;
  const lease = await readLease(admin);
  assert.equal(lease.spec?.holderIdentity, '');
  assert.equal(a.elector.counters.releases, 1);
});

test('cancel during an in-flight renew still releases', async (t) => {
  const api = await apiServer(t);
  const admin = clientFor(api, 'admin');
  const a = runElector(t, api, 'a');
  await until('a to lead', 2000, () => a.elector.isLeader());
  api.faults.setLatency(300, { user: 'a' });
  // The event: a renewal (PUT of the Lease) has reached the API server and is
  // being held there by the latency fault, i.e. it is in flight right now.
  await until('a renewal in flight', 3000, () => api.faults.delayed('a').includes(`PUT ${LEASE_PATH}`), { intervalMs: 5 });
  const puts = () => api.auditLog().filter((e) => e.user === 'a' && e.verb === 'update').length;
  const putsBefore = puts();
  api.faults.clear();
  const stopAt = performance.now();
  await a.stop();
  assert.ok(performance.now() - stopAt < 600, 'the in-flight renew was cut short, not awaited');
  assert.ok(puts() > putsBefore, 'the release was written');
  assert.equal(a.elector.counters.releases, 1, 'released by the elector (not merely an abandoned renewal landing late)');
  const lease = await readLease(admin);
  assert.equal(lease.spec?.holderIdentity, '');
});

test('fast path falls back to the slow path on 409 and keeps leading', async (t) => {
  const api = await apiServer(t);
  const admin = clientFor(api, 'admin');
  // A roomier lease than FAST: this test provokes conflicts on purpose and
  // must not also lose the lease to a slow machine's renew deadline.
  const a = runElector(t, api, 'a', { leaseDurationMs: 5000, renewDeadlineMs: 4000, retryPeriodMs: 200 });
  await until('a to lead', 2000, () => a.elector.isLeader());
  const epoch = a.elector.term()?.epochString;
  // Metadata-only writes bump resourceVersion. The watch usually tells a about
  // them in time, so slow a down: its fast-path PUT then carries a stale version.
  api.faults.setLatency(100, { user: 'a' });
  let writing = true;
  const writer = (async () => {
    while (writing) {
      await admin.coordination.patchNamespacedLease(
        { name: 'portal-leader', namespace: 'default', body: { metadata: { labels: { touched: 'yes' } } } },
        mergePatchOptions(),
      );
      await admin.coordination.patchNamespacedLease(
        { name: 'portal-leader', namespace: 'default', body: { metadata: { annotations: { n: String(performance.now()) } } } },
        mergePatchOptions(),
      );
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  t.after(() => {
    writing = false;
    return writer;
  });
  await until('a fast-path fallback', 2000, () => a.elector.counters.fastPathFallbacks >= 1);
  writing = false;
  await writer;
  api.faults.clear();
  // After the fallback the slow path must renew again: wait for a renewal
  // that lands after the conflicts stopped.
  const renewTime = (await readLease(admin)).spec?.renewTime;
  await until('a renewal after the fallback', 3000, async () => String((await readLease(admin)).spec?.renewTime) !== String(renewTime));
  assert.equal(a.elector.isLeader(), true);
  assert.equal(a.started, 1);
  assert.equal(a.elector.term()?.epochString, epoch, 'same term');
  const lease = await readLease(admin);
  assert.equal(lease.metadata?.labels?.touched, 'yes', 'the update kept the labels');
});
