import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AdmissionAttributes } from '../../packages/devcluster/src/apiserver/index.ts';
import { caller, readWatch, withServer } from './helpers.ts';

const LEASES = '/apis/coordination.k8s.io/v1/namespaces/default/leases';
const lease = (name: string, extra: Record<string, unknown> = {}) => ({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, ...extra }, spec: { holderIdentity: 'a' } });

test('create, conflict, not found, no-op and Status shapes', () => withServer({}, async (s) => {
  const call = caller(s, s.addUser('alice'));
  const c = await call('POST', LEASES, lease('l1'));
  assert.equal(c.status, 201);
  assert.equal(c.headers.get('content-type'), 'application/json');
  const m = c.body['metadata'] as Record<string, string>;
  assert.ok(m['uid'] && m['creationTimestamp'] && m['resourceVersion']);
  const dup = await call('POST', LEASES, lease('l1'));
  assert.equal(dup.status, 409);
  assert.equal(dup.body['reason'], 'AlreadyExists');
  const nf = await call('GET', `${LEASES}/nope`);
  assert.equal(nf.status, 404);
  assert.equal(nf.body['message'], 'leases.coordination.k8s.io "nope" not found');
  assert.deepEqual(nf.body['details'], { name: 'nope', group: 'coordination.k8s.io', kind: 'leases' });
  const noRv = await call('PUT', `${LEASES}/l1`, lease('l1'));
  assert.equal(noRv.status, 422);
  const stale = await call('PUT', `${LEASES}/l1`, lease('l1', { resourceVersion: '1' }));
  assert.equal(stale.status, 409);
  assert.equal(stale.body['reason'], 'Conflict');
  assert.match(String(stale.body['message']), /the object has been modified; please apply your changes/);
  const same = await call('PUT', `${LEASES}/l1`, { ...c.body });
  assert.equal(same.status, 200);
  assert.equal((same.body['metadata'] as Record<string, string>)['resourceVersion'], m['resourceVersion']);
  const created = await call('PUT', `${LEASES}/l2`, lease('l2'));
  assert.equal(created.status, 201);
  const withRv = await call('POST', LEASES, lease('l3', { resourceVersion: '5' }));
  assert.equal(withRv.status, 500);
  const bad = await call('POST', LEASES, { ...lease('l4'), spec: { renewTime: new Date().toISOString() } });
  assert.equal(bad.status, 400);
  const pod404 = await call('GET', '/api/v1/namespaces/default/pods/x');
  assert.equal(pod404.body['message'], 'pods "x" not found');
  const del = await call('DELETE', `${LEASES}/l1`);
  assert.equal(del.status, 200);
  assert.equal(del.body['kind'], 'Status');
  assert.equal(del.body['status'], 'Success');
  const unauth = await fetch(`${s.url}/api/v1/namespaces`, { headers: { Authorization: 'Bearer wrong' } });
  assert.equal(unauth.status, 401);
}));

test('patch types, status split, generation, selectors and paging', () => withServer({}, async (s) => {
  const call = caller(s, s.addUser('alice'));
  const crd = {
    apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: 'widgets.example.com' },
    spec: { group: 'example.com', scope: 'Namespaced', names: { plural: 'widgets', singular: 'widget', kind: 'Widget' },
      versions: [{ name: 'v1', served: true, storage: true, subresources: { status: {} },
        schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', properties: { size: { type: 'integer' } } }, status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } } } }] },
  };
  assert.equal((await call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd)).status, 201);
  const W = '/apis/example.com/v1/namespaces/default/widgets';
  const w = await call('POST', W, { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w', labels: { app: 'x' } }, spec: { size: 1, junk: 1 }, status: { ok: true } });
  assert.equal(w.status, 201);
  assert.equal((w.body['metadata'] as Record<string, number>)['generation'], 1);
  assert.equal(w.body['status'], undefined, 'status dropped on create');
  assert.deepEqual(w.body['spec'], { size: 1 }, 'unknown fields pruned');
  const mp = await call('PATCH', `${W}/w`, { spec: { size: 2 }, status: { ok: true } }, 'application/merge-patch+json');
  assert.equal((mp.body['metadata'] as Record<string, number>)['generation'], 2);
  assert.equal(mp.body['status'], undefined, 'main resource ignores status');
  const sp = await call('PATCH', `${W}/w/status`, { status: { ok: true }, spec: { size: 9 } }, 'application/merge-patch+json');
  assert.deepEqual(sp.body['status'], { ok: true });
  assert.deepEqual(sp.body['spec'], { size: 2 });
  assert.equal((sp.body['metadata'] as Record<string, number>)['generation'], 2);
  const lab = await call('PATCH', `${W}/w`, { metadata: { labels: { b: 'c' } } }, 'application/merge-patch+json');
  assert.equal((lab.body['metadata'] as Record<string, number>)['generation'], 2, 'metadata change keeps generation');
  assert.equal((await call('PATCH', `${W}/w`, {}, 'application/strategic-merge-patch+json')).status, 415);
  assert.equal((await call('PATCH', `${W}/w`, { op: 'x' }, 'application/json-patch+json')).status, 400);
  assert.equal((await call('PATCH', `${W}/w`, [{ op: 'remove', path: '/spec/nothing' }], 'application/json-patch+json')).status, 422);
  const jp = await call('PATCH', `${W}/w`, [{ op: 'replace', path: '/spec/size', value: 7 }], 'application/json-patch+json');
  assert.equal((jp.body['spec'] as Record<string, number>)['size'], 7);
  const inv = await call('PATCH', `${W}/w`, { spec: { size: 'big' } }, 'application/merge-patch+json');
  assert.equal(inv.status, 422);
  assert.equal(inv.body['reason'], 'Invalid');
  const noFm = await call('PATCH', `${W}/n`, 'apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: n}\n', 'application/apply-patch+yaml');
  assert.equal(noFm.status, 422);
  const ssa = await call('PATCH', `${W}/n?fieldManager=me`, 'apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: n}\nspec: {size: 3}\n', 'application/apply-patch+yaml');
  assert.equal(ssa.status, 201);
  // pods: strategic merge by container name
  const P = '/api/v1/namespaces/default/pods';
  await call('POST', P, { metadata: { name: 'p', labels: { app: 'a' } }, spec: { containers: [{ name: 'a', image: 'x' }, { name: 'b', image: 'y' }] } });
  const smp = await call('PATCH', `${P}/p`, { spec: { containers: [{ name: 'b', image: 'z' }] } }, 'application/strategic-merge-patch+json');
  assert.deepEqual((smp.body['spec'] as Record<string, unknown>)['containers'], [{ name: 'a', image: 'x' }, { name: 'b', image: 'z' }]);
  for (let i = 0; i < 5; i++) await call('POST', P, { metadata: { name: `q${i}`, labels: { app: i % 2 ? 'odd' : 'even' } }, spec: { containers: [{ name: 'c', image: 'i' }] } });
  const sel = await call('GET', `${P}?labelSelector=${encodeURIComponent('app in (odd,a)')}`);
  assert.deepEqual((sel.body['items'] as { metadata: { name: string } }[]).map((i) => i.metadata.name), ['p', 'q1', 'q3']);
  assert.equal((sel.body['items'] as Record<string, unknown>[])[0]!['kind'], undefined, 'built-in list items carry no kind');
  const fs = await call('GET', `${P}?fieldSelector=metadata.name%3Dq2`);
  assert.equal((fs.body['items'] as unknown[]).length, 1);
  assert.equal((await call('GET', `${P}?fieldSelector=spec.bogus%3D1`)).status, 400);
  const page1 = await call('GET', `${P}?limit=4`);
  const cont = (page1.body['metadata'] as Record<string, string>)['continue'];
  assert.ok(cont);
  const page2 = await call('GET', `${P}?limit=4&continue=${cont}`);
  assert.equal((page1.body['items'] as unknown[]).length + (page2.body['items'] as unknown[]).length, 6);
  // dry run stores nothing
  assert.equal((await call('POST', `${P}?dryRun=All`, { metadata: { name: 'dry' }, spec: { containers: [{ name: 'c', image: 'i' }] } })).status, 201);
  assert.equal((await call('GET', `${P}/dry`)).status, 404);
  // deleting the CRD removes its objects and stops serving it
  await call('DELETE', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com');
  assert.equal((await call('GET', W)).status, 404);
}));

test('watch: synthetic ADDED, resume, selector transitions, bookmarks, 410', () => withServer({ historyLimit: 5, bookmarkIntervalMs: 50 }, async (s) => {
  const token = s.addUser('alice');
  const call = caller(s, token);
  const CM = '/api/v1/namespaces/default/configmaps';
  const a = await call('POST', CM, { metadata: { name: 'a', labels: { x: '1' } } });
  const rv = (a.body['metadata'] as Record<string, string>)['resourceVersion']!;
  const initial = await readWatch(`${s.url}${CM}?watch=true`, token, (e) => e.length >= 1);
  assert.equal(initial[0]!['type'], 'ADDED');
  assert.equal((initial[0]!['object'] as Record<string, unknown>)['kind'], 'ConfigMap');
  const p = readWatch(`${s.url}${CM}?watch=true&labelSelector=x%3D1&allowWatchBookmarks=true&resourceVersion=${rv}`, token,
    (e) => e.some((x) => x['type'] === 'BOOKMARK') && e.filter((x) => x['type'] !== 'BOOKMARK').length >= 2);
  await new Promise((r) => setTimeout(r, 50));
  await call('PATCH', `${CM}/a`, { data: { k: 'v' } }, 'application/merge-patch+json');
  await call('PATCH', `${CM}/a`, { metadata: { labels: { x: '2' } } }, 'application/merge-patch+json');
  const evs = await p;
  assert.deepEqual(evs.filter((e) => e['type'] !== 'BOOKMARK').map((e) => e['type']), ['MODIFIED', 'DELETED']);
  // no-op write emits nothing and keeps the RV
  const before = (await call('GET', `${CM}/a`)).body;
  const after = await call('PUT', `${CM}/a`, before);
  assert.equal((after.body['metadata'] as Record<string, string>)['resourceVersion'], (before['metadata'] as Record<string, string>)['resourceVersion']);
  for (let i = 0; i < 10; i++) await call('POST', CM, { metadata: { name: `n${i}` } });
  const old = await readWatch(`${s.url}${CM}?watch=true&resourceVersion=${rv}`, token, (e) => e.length >= 1);
  assert.equal(old[0]!['type'], 'ERROR');
  assert.equal((old[0]!['object'] as Record<string, unknown>)['code'], 410);
  assert.equal((old[0]!['object'] as Record<string, unknown>)['reason'], 'Expired');
}));

test('admission is called with kube attributes; deny and warnings reach the client', () => {
  const seen: AdmissionAttributes[] = [];
  return withServer({
    admission: {
      admit: async (attrs) => {
        seen.push(attrs);
        if (attrs.name === 'denied') return { allowed: false, warnings: ['w1'], status: { code: 403, reason: 'Forbidden', message: 'admission webhook "x" denied the request: no' } };
        return { allowed: true, warnings: ['careful'] };
      },
    },
  }, async (s) => {
    const call = caller(s, s.addUser('bob', ['devs']));
    const ok = await call('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'fine' } });
    assert.equal(ok.status, 201);
    assert.equal(ok.headers.get('warning'), '299 - "careful"');
    const no = await call('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'denied' } });
    assert.equal(no.status, 403);
    assert.equal(no.body['message'], 'admission webhook "x" denied the request: no');
    assert.equal((await call('GET', '/api/v1/namespaces/default/configmaps/denied')).status, 404);
    await call('PATCH', '/api/v1/namespaces/default/configmaps/fine', { data: { a: 'b' } }, 'application/merge-patch+json');
    await call('DELETE', '/api/v1/namespaces/default/configmaps/fine');
    await call('POST', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', { metadata: { name: 'vwc' }, webhooks: [] });
    assert.deepEqual(seen.map((a) => `${a.operation}:${a.name}`), ['CREATE:fine', 'CREATE:denied', 'UPDATE:fine', 'DELETE:fine']);
    const upd = seen[2]!;
    assert.equal(upd.userInfo.username, 'bob');
    assert.ok(upd.userInfo.groups.includes('devs'));
    assert.ok(upd.oldObject && upd.object);
    assert.equal(seen[3]!.object, null);
    const audit = s.auditLog();
    assert.ok(audit.some((e) => e.verb === 'create' && e.name === 'denied' && e.code === 403));
  });
});

test('finalizers, namespaces, garbage collection and eviction with PDBs', () => withServer({}, async (s) => {
  const call = caller(s, s.addUser('alice'));
  assert.equal((await call('POST', '/api/v1/namespaces', { metadata: { name: 'team' } })).status, 201);
  const ns = await call('GET', '/api/v1/namespaces/team');
  assert.equal(((ns.body['metadata'] as Record<string, Record<string, string>>)['labels'])!['kubernetes.io/metadata.name'], 'team');
  const CM = '/api/v1/namespaces/team/configmaps';
  await call('POST', CM, { metadata: { name: 'f', finalizers: ['x/y'] } });
  const d = await call('DELETE', `${CM}/f`);
  assert.ok((d.body['metadata'] as Record<string, string>)['deletionTimestamp']);
  assert.equal((await call('GET', `${CM}/f`)).status, 200);
  await call('PATCH', `${CM}/f`, { metadata: { finalizers: null } }, 'application/merge-patch+json');
  assert.equal((await call('GET', `${CM}/f`)).status, 404);
  const owner = await call('POST', CM, { metadata: { name: 'owner' } });
  const uid = (owner.body['metadata'] as Record<string, string>)['uid']!;
  await call('POST', CM, { metadata: { name: 'dep', ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid }] } });
  await call('POST', CM, { metadata: { name: 'orphan', ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: 'not-the-uid' }] } });
  await call('DELETE', `${CM}/owner`);
  const deadline = Date.now() + 3000;
  while (Date.now() < deadline && ((await call('GET', `${CM}/dep`)).status === 200 || (await call('GET', `${CM}/orphan`)).status === 200)) await new Promise((r) => setTimeout(r, 20));
  assert.equal((await call('GET', `${CM}/dep`)).status, 404);
  assert.equal((await call('GET', `${CM}/orphan`)).status, 404);
  // eviction
  const P = '/api/v1/namespaces/team/pods';
  for (const n of ['a', 'b']) {
    await call('POST', P, { metadata: { name: n, labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image: 'i' }] } });
    await call('PATCH', `${P}/${n}/status`, { status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] } }, 'application/merge-patch+json');
  }
  await call('POST', '/apis/policy/v1/namespaces/team/poddisruptionbudgets', { metadata: { name: 'pdb' }, spec: { minAvailable: 1, selector: { matchLabels: { app: 'web' } } } });
  const ev = (n: string) => call('POST', `${P}/${n}/eviction`, { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: n, namespace: 'team' } });
  const first = await ev('a');
  assert.equal(first.status, 201);
  const second = await ev('b');
  assert.equal(second.status, 429);
  assert.equal(second.body['message'], "Cannot evict pod as it would violate the pod's disruption budget.");
  assert.equal(((second.body['details'] as Record<string, { reason: string }[]>)['causes'])![0]!.reason, 'DisruptionBudget');
  assert.equal((await ev('zzz')).status, 404);
  // deleting the namespace: Terminating, then gone with its contents
  const dn = await call('DELETE', '/api/v1/namespaces/team');
  assert.equal((dn.body['status'] as Record<string, string>)['phase'], 'Terminating');
  const until = Date.now() + 3000;
  while (Date.now() < until && (await call('GET', '/api/v1/namespaces/team')).status === 200) await new Promise((r) => setTimeout(r, 20));
  assert.equal((await call('GET', '/api/v1/namespaces/team')).status, 404);
  assert.equal(((await call('GET', '/api/v1/pods')).body['items'] as unknown[]).length, 0);
}));

test('faults: errors, latency, cut off, side API', () => withServer({}, async (s) => {
  const token = s.addUser('victim');
  const call = caller(s, token);
  const admin = caller(s, s.adminToken);
  s.faults.setErrorRate(1, 429, { user: 'victim', verbs: ['list'] });
  const r = await call('GET', '/api/v1/namespaces/default/configmaps');
  assert.equal(r.status, 429);
  assert.equal(r.body['reason'], 'TooManyRequests');
  assert.equal((await admin('GET', '/api/v1/namespaces/default/configmaps')).status, 200);
  s.faults.clear();
  await admin('POST', '/_portal/faults', { action: 'latency', ms: 150, user: 'victim' });
  const t0 = Date.now();
  await call('GET', '/api/v1/namespaces/default/configmaps');
  assert.ok(Date.now() - t0 >= 140);
  await admin('POST', '/_portal/faults', { action: 'clear' });
  // Cut only once the stream is open (its first event arrived), not after a
  // fixed sleep; then the watch must end well before its 5 s deadline.
  assert.equal((await admin('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'seen' } })).status, 201);
  let opened!: () => void;
  const open = new Promise<void>((r2) => (opened = r2));
  const watch = readWatch(`${s.url}/api/v1/namespaces/default/configmaps?watch=true`, token, (e) => {
    if (e.length > 0) opened();
    return false;
  }, 5000);
  await open;
  const cutAt = Date.now();
  const cut = await admin('POST', '/_portal/faults', { action: 'cutOff', user: 'victim' });
  assert.equal(cut.status, 200);
  await watch;
  assert.ok(Date.now() - cutAt < 2500, `the cut watch ended after ${Date.now() - cutAt} ms, not at once`);
  await assert.rejects(call('GET', '/api/v1/namespaces'));
  await admin('POST', '/_portal/faults', { action: 'restore', user: 'victim' });
  assert.equal((await call('GET', '/api/v1/namespaces')).status, 200);
  assert.equal((await caller(s, token)('GET', '/_portal/audit')).status, 403);
  const audit = await admin('GET', '/_portal/audit');
  assert.ok(Array.isArray(audit.body));
}));
