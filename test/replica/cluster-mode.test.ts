// `portal serve --kubeconfig` for real: a spawned replica against an
// in-test embedded API server. Not ready (and denying) until the informers
// sync, rules and namespace labels followed live, leader election on the
// Lease, release on SIGTERM, a new epoch after a restart with the same
// POD_NAME, and admission from the cache once the API server is gone.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startApiServer, type ApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import { DevApiClient } from '../../packages/devcluster/src/dev/api-client.ts';
import { readManifests } from '../../packages/devcluster/src/dev/manifests.ts';
import { debugVars, podReview, readyz, review, root, startServe, until, untilReady, type Serve } from './support.ts';

const NS = 'portal-system';
const USER = `system:serviceaccount:${NS}:portal-0`;
/** Short but valid timings (2s > 1.5s > 1.2 × 0.5s) so the lease expires quickly after a SIGKILL. */
const LEASE = ['--lease-duration', '2s', '--renew-deadline', '1500ms', '--retry-period', '500ms'];
const ENV = { POD_NAME: 'portal-0', POD_NAMESPACE: NS };

async function privilegedRule(): Promise<Record<string, unknown>> {
  const { objects } = await readManifests(join(root, 'policies', 'pod-security'), ['PortalClusterRule']);
  const rule = objects.find((o) => o.metadata.name === 'disallow-privileged-containers');
  assert.ok(rule, 'the shipped disallow-privileged-containers rule');
  return rule;
}

async function mergePatch(api: ApiServer, path: string, body: unknown): Promise<number> {
  const res = await fetch(`${api.url}${path}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${api.adminToken}`, 'content-type': 'application/merge-patch+json' },
    body: JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res.status;
}

async function decision(s: Serve, opts: { namespace?: string; privileged?: boolean }): Promise<{ allowed: boolean; message: string }> {
  const r = await review(s.webhook, await readFile(s.caFile), podReview(opts));
  return { allowed: r.allowed, message: r.status?.message ?? '' };
}

async function lease(admin: DevApiClient): Promise<{ holderIdentity?: string; leaseTransitions?: number } | undefined> {
  const res = await admin.request('GET', `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/portal-leader`);
  return res.status === 200 ? (res.body as { spec: { holderIdentity?: string; leaseTransitions?: number } }).spec : undefined;
}

test('cluster mode: sync gate, live rules and namespace labels, election, release, restart epoch, API server loss', async (t) => {
  const api = await startApiServer({ port: 0, namespaces: ['default', 'kube-system', 'kube-public', 'kube-node-lease', NS] });
  let apiClosed = false;
  t.after(async () => {
    if (!apiClosed) await api.close();
  });
  const dir = await mkdtemp(join(tmpdir(), 'portal-replica-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, api.kubeConfig(USER), { mode: 0o600 });
  const admin = new DevApiClient(api.url, api.adminToken);
  const rule = await privilegedRule();

  // Started before the CRDs exist: the rule informers cannot list, so the replica must not admit anything.
  const first = await startServe(t, ['--kubeconfig', kubeconfig, ...LEASE], ENV);

  await t.test('not ready before the informers sync: /readyz 503 and /validate denies "not ready"', async () => {
    assert.equal(await readyz(first.probes), 503);
    const d = await decision(first, { privileged: false });
    assert.equal(d.allowed, false);
    assert.match(d.message, /not ready/);
  });

  await t.test('becomes ready once the CRDs exist and the informers have synced', async () => {
    const { objects: crds, problems } = await readManifests(join(root, 'charts', 'portal', 'crds'), ['CustomResourceDefinition']);
    assert.deepEqual(problems, []);
    for (const crd of crds) await admin.apply(crd);
    await until('/readyz 200', 30_000, async () => (await readyz(first.probes)) === 200);
    assert.equal((await decision(first, { privileged: true })).allowed, true, 'no rules yet: allowed');
  });

  await t.test('a PortalClusterRule created in the cluster takes effect without a restart, and deleting it re-allows', async () => {
    await admin.apply(rule);
    const denied = await until('the new rule to deny', 15_000, async () => {
      const d = await decision(first, { privileged: true });
      return d.allowed ? undefined : d;
    });
    assert.match(denied.message, /disallow-privileged-containers/);
    assert.equal((await decision(first, { privileged: false })).allowed, true, 'compliant pods still allowed');
    const del = await admin.request('DELETE', '/apis/portal.dev/v1alpha1/portalclusterrules/disallow-privileged-containers');
    assert.equal(del.status, 200);
    await until('the deleted rule to stop denying', 15_000, async () => (await decision(first, { privileged: true })).allowed);
  });

  await t.test('namespaceSelector follows live namespace labels', async () => {
    const scoped = structuredClone(rule) as { metadata: { name: string }; spec: { match: Record<string, unknown> } };
    scoped.metadata = { name: 'locked-namespaces-no-privileged' };
    scoped.spec.match.namespaceSelector = { matchLabels: { 'portal.dev/locked': 'true' } };
    await admin.apply(scoped);
    await until('the scoped rule to be in force', 15_000, async () => {
      const vars = (await debugVars(first.probes)) as { rules?: { key: string; ready: boolean }[] } | undefined;
      return vars?.rules?.some((r) => r.key.endsWith('locked-namespaces-no-privileged') && r.ready);
    });
    assert.equal((await decision(first, { privileged: true })).allowed, true, 'namespace default is not labelled yet');
    assert.equal(await mergePatch(api, '/api/v1/namespaces/default', { metadata: { labels: { 'portal.dev/locked': 'true' } } }), 200);
    const denied = await until('the label to make the rule apply', 15_000, async () => {
      const d = await decision(first, { privileged: true });
      return d.allowed ? undefined : d;
    });
    assert.match(denied.message, /locked-namespaces-no-privileged/);
    assert.equal((await decision(first, { namespace: 'kube-public', privileged: true })).allowed, true, 'exempt namespace untouched');
  });

  await t.test('a rule that cannot compile is reported, never crashes the replica, and denies what it matches (fail closed)', async () => {
    await admin.apply({
      apiVersion: 'portal.dev/v1alpha1',
      kind: 'PortalClusterRule',
      metadata: { name: 'broken-configmaps' },
      spec: {
        match: { kinds: [{ apiGroups: [''], kinds: ['ConfigMap'] }] },
        validate: { message: 'never compiles', schema: { type: 'object', properties: { data: { pattern: '([unclosed' } } } },
      },
    });
    const state = await until('the broken rule to be reported', 15_000, async () => {
      const vars = (await debugVars(first.probes)) as { rules?: { key: string; ready: boolean; reason: string }[] } | undefined;
      return vars?.rules?.find((r) => r.key.endsWith('broken-configmaps'));
    });
    assert.equal(state.ready, false);
    assert.equal(state.reason, 'CompileError');
    assert.ok(first.lines.some((l) => l.includes('broken-configmaps') && l.includes('never compiled')), 'logged clearly');
    const cm = structuredClone(podReview()) as { request: Record<string, unknown> };
    Object.assign(cm.request, {
      kind: { group: '', version: 'v1', kind: 'ConfigMap' },
      resource: { group: '', version: 'v1', resource: 'configmaps' },
      requestKind: { group: '', version: 'v1', kind: 'ConfigMap' },
      object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'web', namespace: 'default' }, data: { a: 'b' } },
    });
    const r = await review(first.webhook, await readFile(first.caFile), cm);
    assert.equal(r.allowed, false);
    assert.match(r.status?.message ?? '', /broken-configmaps/);
    assert.equal(first.child.exitCode, null, 'still running');
    const del = await admin.request('DELETE', '/apis/portal.dev/v1alpha1/portalclusterrules/broken-configmaps');
    assert.equal(del.status, 200);
  });

  let firstEpoch = '';
  await t.test('a single replica leads: /debug/vars leader_election.is_leader and /livez', async () => {
    const le = await until('leadership', 15_000, async () => {
      const v = (await debugVars(first.probes))?.leader_election;
      return v?.is_leader ? v : undefined;
    });
    assert.equal(le.enabled, true);
    assert.match(le.identity, /^portal-0_[0-9a-f]+$/);
    assert.equal(le.lease_holder, le.identity);
    assert.ok(le.epoch);
    firstEpoch = le.epoch;
    const livez = await fetch(`${first.probes}/livez`);
    assert.equal(livez.status, 200);
    assert.match(await livez.text(), /leader-election ok/);
    assert.equal((await lease(admin))?.holderIdentity, le.identity);
  });

  await t.test('SIGTERM releases the lease (holderIdentity "") and exits 0', async () => {
    first.child.kill('SIGTERM');
    assert.equal(await first.exited, 0);
    assert.equal((await lease(admin))?.holderIdentity ?? '', '');
  });

  const second = await startServe(t, ['--kubeconfig', kubeconfig, ...LEASE], ENV);
  let third: Serve | undefined;
  await t.test('a replica restarted with the same POD_NAME is a new holder with a new epoch', async () => {
    const le = await until('the restarted replica to lead', 20_000, async () => {
      const v = (await debugVars(second.probes))?.leader_election;
      return v?.is_leader ? v : undefined;
    });
    assert.match(le.identity, /^portal-0_/);
    assert.notEqual(le.epoch, firstEpoch);
    // A slow API server holds up the release; a second SIGTERM exits at once
    // without releasing, so the next incarnation must wait for the lease to
    // expire, and then begins a new epoch.
    const epochBeforeKill = le.epoch;
    api.faults.setLatency(6000, { user: USER });
    second.child.kill('SIGTERM');
    await until('the replica to start shutting down', 10_000, () => second.lines.some((l) => l.includes('"shutting down"')));
    const t0 = performance.now();
    second.child.kill('SIGTERM');
    assert.equal(await second.exited, 1, 'a second SIGTERM exits at once with code 1');
    assert.ok(performance.now() - t0 < 3000, 'exited without waiting for the release');
    api.faults.clear();
    assert.match((await lease(admin))?.holderIdentity ?? '', /^portal-0_/, 'the lease was not released');
    const restarted = await startServe(t, ['--kubeconfig', kubeconfig, ...LEASE], ENV);
    third = restarted;
    const le3 = await until('the third incarnation to lead', 20_000, async () => {
      const v = (await debugVars(restarted.probes))?.leader_election;
      return v?.is_leader ? v : undefined;
    });
    assert.notEqual(le3.identity, le.identity);
    assert.notEqual(le3.epoch, epochBeforeKill);
  });

  await t.test('with the API server gone, it keeps answering admission from its cache', async () => {
    assert.ok(third, 'the third incarnation runs');
    const replica = third;
    // Its cache is synced and its evaluation workers hold the rules (it leads before that on a loaded machine).
    await untilReady(replica.probes, 60_000);
    await api.close();
    apiClosed = true;
    const denied = await decision(replica, { privileged: true });
    assert.equal(denied.allowed, false, 'the scoped rule, from the cache, still denies in the labelled namespace');
    assert.match(denied.message, /locked-namespaces-no-privileged/);
    assert.equal((await decision(replica, { privileged: false })).allowed, true);
    // Still answering after it noticed (renewals failing, so it demoted itself).
    await until('the replica to notice the API server is gone', 10_000, async () => (await debugVars(replica.probes))?.leader_election?.is_leader === false);
    assert.equal((await decision(replica, { privileged: true })).allowed, false);
    assert.equal((await decision(replica, { privileged: false })).allowed, true);
    assert.equal(await readyz(replica.probes), 200, 'still ready: it serves from a synced cache');
  });
});
