/**
 * The leader's audit keeps up with the cluster (issue 32): `portal dev
 * --replicas 2` with the shipped Pod Security rules and the report defaults
 * (namespace reports, `--report-qps 10`, `--report-flush 10s`); 2,000 Pods
 * are created through the API server at a steady rate over 20 namespaces,
 * and the leader is SIGKILLed when half are created (the other replica takes
 * over; dev's supervisor restarts the killed one as a follower). Then, from
 * what a user sees:
 * - within 15 s of the last create, every namespace report's summary covers
 *   every Pod of its namespace (`reports.portal.dev/objects`), and says how
 *   current it is (`reports.portal.dev/current-as-of`);
 * - exactly once: each namespace report was created once and never deleted,
 *   and every report write in the API server's log comes from the replica
 *   that held the Lease at that moment;
 * - the report write budget held: no replica wrote reports faster than
 *   `--report-qps` allows (10/s and a burst of 10) over its writes;
 * - every replica exposes `portal_audit_queue_depth` and
 *   `portal_audit_lag_seconds` for its audit queue.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { CURRENT_AS_OF_ANNOTATION, OBJECTS_ANNOTATION } from '../../src/policy/report-api.ts';
import { readState, startDevFor, type DevState } from '../dev/support.ts';
import { listReports } from '../support/reports.ts';
import { sideApi, sideGet } from '../support/side-api.ts';
import { replicaLogTails, replicaOf, replicaUser, reportWrites, until, writesNotFromHolder, type AuditEntry } from './harness.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const PODS = 2000;
const NAMESPACES = 20;
/** Creates per second, issued on a fixed schedule (a create the webhook failed is retried, as a user would). */
const RATE = 50;
const CONCURRENCY = 16;
/** The product's claim (docs/reports.md): the flush interval, 10 s, plus the write budget's share, not a load margin. */
const SETTLE_MS = 15_000;
const REPORT_QPS = 10;
const nsName = (n: number): string => `load-${n}`;

void test('2,000 Pods at a steady rate with a leader change: every namespace report covers them within 15 s of the last create, exactly once, within the write budget', { timeout: 600_000 }, async (t) => {
  const pids = new Set<number>();
  const dev = await startDevFor(t, {
    name: 'keepup',
    replicas: 2,
    policies: join(root, 'policies', 'pod-security'),
    flags: ['--grace-period', '2s', '--lease-duration', '3s', '--renew-deadline', '2s', '--retry-period', '500ms'],
    waitFor: 'running',
  });
  t.after(() => {
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  });
  const { dir, stateFile } = dev;
  const state = async (): Promise<DevState | undefined> => {
    const s = await readState(stateFile);
    // Replicas run in their own process groups: collect every pid so none outlives the test.
    for (const r of s?.replicas ?? []) if (r.pid) pids.add(r.pid);
    return s;
  };
  const first = dev.state;
  for (const r of first.replicas) if (r.pid) pids.add(r.pid);
  const api = await sideApi(first.kubeconfig);
  const holder = async (): Promise<string | undefined> => {
    const res = await api.request('GET', '/apis/coordination.k8s.io/v1/namespaces/portal-system/leases/portal-leader');
    return res.status === 200 ? (res.body as { spec?: { holderIdentity?: string } }).spec?.holderIdentity || undefined : undefined;
  };
  await until('a leader', 60_000, holder);
  for (let n = 0; n < NAMESPACES; n++) assert.equal((await api.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: nsName(n) } })).status, 201);
  // Every replica evaluates (queue and lag gauges on each), and the webhook admits (the rules are loaded).
  for (const r of first.replicas) {
    const text = await until(`${r.name} /metrics`, 60_000, async () => (await fetch(`${r.probes}/metrics`, { signal: AbortSignal.timeout(2000) })).text());
    assert.match(text, /^portal_audit_queue_depth\{queue="audit"\} \d+/m, `${r.name}: queue depth`);
    assert.match(text, /^portal_audit_lag_seconds\{queue="audit"\} [\d.e-]+/m, `${r.name}: lag`);
  }

  // The creates, on a fixed schedule; the leader is killed at the half.
  const created = new Map<string, number>();
  let retries = 0;
  let killed: { name: string; at: number } | undefined;
  const create = async (i: number): Promise<void> => {
    const ns = nsName(i % NAMESPACES);
    const body = { apiVersion: 'v1', kind: 'Pod', metadata: { name: `p-${i}` }, spec: { containers: [{ name: 'c', image: 'nginx:1.27' }] } };
    await until(`pod ${ns}/p-${i} created`, 60_000, async () => {
      const res = await api.request('POST', `/api/v1/namespaces/${ns}/pods`, body);
      if (res.status === 201 || res.status === 409) return true;
      // The webhook fails closed: a call routed to the killed replica fails until the Service has only live endpoints.
      retries++;
      return undefined;
    });
    created.set(ns, (created.get(ns) ?? 0) + 1);
  };
  const t0 = performance.now();
  const inflight = new Set<Promise<void>>();
  for (let i = 0; i < PODS; i++) {
    const wait = t0 + (i / RATE) * 1000 - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    if (i === PODS / 2) {
      const leader = (await holder())!;
      const replica = (await state())?.replicas.find((r) => r.name === replicaOf(leader));
      assert.ok(replica?.pid, `the leader ${leader} has a pid`);
      process.kill(replica.pid, 'SIGKILL');
      killed = { name: replica.name, at: performance.now() - t0 };
    }
    const p = create(i);
    inflight.add(p);
    void p.finally(() => inflight.delete(p));
    if (inflight.size >= CONCURRENCY) await Promise.race(inflight);
  }
  await Promise.all(inflight);
  const lastCreate = performance.now();
  const createSeconds = (lastCreate - t0) / 1000;
  const newLeader = await until('a leader after the kill', 30_000, async () => {
    const h = await holder();
    return h && replicaOf(h) !== killed?.name ? h : undefined;
  });

  // Settled: every namespace report's summary covers every Pod of its namespace.
  let lastSeen = new Map<string, number>();
  const settled = await until('every namespace report to cover every Pod', 120_000, async () => {
    const seen = new Map<string, number>();
    for (const ns of created.keys()) {
      const [report] = await listReports(api, 'openreports', ns);
      seen.set(ns, Number(report?.metadata.annotations?.[OBJECTS_ANNOTATION] ?? 0));
    }
    lastSeen = seen;
    return [...created].every(([ns, n]) => seen.get(ns) === n) ? performance.now() : undefined;
  }).catch(async (err: unknown) => {
    throw new Error(`${(err as Error).message}: reported ${JSON.stringify([...lastSeen])} of ${JSON.stringify([...created])}\n${dev.output().slice(-2000)}\n${await replicaLogTails(join(dir, 'state', 'logs'), 3000)}`);
  });
  const settleMs = settled - lastCreate;
  t.diagnostic(
    `${PODS} pods in ${createSeconds.toFixed(1)} s (${Math.round(PODS / createSeconds)}/s, ${retries} retried creates); ${killed?.name} killed at ${((killed?.at ?? 0) / 1000).toFixed(1)} s, ${replicaOf(newLeader)} leads; ` +
      `settled ${(settleMs / 1000).toFixed(1)} s after the last create (the settle check itself polls ${NAMESPACES} reports)`,
  );
  assert.ok(settleMs <= SETTLE_MS, `every report covers every Pod ${(settleMs / 1000).toFixed(1)} s after the last create (claim: ≤ ${SETTLE_MS / 1000} s)`);
  for (const ns of created.keys()) {
    const [report] = await listReports(api, 'openreports', ns);
    const asOf = Date.parse(report?.metadata.annotations?.[CURRENT_AS_OF_ANNOTATION] ?? '');
    assert.ok(Number.isFinite(asOf) && asOf <= Date.now(), `${ns}: the report says how current it is`);
  }

  // Exactly once, from the API server's write log.
  const log = await sideGet<AuditEntry[]>(api, '/_portal/audit');
  const holders = writesNotFromHolder(log);
  assert.deepEqual(holders.offenders, [], 'every leader-only write came from the Lease holder of the moment');
  for (const ns of created.keys()) {
    const writes = reportWrites(log, ns);
    assert.equal(writes.creates.length, 1, `${ns}: its report was created once`);
    assert.equal(writes.deletes.length, 0, `${ns}: and never deleted`);
  }
  // The write budget: a token bucket of 10/s with a burst of 10, per replica and term, on the server's clock.
  const reportLog = log.filter((e) => e.code < 300 && e.user.startsWith(replicaUser('')) && (e.resource === 'reports' || e.resource === 'clusterreports'));
  const byUser = new Map<string, number[]>();
  for (const e of reportLog) byUser.set(e.user, [...(byUser.get(e.user) ?? []), Date.parse(e.time)]);
  const figures: string[] = [];
  for (const [user, times] of byUser) {
    const span = (times.at(-1)! - times[0]!) / 1000;
    figures.push(`${user.slice(replicaUser('').length)}: ${times.length} report writes over ${span.toFixed(1)} s`);
    // A second of slack for the requests' own latency between the bucket and the server's log.
    assert.ok(times.length <= Math.ceil(REPORT_QPS * (span + 1)) + REPORT_QPS, `${user}: ${times.length} report writes in ${span.toFixed(1)} s exceeds the budget`);
  }
  t.diagnostic(`${figures.join('; ')}; ${holders.checked} leader-only writes checked`);
});
