/**
 * AuditController against the embedded API server (issue 5, parts 1–4):
 * reports for violating pods that match their CRD schema and summary, no
 * rewrite across full passes, clean-up when the pod goes, rule status kept
 * current, the annotate action, a follower that never writes and takes over
 * from memory, and bad rules / an unreachable Alertmanager that only produce
 * conditions and retries.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Ajv } from 'ajv';
import YAML from 'yaml';
import { createKubeClient, mergePatchOptions, type KubeClient } from '../../src/kube/client.ts';
import type { Report as PolicyReport } from '../../src/policy/report-shape.ts';
import type { ApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import { APP_NS, clusterWithCrds, pod, privilegedRule, startReplica, until, writesBy } from './support/controller-harness.ts';

const reportSchema = (() => {
  const crd = YAML.parse(readFileSync(new URL('../../charts/portal/files/crds/wgpolicyk8s.io_policyreports.yaml', import.meta.url), 'utf8')) as {
    spec: { versions: Array<{ name: string; schema: { openAPIV3Schema: object } }> };
  };
  const v = crd.spec.versions.find((x) => x.name === 'v1alpha2')!;
  return new Ajv({ strict: false, allErrors: true }).compile(v.schema.openAPIV3Schema);
})();

function tester(api: ApiServer): KubeClient {
  return createKubeClient({ kubeconfigYaml: api.kubeConfig('tester'), qps: 100, burst: 100, userAgent: 'tester' });
}

async function reports(kube: KubeClient): Promise<PolicyReport[]> {
  const list = (await kube.customObjects.listNamespacedCustomObject({ group: 'wgpolicyk8s.io', version: 'v1alpha2', namespace: APP_NS, plural: 'policyreports' })) as { items: PolicyReport[] };
  return list.items;
}

async function ruleStatus(kube: KubeClient, name: string): Promise<{ violations?: number; conditions?: Array<{ type: string; status: string; reason: string; message: string }>; lastAuditTime?: string; observedGeneration?: number } | undefined> {
  const r = (await kube.customObjects.getClusterCustomObject({ group: 'portal.dev', version: 'v1alpha1', plural: 'portalclusterrules', name })) as { status?: never };
  return r.status;
}

test('leader: reports, status and annotate for violating pods; stable across passes; cleaned up when pods go', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  const kube = tester(api);
  await admin.apply(privilegedRule('no-privileged', [{ type: 'annotate', key: 'portal.dev/violation', value: 'no-privileged' }]));
  for (const [name, priv] of [['bad-1', true], ['bad-2', true], ['good', false]] as const) {
    await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod(name, priv) as never });
  }
  const leader = await startReplica(t, api, 'replica-a');
  leader.grant();

  await until('three PolicyReports', 10_000, async () => (await reports(kube)).length === 3);
  const all = await reports(kube);
  const pods = await kube.core.listNamespacedPod({ namespace: APP_NS });
  for (const r of all) {
    assert.ok(reportSchema(r), `report ${r.metadata.name} violates the CRD schema: ${JSON.stringify(reportSchema.errors)}`);
    const p = pods.items.find((x) => x.metadata?.uid === r.metadata.name);
    assert.ok(p, 'report named after the pod uid');
    assert.equal(r.scope?.name, p.metadata?.name);
    assert.deepEqual((r.metadata.ownerReferences ?? []).map((o) => o.uid), [p.metadata?.uid]);
    const counted = { pass: 0, fail: 0, warn: 0, error: 0, skip: 0 };
    for (const x of r.results) counted[x.result]++;
    assert.deepEqual({ ...counted, ...r.summary }, counted, 'summary matches the results');
    assert.equal(r.results[0]?.result, p.metadata?.name === 'good' ? 'pass' : 'fail', r.results[0]?.message);
    assert.match(r.results[0]?.properties.epoch ?? '', /^test-lease\/\d+$/);
  }

  await until('status.violations = 2', 5000, async () => (await ruleStatus(kube, 'no-privileged'))?.violations === 2);
  await until('status.lastAuditTime', 5000, async () => (await ruleStatus(kube, 'no-privileged'))?.lastAuditTime !== undefined);
  const status = await ruleStatus(kube, 'no-privileged');
  assert.equal(status?.conditions?.find((c) => c.type === 'Ready')?.reason, 'Compiled');
  assert.equal(status?.observedGeneration, 1);
  assert.ok(status?.lastAuditTime, 'lastAuditTime set after the first full pass');
  await until('annotation on bad-1', 5000, async () => {
    const p = await kube.core.readNamespacedPod({ namespace: APP_NS, name: 'bad-1' });
    return p.metadata?.annotations?.['portal.dev/violation'] === 'no-privileged';
  });
  const good = await kube.core.readNamespacedPod({ namespace: APP_NS, name: 'good' });
  assert.equal(good.metadata?.annotations?.['portal.dev/violation'], undefined, 'compliant pod not annotated');

  // Full passes rewrite nothing that is already right.
  await until('idle', 5000, () => leader.controller.idle());
  const before = writesBy(api, 'replica-a', 'policyreports').length;
  const annotateBefore = writesBy(api, 'replica-a', 'pods').length;
  const passes = leader.controller.passes;
  for (let i = 0; i < 2; i++) {
    const n = leader.controller.passes;
    leader.controller.fullPass();
    await until('full pass', 5000, () => leader.controller.passes > n && leader.controller.idle());
  }
  assert.ok(leader.controller.passes >= passes + 2);
  assert.equal(writesBy(api, 'replica-a', 'policyreports').length, before, 'no report rewrite across full passes');
  assert.equal(writesBy(api, 'replica-a', 'pods').length, annotateBefore, 'no second annotate');

  // A pod that goes away takes its report with it and the count follows.
  await kube.core.deleteNamespacedPod({ namespace: APP_NS, name: 'bad-2' });
  await until('report of bad-2 gone', 5000, async () => (await reports(kube)).length === 2);
  await until('status.violations = 1', 5000, async () => (await ruleStatus(kube, 'no-privileged'))?.violations === 1);

  // A rule change that makes the pod compliant rewrites its report to pass.
  await admin.apply({ ...privilegedRule('no-privileged'), spec: { ...(privilegedRule('no-privileged').spec as object), validate: { schema: true } } });
  await until('reports rewritten to pass', 5000, async () => (await reports(kube)).every((r) => r.summary.fail === 0 && r.summary.pass === 1));
  await until('status.violations = 0', 5000, async () => (await ruleStatus(kube, 'no-privileged'))?.violations === 0);
  assert.ok(writesBy(api).every((e) => e.user !== 'replica-a' || e.code < 300 || e.code === 404 || e.code === 409), 'no failing writes');
});

test('follower: computes everything, writes nothing; on leadership it acts from memory at once', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  const kube = tester(api);
  await admin.apply(privilegedRule('no-privileged', [{ type: 'label', key: 'portal.dev/violation', value: 'no-privileged' }]));
  await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod('bad', true) as never });
  const follower = await startReplica(t, api, 'replica-f');
  await until('follower evaluated', 5000, () => follower.controller.synced() && follower.controller.violations('no-privileged') === 1 && follower.controller.passes > 0);
  await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod('bad-late', true) as never });
  await until('follower saw the new pod', 5000, () => follower.controller.violations('no-privileged') === 2);
  // Nothing that writes runs on a follower: no actuator, no side-effecting step, no status flush scheduled.
  assert.equal(follower.actuator.leading, undefined);
  assert.equal(follower.controller.stats()['acting'], false);
  assert.equal(follower.actuator.status.flushes, 0);
  assert.deepEqual(writesBy(api, 'replica-f'), [], 'a follower makes no writes');

  const podLists = async () => ((await admin.request('GET', '/_portal/requests')).body as Record<string, Record<string, number>>)['replica-f']?.['GET /api/v1/pods'] ?? 0;
  const listsBefore = await podLists();
  assert.ok(listsBefore > 0, 'the follower listed the Pods');
  follower.grant();
  await until('reports after takeover', 5000, async () => (await reports(kube)).length === 2);
  await until('status after takeover', 5000, async () => (await ruleStatus(kube, 'no-privileged'))?.violations === 2);
  // From memory: the takeover acted on what the follower had evaluated, without listing the Pods again.
  assert.ok(follower.actuator.firstSideEffectAt !== undefined, 'the takeover acted');
  assert.equal(await podLists(), listsBefore, 'the new leader listed no Pods');
  const labelled = await kube.core.readNamespacedPod({ namespace: APP_NS, name: 'bad' });
  assert.equal(labelled.metadata?.labels?.['portal.dev/violation'], 'no-privileged');
  assert.ok(Object.keys(labelled.metadata?.annotations ?? {}).some((k) => k.startsWith('actions.portal.dev/label.')), 'provenance annotation with the epoch');

  // After losing the term it stops writing again.
  await follower.revoke();
  await until('idle', 5000, () => follower.controller.idle());
  const n = writesBy(api, 'replica-f').length;
  await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod('bad-after', true) as never });
  await until('third violation evaluated', 5000, () => follower.controller.violations('no-privileged') === 3 && follower.controller.idle());
  // revoke() resolved once the actuator stopped: nothing that writes runs any more.
  assert.equal(follower.controller.stats()['acting'], false);
  assert.equal(writesBy(api, 'replica-f').length, n, 'no writes after the term ended');
});

test('a second leader repeats nothing its predecessor did', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  const kube = tester(api);
  await admin.apply(privilegedRule('no-privileged', [{ type: 'annotate', key: 'portal.dev/violation', value: 'no-privileged' }]));
  for (let i = 0; i < 5; i++) await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod(`bad-${i}`, true) as never });
  const [a, b] = await Promise.all([startReplica(t, api, 'replica-a'), startReplica(t, api, 'replica-b')]);
  a.grant();
  await until('reports by a', 10_000, async () => (await reports(kube)).length === 5);
  await until('annotations by a', 5000, async () => (await kube.core.listNamespacedPod({ namespace: APP_NS })).items.every((p) => p.metadata?.annotations?.['portal.dev/violation']));
  // The whole status: the count, and the lastAuditTime of the first pass that evaluated the rule while a led.
  await until('status by a', 5000, async () => {
    const st = await ruleStatus(kube, 'no-privileged');
    return st?.violations === 5 && st.lastAuditTime !== undefined;
  });
  await until('b learnt the annotations', 5000, () => a.controller.idle() && b.controller.idle() && b.controller.store.size >= 5);
  // ... and the rule status a wrote (b's rule informer; on a loaded machine its watch event can trail a's write).
  const statusSeenByB = () => {
    const st = (b.source.rules.clusterRules.get('no-privileged') as { status?: { violations?: number; lastAuditTime?: string } } | undefined)?.status;
    return st?.violations === 5 && st.lastAuditTime !== undefined;
  };
  await until('b saw the rule status a wrote', 5000, statusSeenByB);
  await a.revoke();
  b.grant();
  // The takeover drained and the new leader's first status flush (every rule, after the debounce) ran.
  await until('b idle after its first status flush', 5000, () => b.controller.idle() && b.actuator.status.flushes > 0);
  assert.deepEqual(writesBy(api, 'replica-b').map((e) => `${e.verb} ${e.resource}/${e.subresource}`), [], 'the new leader wrote nothing');
});

test('bad rules and an unreachable Alertmanager give conditions and retries, never a crash', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  const kube = tester(api);
  // evict on a rule that matches Deployments only: rejected, with a clear condition.
  const evictDeploy = privilegedRule('evict-deployments', [{ type: 'evict' }]);
  (evictDeploy.spec as { match: unknown }).match = { kinds: [{ apiGroups: ['apps'], kinds: ['Deployment'] }] };
  await admin.apply(evictDeploy);
  await admin.apply(privilegedRule('alerting', [{ type: 'alert' }]));
  await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod('bad', true) as never });
  const leader = await startReplica(t, api, 'replica-a', { alertmanagerUrls: ['http://127.0.0.1:9'] });
  leader.grant();
  await until('condition on evict-deployments', 5000, async () => (await ruleStatus(kube, 'evict-deployments'))?.conditions !== undefined);
  const ready = (await ruleStatus(kube, 'evict-deployments'))?.conditions?.find((c) => c.type === 'Ready');
  assert.equal(ready?.status, 'False');
  assert.equal(ready?.reason, 'CompileError');
  assert.match(ready?.message ?? '', /evict/);
  // The report is still written although the alert cannot be delivered.
  await until('report despite Alertmanager down', 5000, async () => (await reports(kube)).length === 1);
  await until('alerting violations', 5000, async () => (await ruleStatus(kube, 'alerting'))?.violations === 1);
  assert.equal((await ruleStatus(kube, 'alerting'))?.conditions?.find((c) => c.type === 'Ready')?.status, 'True');
  assert.ok(leader.controller.stats().queue !== undefined, 'controller alive');
});

test('namespace label changes re-evaluate the objects in that namespace (namespaceSelector)', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  const kube = tester(api);
  const rule = privilegedRule('prod-only');
  (rule.spec as { match: Record<string, unknown> }).match['namespaceSelector'] = { matchLabels: { env: 'prod' } };
  await admin.apply(rule);
  for (const name of ['bad-1', 'bad-2']) await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod(name, true) as never });
  const leader = await startReplica(t, api, 'replica-a');
  leader.grant();
  const failing = async () => (await reports(kube)).filter((r) => r.results.some((x) => x.policy === 'prod-only' && x.result === 'fail')).length;
  await until('first pass', 10_000, () => leader.controller.completePasses > 0 && leader.controller.idle());
  assert.equal(leader.controller.violations('prod-only'), 0, 'the namespace is not prod: the rule does not apply');
  assert.equal(await failing(), 0);

  const env = (value: string | null) => kube.core.patchNamespace({ name: APP_NS, body: { metadata: { labels: { env: value } } } }, mergePatchOptions());
  await env('prod');
  await until('both reports fail once the namespace is labelled env=prod', 10_000, async () => (await failing()) === 2);
  await until('status.violations = 2', 5000, async () => (await ruleStatus(kube, 'prod-only'))?.violations === 2);

  await env(null);
  await until('no failing report once the label is gone', 10_000, async () => (await failing()) === 0);
  await until('status.violations = 0', 5000, async () => (await ruleStatus(kube, 'prod-only'))?.violations === 0);
});

test('lastAuditTime (issue 15): per rule, from the last pass that evaluated it; a rule added later is never dated before its creation, and every pass moves it', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  const kube = tester(api);
  await admin.apply(privilegedRule('first'));
  await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod('bad', true) as never });
  const leader = await startReplica(t, api, 'replica-a');
  leader.grant();
  const first = await until('lastAuditTime of first', 10_000, async () => (await ruleStatus(kube, 'first'))?.lastAuditTime);

  // A rule created after that pass: a pass starts for it (a rule change), and its time is that pass's end.
  await admin.apply(privilegedRule('second'));
  const created = ((await kube.customObjects.getClusterCustomObject({ group: 'portal.dev', version: 'v1alpha1', plural: 'portalclusterrules', name: 'second' })) as { metadata: { creationTimestamp: string } }).metadata.creationTimestamp;
  const second = await until('lastAuditTime of second', 10_000, async () => (await ruleStatus(kube, 'second'))?.lastAuditTime);
  // creationTimestamp has whole seconds: compare at that precision.
  assert.ok(Date.parse(second) >= Date.parse(created), `${second} is not before the rule's creation ${created}`);
  // The pass the new rule started evaluated the first rule too.
  await until('lastAuditTime of first moved', 10_000, async () => ((await ruleStatus(kube, 'first'))?.lastAuditTime ?? '') > first);

  // A periodic pass (--audit-interval) moves both again.
  const before = (await ruleStatus(kube, 'second'))?.lastAuditTime ?? '';
  await until('a pass started', 5000, () => leader.controller.fullPass() > 0 || undefined);
  await until('lastAuditTime of second moved by the pass', 10_000, async () => ((await ruleStatus(kube, 'second'))?.lastAuditTime ?? '') > before);
});
