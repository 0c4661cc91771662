// The namespace label pod-security.kubernetes.io/enforce-version, honoured by
// a real `portal serve --kubeconfig` replica against the embedded API server:
// admission decides at the labelled version and follows label changes live,
// an invalid label means latest, and the leader's audit re-evaluates the
// namespace's pods when the label changes (issue 9, item 3).
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';


import { readManifests } from '../../packages/devcluster/src/dev/manifests.ts';
import { debugVars, readyz, review, root, startServe, until, replicaCluster } from '../replica/support.ts';

const NS = 'portal-system';
const TEAM = 'team';
const LABEL = 'pod-security.kubernetes.io/enforce-version';
const LEASE = ['--lease-duration', '2s', '--renew-deadline', '1500ms', '--retry-period', '500ms'];
const ENV = { POD_NAME: 'portal-0', POD_NAMESPACE: NS };

/** A Pod whose liveness probe names a host: a violation from v1.34 on only. */
function probeHostPod(name: string): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: TEAM },
    spec: { containers: [{ name: 'app', image: 'nginx:1.27', livenessProbe: { httpGet: { host: '169.254.169.254', port: 80 } } }] },
  };
}

let uid = 0;
function podReview(object: Record<string, unknown>): Record<string, unknown> {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `uid-${++uid}`,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      name: 'probe',
      namespace: TEAM,
      operation: 'CREATE',
      userInfo: { username: 'alice' },
      object,
      oldObject: null,
    },
  };
}

test('cluster mode honours pod-security.kubernetes.io/enforce-version at admission and in the audit', { timeout: 120_000 }, async (t) => {
  const { api, admin, kubeconfig: writeKubeconfig } = await replicaCluster(t, 'portal-pss-version-');
  const kubeconfig = await writeKubeconfig(`system:serviceaccount:${NS}:portal-0`);
  const { objects: rules } = await readManifests(join(root, 'policies', 'pod-security'), ['PortalClusterRule']);
  const rule = rules.find((o) => o.metadata.name === 'disallow-host-probes');
  assert.ok(rule, 'the shipped disallow-host-probes rule');
  await admin.apply(rule);
  const ns = await admin.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: TEAM, labels: { [LABEL]: 'v1.33' } } });
  assert.equal(ns.status, 201);
  // Created straight in the API server (no webhook configured): the audit's object.
  const created = await admin.request('POST', `/api/v1/namespaces/${TEAM}/pods`, probeHostPod('existing'));
  assert.equal(created.status, 201);

  const s = await startServe(t, ['--kubeconfig', kubeconfig, ...LEASE], ENV);
  await until('/readyz 200', 30_000, async () => (await readyz(s.probes)) === 200);
  const ca = await readFile(s.caFile);
  const decide = async (): Promise<{ allowed: boolean; message: string }> => {
    const r = await review(s.webhook, ca, podReview(probeHostPod('probe')));
    return { allowed: r.allowed, message: r.status?.message ?? '' };
  };
  const relabel = async (value: string | null): Promise<void> => {
    const res = await fetch(`${api.url}/api/v1/namespaces/${TEAM}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${api.adminToken}`, 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ metadata: { labels: { [LABEL]: value } } }),
    });
    await res.arrayBuffer();
    assert.equal(res.status, 200);
  };
  // The namespace's report (the default, adr/0012) lists failures; a pass shows in its summary.
  const reportResult = async (): Promise<string | undefined> => {
    const res = await admin.request('GET', `/apis/openreports.io/v1alpha1/namespaces/${TEAM}/reports`);
    const items = (res.body as { items?: { summary?: { pass?: number }; results?: { policy: string; result: string }[] }[] }).items ?? [];
    const listed = items[0]?.results?.find((r) => r.policy === 'disallow-host-probes')?.result;
    return listed ?? ((items[0]?.summary?.pass ?? 0) > 0 ? 'pass' : undefined);
  };

  await t.test('v1.33: the probe host check does not exist yet, so the pod is allowed', async () => {
    assert.deepEqual(await decide(), { allowed: true, message: '' });
  });

  await t.test('the audit reports the existing pod as passing at v1.33', async () => {
    await until('the replica to lead', 15_000, async () => (await debugVars(s.probes))?.leader_election?.is_leader === true);
    await until('a pass in the namespace report', 30_000, async () => (await reportResult()) === 'pass');
  });

  await t.test('relabelled v1.34: denied at once, naming the rule, the field and the label', async () => {
    await relabel('v1.34');
    const denied = await until('the v1.34 label to deny', 15_000, async () => {
      const d = await decide();
      return d.allowed ? undefined : d;
    });
    assert.match(denied.message, /^disallow-host-probes: /);
    assert.match(denied.message, /checked at Pod Security Standards v1\.34, from namespace label pod-security\.kubernetes\.io\/enforce-version/);
    assert.match(denied.message, /spec\.containers\[0\]\.livenessProbe\.httpGet\.host/);
  });

  await t.test('the audit re-evaluates the namespace pods after the label change', async () => {
    await until('a fail in the namespace report', 30_000, async () => (await reportResult()) === 'fail');
  });

  await t.test('an invalid label means latest (denied) and says so; no label means latest too', async () => {
    await relabel('v1.033');
    const d = await until('the invalid label to be seen', 15_000, async () => {
      const x = await decide();
      return x.message.includes('v1.033') ? x : undefined;
    });
    assert.equal(d.allowed, false);
    assert.match(d.message, /namespace label pod-security\.kubernetes\.io\/enforce-version="v1\.033" is not "latest" or "v1\.N", so latest applies/);
    await relabel(null);
    const unlabelled = await until('the label removal to be seen', 15_000, async () => {
      const x = await decide();
      return x.message.includes('v1.033') ? undefined : x;
    });
    assert.equal(unlabelled.allowed, false);
    assert.doesNotMatch(unlabelled.message, /enforce-version/);
  });
});
