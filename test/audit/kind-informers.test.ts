/**
 * Audit informers follow the rules (issue 5, part 1): a rule matching
 * ConfigMaps starts a ConfigMap informer (a watch on /api/v1/configmaps from
 * this replica's user, as the API server counts it) and violating ConfigMaps
 * get PolicyReports; deleting the rule stops that informer (after every
 * watch of the user is dropped, the others come back and the ConfigMap one
 * does not) and the reports of those ConfigMaps go.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Report as PolicyReport } from '../../src/policy/report-shape.ts';
import type { ApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import type { DevApiClient } from '../../packages/devcluster/src/dev/api-client.ts';
import { APP_NS, clusterWithCrds, startReplica, until } from './support/controller-harness.ts';

const CONFIGMAPS = 'WATCH /api/v1/configmaps';
const USER = 'replica-a';

const configMapRule = {
  apiVersion: 'portal.dev/v1alpha1',
  kind: 'PortalClusterRule',
  metadata: { name: 'safe-configmaps' },
  spec: {
    enforcement: 'Audit',
    severity: 'medium',
    category: 'Configuration',
    match: { kinds: [{ apiGroups: [''], kinds: ['ConfigMap'] }] },
    validate: {
      message: 'ConfigMaps must not set mode=unsafe.',
      schema: { type: 'object', properties: { data: { type: 'object', properties: { mode: { not: { const: 'unsafe' } } } } } },
    },
  },
};

/** Watches opened per path by `user`, as the API server counted them. */
async function watchCounts(admin: DevApiClient, user: string): Promise<Record<string, number>> {
  const res = await admin.request('GET', '/_portal/requests');
  assert.equal(res.status, 200);
  const all = (res.body as Record<string, Record<string, number>>)[user] ?? {};
  return Object.fromEntries(Object.entries(all).filter(([k]) => k.startsWith('WATCH ')));
}

async function reports(admin: DevApiClient): Promise<PolicyReport[]> {
  const res = await admin.request('GET', `/apis/wgpolicyk8s.io/v1alpha2/namespaces/${APP_NS}/policyreports`);
  assert.equal(res.status, 200);
  return (res.body as { items: PolicyReport[] }).items;
}

async function configMapUids(admin: DevApiClient): Promise<Map<string, string>> {
  const res = await admin.request('GET', `/api/v1/namespaces/${APP_NS}/configmaps`);
  const items = (res.body as { items: Array<{ metadata: { name: string; uid: string } }> }).items;
  return new Map(items.map((c) => [c.metadata.uid, c.metadata.name]));
}

/** Drops every watch of `user` and waits until each other watch it had was opened again; returns the counts after. */
async function dropAndAwaitReconnect(api: ApiServer, admin: DevApiClient, user: string, except: string): Promise<Record<string, number>> {
  const before = await watchCounts(admin, user);
  const others = Object.keys(before).filter((k) => k !== except);
  assert.ok(others.length >= 2, `the replica watches more than ConfigMaps: ${JSON.stringify(before)}`);
  api.faults.dropWatches({ user });
  let after: Record<string, number> = {};
  await until(`every other watch of ${user} to reconnect (${others.join(', ')})`, 15_000, async () => {
    after = await watchCounts(admin, user);
    return others.every((k) => (after[k] ?? 0) > (before[k] ?? 0));
  });
  return after;
}

test('a rule matching ConfigMaps starts their informer and reports; deleting it stops the informer and removes the reports', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  for (const [name, mode] of [['cm-unsafe-1', 'unsafe'], ['cm-unsafe-2', 'unsafe'], ['cm-safe', 'safe']] as const) {
    const res = await admin.request('POST', `/api/v1/namespaces/${APP_NS}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { mode } });
    assert.equal(res.status, 201);
  }
  const replica = await startReplica(t, api, USER);
  replica.grant();

  // No rule matches ConfigMaps yet: no informer, no watch.
  await until('the controller to sync', 10_000, () => replica.controller.synced());
  assert.deepEqual(replica.controller.stats()['kinds'], []);
  assert.equal((await watchCounts(admin, USER))[CONFIGMAPS], undefined, 'no ConfigMap watch without a rule');

  await t.test('creating the rule starts a ConfigMap informer and the violating ConfigMaps get reports', async () => {
    await admin.apply(configMapRule);
    await until('the ConfigMap informer', 10_000, () => (replica.controller.stats()['kinds'] as string[]).includes('ConfigMap'));
    await until('a watch on /api/v1/configmaps', 10_000, async () => ((await watchCounts(admin, USER))[CONFIGMAPS] ?? 0) >= 1);
    const uids = await configMapUids(admin);
    // Every namespace also holds the kube-root-ca.crt ConfigMap (as on a real cluster): it passes.
    await until('a PolicyReport per ConfigMap', 10_000, async () => (await reports(admin)).length === 4);
    for (const r of await reports(admin)) {
      const name = uids.get(r.metadata.name);
      assert.ok(name, `report ${r.metadata.name} is named after a ConfigMap uid`);
      assert.equal(r.scope?.kind, 'ConfigMap');
      assert.equal(r.results[0]?.policy, 'safe-configmaps');
      // enforcement Audit: a violation is a 'warn' result (Deny would be 'fail').
      assert.equal(r.results[0]?.result, name === 'cm-safe' || name === 'kube-root-ca.crt' ? 'pass' : 'warn', `${name}: ${r.results[0]?.message}`);
    }
    assert.equal(replica.controller.violations('safe-configmaps'), 2);
    // The informer follows changes: a new violating ConfigMap is reported too.
    assert.equal((await admin.request('POST', `/api/v1/namespaces/${APP_NS}/configmaps`, { metadata: { name: 'cm-unsafe-3' }, data: { mode: 'unsafe' } })).status, 201);
    await until('the report of cm-unsafe-3', 10_000, async () => (await reports(admin)).length === 5);
    assert.equal(replica.controller.violations('safe-configmaps'), 3);
  });

  await t.test('the watch is live: dropped, it is opened again while the rule exists', async () => {
    const before = (await watchCounts(admin, USER))[CONFIGMAPS] ?? 0;
    await dropAndAwaitReconnect(api, admin, USER, CONFIGMAPS);
    await until('the ConfigMap watch to reconnect', 10_000, async () => ((await watchCounts(admin, USER))[CONFIGMAPS] ?? 0) > before);
  });

  await t.test('deleting the rule stops the ConfigMap informer and removes (or empties) the reports', async () => {
    const del = await admin.request('DELETE', '/apis/portal.dev/v1alpha1/portalclusterrules/safe-configmaps');
    assert.equal(del.status, 200);
    await until('the ConfigMap informer to stop', 10_000, () => !(replica.controller.stats()['kinds'] as string[]).includes('ConfigMap'));
    await until('the ConfigMap reports to go', 10_000, async () => (await reports(admin)).every((r) => r.results.length === 0));
    // Nothing applies to those objects any more: the reports are deleted (an empty one would also do).
    assert.deepEqual((await reports(admin)).map((r) => r.metadata.name), []);
    assert.equal(replica.controller.violations('safe-configmaps'), 0);

    // No informer any more: when every watch of the replica is dropped, the
    // others reconnect and the ConfigMap one does not.
    const before = (await watchCounts(admin, USER))[CONFIGMAPS] ?? 0;
    const after = await dropAndAwaitReconnect(api, admin, USER, CONFIGMAPS);
    assert.equal(after[CONFIGMAPS] ?? 0, before, 'no new watch on /api/v1/configmaps');
    // A new violating ConfigMap gets no report either (a bounded look for
    // something that must not happen; the watch count above is the proof).
    assert.equal((await admin.request('POST', `/api/v1/namespaces/${APP_NS}/configmaps`, { metadata: { name: 'cm-unsafe-4' }, data: { mode: 'unsafe' } })).status, 201);
    const quietUntil = performance.now() + 500;
    await until('the queue to be idle', 5000, () => performance.now() > quietUntil && replica.controller.idle());
    assert.ok((await reports(admin)).every((r) => r.results.length === 0));
    assert.equal((await watchCounts(admin, USER))[CONFIGMAPS] ?? 0, before);
  });
});
