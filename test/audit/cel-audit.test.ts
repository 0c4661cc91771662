/**
 * The audit with a CEL rule (`validate.cel`): the leader's AuditController
 * against the embedded API server writes PolicyReport results with the CEL
 * message, keeps the rule's violation count, and runs its audit action.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createKubeClient, type KubeClient } from '../../src/kube/client.ts';
import type { Report as PolicyReport } from '../../src/policy/report-shape.ts';
import { APP_NS, clusterWithCrds, pod, startReplica, until } from './support/controller-harness.ts';

const RULE = {
  apiVersion: 'portal.dev/v1alpha1',
  kind: 'PortalClusterRule',
  metadata: { name: 'cel-no-privileged' },
  spec: {
    enforcement: 'Warn',
    severity: 'high',
    category: 'Pod Security',
    match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] },
    validate: {
      message: 'Privileged containers are not allowed.',
      cel: {
        variables: [{ name: 'privileged', expression: 'object.spec.containers.filter(c, c.?securityContext.?privileged.orValue(false))' }],
        expressions: [{ expression: 'size(variables.privileged) == 0', messageExpression: "'privileged: ' + variables.privileged.map(c, c.name).join(', ')" }],
      },
    },
    audit: { actions: [{ type: 'annotate', key: 'portal.dev/violation', value: 'cel-no-privileged' }] },
  },
};

async function reports(kube: KubeClient): Promise<PolicyReport[]> {
  const list = (await kube.customObjects.listNamespacedCustomObject({ group: 'wgpolicyk8s.io', version: 'v1alpha2', namespace: APP_NS, plural: 'policyreports' })) as { items: PolicyReport[] };
  return list.items;
}

test('audit: a CEL rule gives PolicyReport results, a violation count and its audit action', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  const kube = createKubeClient({ kubeconfigYaml: api.kubeConfig('tester'), qps: 100, burst: 100, userAgent: 'tester' });
  await admin.apply(RULE);
  for (const [name, priv] of [['bad', true], ['good', false]] as const) {
    await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod(name, priv) as never });
  }
  const leader = await startReplica(t, api, 'replica-a');
  leader.grant();

  await until('two PolicyReports', 10_000, async () => (await reports(kube)).length === 2);
  const byPod = new Map((await reports(kube)).map((r) => [r.scope?.name, r]));
  const bad = byPod.get('bad')?.results[0];
  assert.equal(bad?.policy, 'cel-no-privileged');
  assert.equal(bad?.result, 'warn', 'a Warn rule reports warn');
  assert.equal(bad?.message, 'cel-no-privileged: Privileged containers are not allowed. [privileged: c]');
  assert.equal(byPod.get('good')?.results[0]?.result, 'pass');

  await until('status.violations = 1', 5000, async () => {
    const r = (await kube.customObjects.getClusterCustomObject({ group: 'portal.dev', version: 'v1alpha1', plural: 'portalclusterrules', name: 'cel-no-privileged' })) as { status?: { violations?: number } };
    return r.status?.violations === 1;
  });
  await until('annotation on bad', 5000, async () => (await kube.core.readNamespacedPod({ namespace: APP_NS, name: 'bad' })).metadata?.annotations?.['portal.dev/violation'] === 'cel-no-privileged');
  const good = await kube.core.readNamespacedPod({ namespace: APP_NS, name: 'good' });
  assert.equal(good.metadata?.annotations?.['portal.dev/violation'], undefined);
});
