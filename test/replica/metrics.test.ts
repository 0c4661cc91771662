// The full /metrics of one spawned cluster-mode replica (admission, leader
// election and audit metrics together) passes `promtool check metrics`, and
// the leader metrics read what a single leading replica should.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';


import { readManifests } from '../../packages/devcluster/src/dev/manifests.ts';
import { debugVars, podReview, readyz, review, root, startServe, until, replicaCluster } from './support.ts';
import { PROMTOOL, requireTool } from '../support/external-tool.ts';

const NS = 'portal-system';
const ENV = { POD_NAME: 'portal-0', POD_NAMESPACE: NS };
const LEASE = ['--lease-duration', '2s', '--renew-deadline', '1500ms', '--retry-period', '500ms'];

function promtool(file: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    // promtool reads the exposition from stdin; it prints lint problems and exits non-zero on format errors.
    execFile('sh', ['-c', `'${requireTool(PROMTOOL)}' check metrics < '${file}' 2>&1`], { timeout: 30_000 }, (err, stdout) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: stdout }),
    );
  });
}

function sample(text: string, name: string): number | undefined {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

test('a cluster-mode replica: /metrics (admission + leader + audit) passes promtool check metrics', { timeout: 90_000 }, async (t) => {
  const { dir, admin, kubeconfig: writeKubeconfig } = await replicaCluster(t, 'portal-metrics-');
  const kubeconfig = await writeKubeconfig(`system:serviceaccount:${NS}:portal-0`);
  const { objects: rules } = await readManifests(join(root, 'policies', 'pod-security'), ['PortalClusterRule']);
  const rule = rules.find((o) => o.metadata.name === 'disallow-privileged-containers');
  assert.ok(rule);
  await admin.apply(rule);
  // A violating pod, so the audit has an object, a verdict and a report to write.
  const created = await admin.request('POST', '/api/v1/namespaces/default/pods', {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'privileged' },
    spec: { containers: [{ name: 'c', image: 'nginx:1.27', securityContext: { privileged: true } }] },
  });
  assert.equal(created.status, 201);

  const s = await startServe(t, ['--kubeconfig', kubeconfig, ...LEASE], ENV);
  await until('/readyz 200', 30_000, async () => (await readyz(s.probes)) === 200);
  await until('the replica to lead', 15_000, async () => (await debugVars(s.probes))?.leader_election?.is_leader === true);
  // One allowed and one denied review: the admission counters and histogram get labelled samples.
  const ca = await readFile(s.caFile);
  assert.equal((await review(s.webhook, ca, podReview({ privileged: false }))).allowed, true);
  assert.equal((await review(s.webhook, ca, podReview({ privileged: true }))).allowed, false);
  // The leader audits the pod: its namespace's report (the default, adr/0012) exists once the audit metrics have samples.
  await until('the report of the pod\'s namespace', 30_000, async () => {
    const res = await admin.request('GET', '/apis/openreports.io/v1alpha1/namespaces/default/reports');
    return (res.body as { items?: unknown[] }).items?.length === 1;
  });

  const text = await (await fetch(`${s.probes}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  for (const prefix of ['portal_admission_', 'portal_leader_', 'portal_audit_']) {
    assert.match(text, new RegExp(`^# TYPE ${prefix}`, 'm'), `${prefix}* metrics exposed`);
  }
  assert.equal(sample(text, 'portal_leader_is_leader'), 1);
  assert.equal(sample(text, 'portal_leader_transitions_total'), 1);
  assert.equal(sample(text, 'portal_leader_acquire_duration_seconds_count'), 1);
  assert.ok((sample(text, 'portal_leader_held_seconds_total') ?? 0) > 0);

  const file = join(dir, 'metrics.txt');
  await writeFile(file, text);
  const { code, output } = await promtool(file);
  assert.equal(output.trim(), '', `promtool problems:\n${output}`);
  assert.equal(code, 0);
});
