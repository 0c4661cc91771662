/**
 * What a new leader settles when it takes over (issue 5 hardening):
 * an eviction its predecessor recorded as `intent` but never confirmed is
 * settled by looking at the pod (same pod still there → evicted now;
 * re-created under its name → done, not evicted again); alerts of objects
 * deleted while it was a follower are resolved; and lastAuditTime moves on
 * its first full pass as leader (also one that began while it followed),
 * never at the takeover itself.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { actionKey } from '../../src/audit/idempotency.ts';
import { decodeLedgerEntry, encodeLedgerEntry, LEDGER_LABELS, ledgerShardName } from '../../src/audit/ledger.ts';
import { createKubeClient, type KubeClient } from '../../src/kube/client.ts';
import type { ApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import { startAlertmanager } from './support/alertmanager.ts';
import { APP_NS, clusterWithCrds, INSTALL_NS, pod, privilegedRule, startReplica, until, writesBy } from './support/controller-harness.ts';

const POD = { group: '', version: 'v1', kind: 'Pod' };

function tester(api: ApiServer): KubeClient {
  return createKubeClient({ kubeconfigYaml: api.kubeConfig('tester'), qps: 100, burst: 100, userAgent: 'tester' });
}

async function ledgerEntry(kube: KubeClient, key: string) {
  const cm = await kube.core.readNamespacedConfigMap({ namespace: INSTALL_NS, name: ledgerShardName(key) }).catch(() => undefined);
  const raw = cm?.data?.[key];
  return raw === undefined ? undefined : decodeLedgerEntry(raw);
}

async function reports(kube: KubeClient): Promise<number> {
  const list = (await kube.customObjects.listNamespacedCustomObject({ group: 'wgpolicyk8s.io', version: 'v1alpha2', namespace: APP_NS, plural: 'policyreports' })) as { items: unknown[] };
  return list.items.length;
}

async function lastAuditTime(kube: KubeClient, name: string): Promise<string | undefined> {
  const r = (await kube.customObjects.getClusterCustomObject({ group: 'portal.dev', version: 'v1alpha1', plural: 'portalclusterrules', name })) as { status?: { lastAuditTime?: string } };
  return r.status?.lastAuditTime;
}

test('an unconfirmed eviction intent is settled by the pod: still there → evicted now (once); re-created → done, not evicted', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  const kube = tester(api);
  await admin.apply(privilegedRule('evicting', [{ type: 'evict' }]));
  const stuck = await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod('stuck', true) as never });
  const old = await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod('recreated', true) as never });
  await kube.core.deleteNamespacedPod({ namespace: APP_NS, name: 'recreated' });
  const fresh = await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod('recreated', true) as never });
  assert.notEqual(fresh.metadata?.uid, old.metadata?.uid);

  // The crash window: a leader wrote the intents, then died before (stuck) or after (recreated) the Eviction call.
  const key = (name: string) => actionKey({ rule: 'evicting', gvk: POD, namespace: APP_NS, name, actionType: 'evict' });
  const at = Date.now();
  const intent = (uid: string | undefined) => encodeLedgerEntry({ state: 'intent', epoch: 'dead-lease/1', at, until: at + 3_600_000, ...(uid ? { uid } : {}) });
  const shards = new Map<string, Record<string, string>>();
  for (const [name, uid] of [['stuck', stuck.metadata?.uid], ['recreated', old.metadata?.uid]] as const) {
    const shard = ledgerShardName(key(name));
    shards.set(shard, { ...shards.get(shard), [key(name)]: intent(uid) });
  }
  for (const [name, data] of shards) {
    await kube.core.createNamespacedConfigMap({ namespace: INSTALL_NS, body: { metadata: { name, namespace: INSTALL_NS, labels: { ...LEDGER_LABELS } }, data } });
  }

  // The predecessor wrote the reports (its evictions are disabled here, so the
  // intents below are the only trace of them): nothing else is pending.
  const [prev, next] = await Promise.all([startReplica(t, api, 'replica-prev', { maxEvictionsPerMinute: 0 }), startReplica(t, api, 'replica-next')]);
  prev.grant();
  await until('reports by the predecessor', 10_000, async () => (await reports(kube)) === 2);
  await until('predecessor idle', 10_000, () => prev.controller.idle());
  await prev.revoke();
  await until('the follower learnt both intents', 10_000, () => next.controller.synced() && next.controller.idle() && next.controller.reports.synced() && next.controller.violations('evicting') === 2 && next.controller.store.get(key('stuck'))?.state === 'intent' && next.controller.store.get(key('recreated'))?.state === 'intent');
  assert.deepEqual(writesBy(api, 'replica-next', 'pods'), [], 'a follower evicts nothing');
  next.grant();

  await until('stuck evicted', 10_000, async () => (await kube.core.listNamespacedPod({ namespace: APP_NS })).items.every((p) => p.metadata?.name !== 'stuck'));
  await until('stuck: ledger done', 10_000, async () => (await ledgerEntry(kube, key('stuck')))?.state === 'done');
  await until('recreated: ledger done', 10_000, async () => (await ledgerEntry(kube, key('recreated')))?.state === 'done');
  await until('idle', 10_000, () => next.controller.idle());

  const evictions = (name: string) => api.auditLog().filter((e) => e.subresource === 'eviction' && e.name === name).map((e) => `${e.user} ${e.code}`);
  assert.deepEqual(evictions('stuck'), ['replica-next 201'], 'the pod that was never evicted is evicted once');
  assert.deepEqual(evictions('recreated'), [], 'a pod re-created after its eviction is not evicted again inside the window');
  assert.deepEqual(writesBy(api, 'replica-next', 'policyreports').filter((e) => e.verb !== 'delete'), [], 'the reports were already right: only the eviction was pending');
  const still = await kube.core.readNamespacedPod({ namespace: APP_NS, name: 'recreated' });
  assert.equal(still.metadata?.uid, fresh.metadata?.uid);
  assert.equal((await ledgerEntry(kube, key('recreated')))?.uid, old.metadata?.uid, 'the settled entry keeps the evicted pod uid and window');
});

test('a new leader resolves the alerts of objects deleted while it was a follower', async (t) => {
  const am = await startAlertmanager();
  t.after(() => am.close());
  const { api, admin } = await clusterWithCrds(t);
  const kube = tester(api);
  await admin.apply(privilegedRule('alerting', [{ type: 'alert' }]));
  await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod('doomed', true) as never });
  const config = { alertmanagerUrls: [am.url] };
  const [a, b] = await Promise.all([startReplica(t, api, 'replica-a', config), startReplica(t, api, 'replica-b', config)]);
  a.grant();
  const firing = async () => (await am.alerts()).some((x) => x.labels['name'] === 'doomed' && x.labels['rule'] === 'alerting');
  await until('the alert in Alertmanager', 15_000, firing);
  const key = actionKey({ rule: 'alerting', gvk: POD, namespace: APP_NS, name: 'doomed', actionType: 'alert' });
  await until('b learnt the alert from the ledger', 10_000, () => b.controller.store.get(key)?.state === 'done');

  // The leader goes away; the pod is deleted while b only follows.
  await a.revoke();
  await until('a idle', 5000, () => a.controller.idle());
  await kube.core.deleteNamespacedPod({ namespace: APP_NS, name: 'doomed' });
  await until('b saw the delete', 10_000, () => b.controller.violations('alerting') === 0 && b.controller.idle());
  assert.ok(await firing(), 'nobody resolved it yet (no leader)');
  assert.equal(b.controller.store.get(key)?.state, 'done', 'a follower keeps the record until a leader resolves it');

  b.grant();
  await until('the alert resolved by the new leader', 15_000, async () => !(await firing()));
  await until('ledger entry removed', 10_000, async () => (await ledgerEntry(kube, key)) === undefined);
  assert.ok(writesBy(api, 'replica-b', 'configmaps').length > 0, 'b removed the ledger entry');
  await until('b forgot the deleted pod once resolved', 5000, () => b.controller.stats()['objects'] === 0);
});

test('lastAuditTime: a takeover moves nothing; the first full pass as leader does, also one that began as a follower', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  const kube = tester(api);
  await admin.apply(privilegedRule('audited'));
  await kube.core.createNamespacedPod({ namespace: APP_NS, body: pod('bad', true) as never });
  const [a, b] = await Promise.all([startReplica(t, api, 'replica-a'), startReplica(t, api, 'replica-b')]);
  await until('a: first complete pass', 10_000, () => a.controller.completePasses > 0 && a.controller.idle());
  a.grant();
  a.controller.fullPass();
  await until('lastAuditTime from a', 10_000, async () => (await lastAuditTime(kube, 'audited')) !== undefined);
  const first = await lastAuditTime(kube, 'audited');
  await a.revoke();

  await until('b: first complete pass', 10_000, () => b.controller.completePasses > 0 && b.controller.idle());
  b.grant();
  // The takeover drained and the status flush it scheduled (every rule) ran: a takeover alone must not write status.
  await until('b idle after takeover and its status flush', 5000, () => b.controller.idle() && b.actuator.status.flushes > 0);
  assert.equal(await lastAuditTime(kube, 'audited'), first, 'a takeover does not move lastAuditTime');
  assert.deepEqual(writesBy(api, 'replica-b', 'portalclusterrules'), [], 'no status rewrite on takeover');

  // A pass that starts while b follows and ends after b took over counts, once the takeover drained.
  await b.revoke();
  await until('b idle', 5000, () => b.controller.idle());
  const passes = b.controller.passes;
  assert.ok(b.controller.fullPass() > 0, 'a pass started as a follower');
  b.grant();
  await until('the pass ended', 10_000, () => b.controller.passes > passes && b.controller.idle());
  await until('lastAuditTime moved by the new leader', 5000, async () => ((await lastAuditTime(kube, 'audited')) ?? '') > (first ?? ''));
  assert.ok(writesBy(api, 'replica-b', 'portalclusterrules').every((e) => e.subresource === 'status'), 'status subresource only');
});
