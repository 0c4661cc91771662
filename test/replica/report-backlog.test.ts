// Lease renewals never queue behind report writes (issue 20): a spawned
// cluster-mode replica leads with a full report backlog — every report write
// it sends is held by the API server (far longer than the lease), every
// report-writer slot is taken, and hundreds of reports wait behind them —
// and it keeps renewing its Lease on schedule all the same: the Lease goes
// through the replica's own client and connections, takes no report budget,
// and the report writes go through the leader-only writer's transport.
import assert from 'node:assert/strict';


import { join } from 'node:path';
import { test } from 'node:test';


import { readManifests } from '../../packages/devcluster/src/dev/manifests.ts';
import { debugVars, root, startServe, until, replicaCluster } from './support.ts';

const NS = 'portal-system';
const USER = `system:serviceaccount:${NS}:portal-0`;
const ENV = { POD_NAME: 'portal-0', POD_NAMESPACE: NS };
/** Short valid timings (2s > 1.5s > 1.2 × 0.5s): a renewal every 0.5 s, a demotion 2 s after renewals stop. */
const LEASE = ['--lease-duration', '2s', '--renew-deadline', '1500ms', '--retry-period', '500ms'];
const NAMESPACES = 20;
const PODS_PER_NAMESPACE = 10;
/** ReportFlusher's default concurrency: report writes in flight at once. */
const REPORT_WRITERS = 4;
const RENEWALS = 6;

interface ReportVars {
  backlog: number;
  inFlight: number;
}

test('a leader renews its Lease on schedule while every report write is held and the backlog is full', { timeout: 180_000 }, async (t) => {
  const { api, admin, kubeconfig: writeKubeconfig } = await replicaCluster(t, 'portal-backlog-');
  // Let held writes go before the server closes (and before the replica is killed).
  t.after(() => api.faults.clear());
  const kubeconfig = await writeKubeconfig(USER);
  const { objects: rules } = await readManifests(join(root, 'policies', 'pod-security'), ['PortalClusterRule']);
  const rule = rules.find((o) => o.metadata.name === 'disallow-privileged-containers');
  assert.ok(rule);
  await admin.apply(rule);
  for (let n = 0; n < NAMESPACES; n++) {
    assert.equal((await admin.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: `team-${n}` } })).status, 201);
    await Promise.all(
      Array.from({ length: PODS_PER_NAMESPACE }, async (_, i) => {
        const res = await admin.request('POST', `/api/v1/namespaces/team-${n}/pods`, {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: `p-${i}` },
          spec: { containers: [{ name: 'c', image: 'nginx:1.27', securityContext: { privileged: i % 2 === 0 } }] },
        });
        assert.equal(res.status, 201);
      }),
    );
  }
  const pods = NAMESPACES * PODS_PER_NAMESPACE;

  // Every report write of the replica is held for ten minutes; its reads (the report informers' lists and watches) are not.
  api.faults.setLatency(600_000, { user: USER, path: '/apis/openreports.io/', methods: ['POST', 'PUT', 'PATCH', 'DELETE'] });
  const heldReportWrites = () => api.faults.delayed(USER).filter((r) => r.includes('/apis/openreports.io/') && !r.startsWith('GET'));

  // One report per Pod and a budget that never binds: the writer slots fill at once, the rest queue behind them.
  const s = await startServe(t, ['--kubeconfig', kubeconfig, ...LEASE, '--report-granularity', 'resource', '--report-qps', '1000', '--report-flush', '1s'], ENV);
  await until('the replica to lead', 30_000, async () => (await debugVars(s.probes))?.leader_election?.is_leader === true);
  const reportVars = async (): Promise<ReportVars | undefined> => ((await debugVars(s.probes)) as { audit?: { reports?: ReportVars } } | undefined)?.audit?.reports;
  const full = await until('a full report backlog', 60_000, async () => {
    const r = await reportVars();
    return r && r.inFlight === REPORT_WRITERS && r.backlog >= pods - REPORT_WRITERS && heldReportWrites().length === REPORT_WRITERS ? r : undefined;
  });
  t.diagnostic(`backlog ${full.backlog} reports, ${full.inFlight} writes held by the API server`);

  const lease = async (): Promise<{ holderIdentity?: string; renewTime?: string; leaseTransitions?: number }> => {
    const res = await admin.request('GET', `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/portal-leader`);
    assert.equal(res.status, 200);
    return (res.body as { spec: { holderIdentity?: string; renewTime?: string; leaseTransitions?: number } }).spec;
  };
  const before = await lease();
  const renewals: string[] = [];
  let last = before.renewTime;
  await until(`${RENEWALS} renewals`, 30_000, async () => {
    const l = await lease();
    assert.equal(l.holderIdentity, before.holderIdentity, 'the same holder throughout');
    if (l.renewTime !== last) {
      renewals.push(l.renewTime ?? '');
      last = l.renewTime;
    }
    return renewals.length >= RENEWALS ? true : undefined;
  });

  // The renewals happened with the report writes still held and the backlog still full.
  assert.equal(heldReportWrites().length, REPORT_WRITERS, 'the report writes are still held');
  const after = await reportVars();
  assert.ok(after && after.inFlight === REPORT_WRITERS && after.backlog >= pods - REPORT_WRITERS, `backlog still full: ${JSON.stringify(after)}`);
  const le = (await debugVars(s.probes))?.leader_election;
  assert.equal(le?.is_leader, true, 'still the leader');
  assert.equal((await lease()).leaseTransitions, before.leaseTransitions, 'no leader change');
});
