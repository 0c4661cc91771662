// A cluster-mode replica audits ValidatingAdmissionPolicies (docs/design.md §8): a
// Pod created before the policy existed is reported in its PolicyReport with
// policy = the VAP's name, rule = the binding's name, source portal; the
// leader runs the actions of the policy's policies.portal.dev/audit-actions
// annotation; the result follows the policy (deleting the binding removes
// it). The VAP is never enforced by the webhook.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';


import { readManifests } from '../../packages/devcluster/src/dev/manifests.ts';
import { debugVars, podReview, readyz, review, root, startServe, until, replicaCluster } from './support.ts';

const NS = 'portal-system';
const LEASE = ['--lease-duration', '2s', '--renew-deadline', '1500ms', '--retry-period', '500ms'];
const ENV = { POD_NAME: 'portal-0', POD_NAMESPACE: NS };

interface Result { policy: string; rule: string; result: string; source: string; message: string; properties?: Record<string, string> }

test('a replica audits a VAP into the reports (policy = VAP, rule = binding, source portal)', { timeout: 90_000 }, async (t) => {
  const { admin, kubeconfig: writeKubeconfig } = await replicaCluster(t, 'portal-vap-audit-');
  const kubeconfig = await writeKubeconfig(`system:serviceaccount:${NS}:portal-0`);
  // The violating Pod exists before the policy (the API server would refuse it afterwards).
  const created = await admin.request('POST', '/api/v1/namespaces/default/pods', {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'privileged' },
    spec: { containers: [{ name: 'c', image: 'nginx:1.27', securityContext: { privileged: true } }] },
  });
  assert.equal(created.status, 201);
  const { objects } = await readManifests(join(root, 'policies', 'pod-security-vap'), ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
  const policy = objects.find((o) => o.kind === 'ValidatingAdmissionPolicy' && o.metadata.name === 'disallow-privileged-containers') as
    | { metadata: { name: string; annotations?: Record<string, string> } }
    | undefined;
  assert.ok(policy);
  // Audit actions for a VAP come from its annotation (docs/design.md §8).
  policy.metadata.annotations = { ...policy.metadata.annotations, 'policies.portal.dev/audit-actions': '[{"type":"label","key":"portal.dev/violation","value":"privileged"}]' };
  const VAP = '/apis/admissionregistration.k8s.io/v1';
  assert.equal((await admin.request('POST', `${VAP}/validatingadmissionpolicies`, policy)).status, 201);
  const binding = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: 'privileged-everywhere' },
    // Audit, not Deny: with Deny the API server would refuse the leader's label patch on the
    // violating Pod itself (an UPDATE of a privileged Pod), exactly as a real cluster does.
    spec: { policyName: 'disallow-privileged-containers', validationActions: ['Audit'] },
  };
  assert.equal((await admin.request('POST', `${VAP}/validatingadmissionpolicybindings`, binding)).status, 201);

  const s = await startServe(t, ['--kubeconfig', kubeconfig, ...LEASE], ENV);
  await until('/readyz 200', 30_000, async () => (await readyz(s.probes)) === 200);
  await until('the replica to lead', 15_000, async () => (await debugVars(s.probes))?.leader_election?.is_leader === true);

  // The default reports (adr/0012): one OpenReports Report for the namespace, listing its warnings.
  let source: string | undefined;
  const reported = async (): Promise<Result[] | undefined> => {
    const res = await admin.request('GET', '/apis/openreports.io/v1alpha1/namespaces/default/reports');
    const items = (res.body as { items?: { source?: string; results?: Result[] }[] }).items ?? [];
    source = items[0]?.source;
    return items[0]?.results;
  };
  const results = await until('the VAP result in the namespace\'s Report', 30_000, async () => {
    const r = await reported();
    return r?.some((x) => x.policy === 'disallow-privileged-containers') ? r : undefined;
  });
  const mine = results.filter((r) => r.policy === 'disallow-privileged-containers');
  assert.equal(mine.length, 1);
  assert.equal(mine[0]?.rule, 'privileged-everywhere');
  assert.equal(mine[0]?.result, 'warn', 'Audit bindings report warn');
  assert.equal(source, 'portal', 'OpenReports names the source once per report');
  assert.equal(mine[0]?.properties?.['ruleKind'], 'ValidatingAdmissionPolicy');
  assert.match(mine[0]?.message ?? '', /^Validation failed for ValidatingAdmissionPolicy 'disallow-privileged-containers' with binding 'privileged-everywhere': Privileged containers are not allowed/);

  // The leader labels the violating Pod, as the annotation asks.
  await until('the label action on the Pod', 30_000, async () => {
    const pod = await admin.request('GET', '/api/v1/namespaces/default/pods/privileged');
    return (pod.body as { metadata?: { labels?: Record<string, string> } }).metadata?.labels?.['portal.dev/violation'] === 'privileged';
  });

  // Violation counts reach the metrics like a Portal rule's (by the VAP's name).
  const metrics = await (await fetch(`${s.probes}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  assert.match(metrics, /^portal_audit_violating_objects\{rule="disallow-privileged-containers"\} 1$/m);
  assert.match(metrics, /^portal_vap_compile_errors 0$/m);
  const vars = (await debugVars(s.probes)) as { validating_admission_policies?: { policies: number; bindings: number; compileErrors: Record<string, string[]> } } | undefined;
  assert.deepEqual(
    { policies: vars?.validating_admission_policies?.policies, bindings: vars?.validating_admission_policies?.bindings, compileErrors: vars?.validating_admission_policies?.compileErrors },
    { policies: 1, bindings: 1, compileErrors: {} },
  );

  // The webhook does not enforce VAPs (the API server does).
  assert.equal((await review(s.webhook, await readFile(s.caFile), podReview({ privileged: true }))).allowed, true);

  // Deleting the binding lifts the policy: the result leaves the report (here the report goes: nothing else applies to the Pod).
  const del = await admin.request('DELETE', `${VAP}/validatingadmissionpolicybindings/privileged-everywhere`);
  assert.equal(del.status, 200);
  await until('the VAP result to leave the report', 30_000, async () => {
    const r = await reported();
    return !(r ?? []).some((x) => x.policy === 'disallow-privileged-containers');
  });
});
