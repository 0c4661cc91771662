/**
 * PortalExceptions in the audit (issue 18), two replicas against the
 * embedded API server, leadership driven by the test:
 * - an exempted object's report result is `skip` with the property
 *   `exception: namespace/name`, and no audit action runs on it;
 * - the leader writes the exception's status (Ready, Expired, exempted) and
 *   one Normal Event when it starts and when it stops exempting the object;
 * - at expiresAt the exemption ends by a timer on every replica (no full
 *   pass: --audit-interval is an hour): the report flips and the action runs
 *   exactly once, also when the leader changes around the expiry.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createKubeClient, type KubeClient } from '../../src/kube/client.ts';
import type { ApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import { APP_NS, clusterWithCrds, pod, privilegedRule, startReplica, until, writesBy } from './support/controller-harness.ts';

const LABEL = 'violation.portal.dev/no-privileged';

function tester(api: ApiServer): KubeClient {
  return createKubeClient({ kubeconfigYaml: api.kubeConfig('tester'), qps: 100, burst: 100, userAgent: 'tester' });
}

function exception(name: string, spec: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalException',
    metadata: { name, namespace: APP_NS },
    spec: { rules: ['no-privileged'], match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: ['agent-*'] }, reason: 'node agent; OPS-1', ...spec },
  };
}

interface Result { policy: string; result: string; properties?: Record<string, string> }

async function resultOf(kube: KubeClient, podName: string): Promise<Result | undefined> {
  const list = (await kube.customObjects.listNamespacedCustomObject({ group: 'wgpolicyk8s.io', version: 'v1alpha2', namespace: APP_NS, plural: 'policyreports' })) as { items: { scope: { name: string }; results: Result[] }[] };
  return list.items.find((r) => r.scope.name === podName)?.results.find((r) => r.policy === 'no-privileged');
}

async function status(kube: KubeClient, name: string): Promise<{ exempted?: number; conditions?: { type: string; status: string; reason: string }[] } | undefined> {
  const o = (await kube.customObjects.getNamespacedCustomObject({ group: 'portal.dev', version: 'v1alpha1', namespace: APP_NS, plural: 'portalexceptions', name }).catch(() => undefined)) as { status?: never } | undefined;
  return o?.status;
}

const condition = (s: Awaited<ReturnType<typeof status>>, type: string): string | undefined => {
  const c = s?.conditions?.find((x) => x.type === type);
  return c ? `${c.status}/${c.reason}` : undefined;
};

async function events(kube: KubeClient): Promise<{ reason: string; message: string; involvedObject: { name: string } }[]> {
  return (await kube.core.listNamespacedEvent({ namespace: APP_NS })).items.filter((e) => e.involvedObject.kind === 'PortalException') as never;
}

const labelPatches = (api: ApiServer, name: string) => api.auditLog().filter((e) => e.resource === 'pods' && e.name === name && e.verb === 'patch' && e.user.startsWith('replica-'));

test('exempted: skip with the exception, no action; status and Events by the leader; expiry flips the report by a timer and the action runs once', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  const kube = tester(api);
  await admin.apply(privilegedRule('no-privileged', [{ type: 'label', key: LABEL, value: 'true' }]));
  // Long enough for the set-up below on a loaded 2-core machine; the assertions before the expiry check it did not pass yet.
  const expiresAt = new Date(Date.now() + 20_000).toISOString();
  await admin.apply(exception('agent', { expiresAt }));
  await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod('agent-1', true) as never });
  await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod('other-1', true) as never });
  const [a, b] = await Promise.all([startReplica(t, api, 'replica-a'), startReplica(t, api, 'replica-b')]);
  a.grant();

  await until('reports: agent-1 skip, other-1 fail', 10_000, async () => (await resultOf(kube, 'agent-1'))?.result === 'skip' && (await resultOf(kube, 'other-1'))?.result === 'fail');
  assert.deepEqual((await resultOf(kube, 'agent-1'))?.properties?.['exception'], `${APP_NS}/agent`);
  await until('other-1 labelled', 10_000, async () => (await kube.core.readNamespacedPod({ namespace: APP_NS, name: 'other-1' })).metadata?.labels?.[LABEL] === 'true');
  assert.equal((await kube.core.readNamespacedPod({ namespace: APP_NS, name: 'agent-1' })).metadata?.labels?.[LABEL], undefined, 'no action on the exempted Pod');
  await until('status: Ready, exempting one object', 10_000, async () => {
    const s = await status(kube, 'agent');
    return condition(s, 'Ready') === 'True/Active' && condition(s, 'Expired') === 'False/NotExpired' && s?.exempted === 1;
  });
  assert.ok(Date.now() < Date.parse(expiresAt), 'the set-up finished before the expiry (else the test proves nothing)');
  await until('the Exempting Event', 10_000, async () => (await events(kube)).some((e) => e.reason === 'Exempting' && /exempts Pod apps\/agent-1 from no-privileged/.test(e.message)));
  assert.equal(b.exceptionEvents.written, 0, 'a follower writes no Event');
  assert.equal(b.controller.exempted(`${APP_NS}/agent`), 1, 'the follower computed the same exemption');

  // Expiry: no pass is due (interval 1 h; the start-up pass and those the kinds' first
  // lists asked for are over); the timer ends the exemption on both replicas.
  const passes = a.controller.passes;
  await until('the report flips at expiry', 30_000, async () => (await resultOf(kube, 'agent-1'))?.result === 'fail');
  assert.ok(Date.now() >= Date.parse(expiresAt));
  assert.equal(a.controller.passes, passes, 'no pass ran: the flip came from the timer');
  await until('agent-1 labelled', 10_000, async () => (await kube.core.readNamespacedPod({ namespace: APP_NS, name: 'agent-1' })).metadata?.labels?.[LABEL] === 'true');
  await until('status: Expired, exempting nothing', 10_000, async () => {
    const s = await status(kube, 'agent');
    return condition(s, 'Ready') === 'False/Expired' && condition(s, 'Expired') === 'True/Expired' && s?.exempted === 0;
  });
  await until('the ExemptionEnded Event', 10_000, async () => (await events(kube)).some((e) => e.reason === 'ExemptionEnded' && /expired at/.test(e.message)));
  await until('b saw the expiry too', 5000, () => b.controller.exempted(`${APP_NS}/agent`) === 0 && b.controller.violations('no-privileged') === 2);
  await until('idle', 5000, () => a.controller.idle());
  assert.equal(labelPatches(api, 'agent-1').length, 1, 'labelled once');
  assert.deepEqual((await events(kube)).map((e) => e.reason).sort(), ['Exempting', 'ExemptionEnded'], 'one Event per transition');
});

test('an exception expiring during a leader change: the action runs exactly once, by whichever leader sees it', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  const kube = tester(api);
  await admin.apply(privilegedRule('no-privileged', [{ type: 'label', key: LABEL, value: 'true' }]));
  const expiresAt = Date.now() + 20_000;
  await admin.apply(exception('agent', { expiresAt: new Date(expiresAt).toISOString() }));
  await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod('agent-1', true) as never });
  const [a, b] = await Promise.all([startReplica(t, api, 'replica-a'), startReplica(t, api, 'replica-b')]);
  a.grant();
  await until('exempted', 10_000, async () => (await resultOf(kube, 'agent-1'))?.result === 'skip');
  await until('both replicas idle and exempting', 10_000, () => a.controller.idle() && b.controller.idle() && b.controller.exempted(`${APP_NS}/agent`) === 1);

  assert.ok(Date.now() < expiresAt - 1000, 'the set-up finished before the expiry (else the test proves nothing)');
  // a loses the lease a moment before the expiry; b wins it just after.
  await until('just before the expiry', 25_000, () => Date.now() >= expiresAt - 300);
  await a.revoke();
  await until('the expiry passed and b re-evaluated', 10_000, () => Date.now() > expiresAt && b.controller.violations('no-privileged') === 1 && b.controller.idle());
  assert.equal(labelPatches(api, 'agent-1').length, 0, 'no leader: nothing acted yet');
  b.grant();
  await until('agent-1 labelled by the new leader', 10_000, async () => (await kube.core.readNamespacedPod({ namespace: APP_NS, name: 'agent-1' })).metadata?.labels?.[LABEL] === 'true');
  await until('the report flipped', 10_000, async () => (await resultOf(kube, 'agent-1'))?.result === 'fail');
  await until('idle', 5000, () => b.controller.idle());
  // Leadership goes back: a, warm, must not label again.
  await b.revoke();
  a.grant();
  await until('a idle as leader', 10_000, () => a.controller.idle() && a.actuator.leading !== undefined);
  await until('a knows the label is there', 10_000, () => a.controller.idle());
  assert.deepEqual(labelPatches(api, 'agent-1').map((e) => e.user), ['replica-b'], 'one label patch, by the leader that saw the expiry');
  assert.deepEqual(writesBy(api, 'replica-a', 'pods'), []);
});
