/** ResilientInformer against the real embedded API server. */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { silentLogger } from '../../src/observability/logger.ts';
import { ResilientInformer, stripManagedFields, type InformerConfig } from '../../src/kube/informer.ts';
import { NamespaceLabelCache } from '../../src/sources/namespace-labels.ts';
import { TokenBucket } from '../../src/kube/rate-limiter.ts';
import type { KubeClient } from '../../src/kube/client.ts';
import { apiServer, clientFor, until } from '../leader/cluster.ts';

const NAMESPACES: InformerConfig = { name: 'ns', path: '/api/v1/namespaces', apiVersion: 'v1', kind: 'Namespace', backoff: { initialMs: 20, maxMs: 200 } };

function run(t: TestContext, client: KubeClient, config: Partial<InformerConfig> = {}) {
  const informer = new ResilientInformer(client, { ...NAMESPACES, ...config }, silentLogger());
  const controller = new AbortController();
  const done = informer.start(controller.signal);
  const stop = async () => {
    controller.abort();
    await done;
  };
  t.after(stop);
  return { informer, stop, done };
}

async function createNs(client: KubeClient, name: string) {
  await client.core.createNamespace({ body: { metadata: { name, labels: { team: name } } } });
}

test('list and watch objects have the same plain shape', async (t) => {
  const api = await apiServer(t);
  const admin = clientFor(api, 'admin');
  const { informer } = run(t, clientFor(api, 'w1'));
  await informer.waitForSync();
  await createNs(admin, 'from-watch');
  await until('the watch event', 2000, () => informer.get('from-watch') !== undefined);
  const viaWatch = informer.get('from-watch')!;
  const second = run(t, clientFor(api, 'w2'));
  await second.informer.waitForSync();
  const viaList = second.informer.get('from-watch')!;
  assert.deepEqual(viaList, viaWatch);
  assert.equal(viaList.kind, 'Namespace');
  assert.equal(viaList.apiVersion, 'v1');
  assert.equal(typeof viaList.metadata?.creationTimestamp, 'string', 'no Date instances');
  assert.equal(Object.getPrototypeOf(viaList), Object.prototype, 'plain object, not a model instance');
});

test('a transform (stripManagedFields) shapes listed and watched objects alike before they are cached', async (t) => {
  const api = await apiServer(t);
  const admin = clientFor(api, 'admin');
  await createNs(admin, 'from-list');
  const { informer } = run(t, clientFor(api, 'w'), { transform: stripManagedFields });
  const seen: Array<Record<string, unknown> | undefined> = [];
  informer.onEvent((e) => seen.push(e.object.metadata as Record<string, unknown> | undefined));
  await informer.waitForSync();
  await createNs(admin, 'from-watch');
  await until('the watch event', 2000, () => informer.get('from-watch') !== undefined);
  const raw = (await admin.core.readNamespace({ name: 'from-watch' })).metadata as Record<string, unknown> & { managedFields?: unknown[] };
  assert.ok((raw.managedFields ?? []).length > 0, 'the API server keeps managedFields');
  for (const name of ['from-list', 'from-watch']) {
    const cached = informer.get(name)!;
    assert.equal((cached.metadata as Record<string, unknown>)['managedFields'], undefined, `${name}: stripped`);
    assert.deepEqual(cached.metadata?.labels, { team: name, 'kubernetes.io/metadata.name': name }, `${name}: the rest kept`);
  }
  assert.ok(seen.length >= 2 && seen.every((m) => m?.['managedFields'] === undefined), 'handlers see the stripped objects');
});

test('restarts after errors (API cut off) and catches up', async (t) => {
  const api = await apiServer(t);
  const admin = clientFor(api, 'admin');
  const events: string[] = [];
  const { informer } = run(t, clientFor(api, 'w'));
  informer.onEvent((e) => events.push(`${e.type}:${e.object.metadata?.name}`));
  await informer.waitForSync();
  api.faults.cutOff('w');
  await until('an error', 2000, () => informer.stats().errors >= 1);
  assert.equal(informer.ready(), false, 'not ready while the watch is down');
  await createNs(admin, 'while-down');
  api.faults.restore('w');
  await until('catching up', 3000, () => informer.get('while-down') !== undefined);
  assert.ok(events.includes('add:while-down'));
  await until('ready again', 2000, () => informer.ready());
});

test('relists after 410 Expired', async (t) => {
  const api = await apiServer(t, { historyLimit: 3 });
  const admin = clientFor(api, 'admin');
  const deleted: string[] = [];
  const { informer } = run(t, clientFor(api, 'w'));
  informer.onEvent((e) => e.type === 'delete' && deleted.push(e.object.metadata?.name ?? ''));
  await createNs(admin, 'doomed');
  await until('doomed', 2000, () => informer.get('doomed') !== undefined);
  api.faults.cutOff('w');
  await until('an error', 2000, () => informer.stats().errors >= 1);
  await admin.core.deleteNamespace({ name: 'doomed' });
  for (let i = 0; i < 6; i++) await createNs(admin, `n${i}`); // pushes the informer's RV out of history
  api.faults.restore('w');
  await until('a 410 relist', 3000, () => informer.stats().expiredRelists >= 1);
  await until('the relisted state', 2000, () => informer.get('n5') !== undefined && informer.get('doomed') === undefined);
  assert.ok(deleted.includes('doomed'), 'a delete missed during the outage is emitted by the relist');
});

test('a silent watch is detected and restarted; bookmarks keep it fresh', async (t) => {
  const quiet = await apiServer(t, { bookmarkIntervalMs: 60_000 });
  const q = run(t, clientFor(quiet, 'w'), { staleAfterMs: 300 });
  await q.informer.waitForSync();
  await until('a stale restart', 2000, () => q.informer.stats().staleRestarts >= 1);
  const chatty = await apiServer(t, { bookmarkIntervalMs: 100 });
  const c = run(t, clientFor(chatty, 'w'), { staleAfterMs: 300 });
  await c.informer.waitForSync();
  // Counted, not timed: the server sends bookmarks at least 100 ms apart, so
  // 10 of them span ≥ 900 ms, three times staleAfterMs: without them the
  // silent watch would have been restarted (as `q`'s was) by now.
  await until('10 bookmarks', 5000, () => c.informer.stats().bookmarks >= 10);
  assert.equal(c.informer.stats().staleRestarts, 0);
  assert.equal(c.informer.stats().watches, 1, 'the one watch, never restarted');
  assert.equal(c.informer.ready(), true);
});

test('stop() does not restart and leaves no watch behind', async (t) => {
  const api = await apiServer(t);
  const admin = clientFor(api, 'admin');
  const { informer, stop } = run(t, clientFor(api, 'w'));
  await informer.waitForSync();
  await until('w to watch', 2000, () => api.openWatches('w') === 1);
  await stop();
  // start() has returned: its loop is over, so nothing can restart it. What is
  // left to prove is on the server: the watch it held is gone.
  await until("the server to drop w's watch", 2000, () => api.openWatches('w') === 0);
  const stats = informer.stats();
  await createNs(admin, 'after-stop');
  // With no watch of w's open on the server, nothing can deliver this event.
  assert.equal(api.openWatches('w'), 0);
  assert.deepEqual(informer.stats(), stats);
  assert.equal(informer.get('after-stop'), undefined);
  assert.equal(informer.ready(), false);
});

test('NamespaceLabelCache serves namespace labels, unknown is undefined', async (t) => {
  const api = await apiServer(t);
  await createNs(clientFor(api, 'admin'), 'team-a');
  const cache = new NamespaceLabelCache(clientFor(api, 'w'), silentLogger());
  const controller = new AbortController();
  const done = cache.start(controller.signal);
  t.after(() => {
    controller.abort();
    return done;
  });
  await cache.waitForSync();
  assert.equal(cache.labels('team-a')?.team, 'team-a');
  assert.equal(cache.labels('team-a')?.['kubernetes.io/metadata.name'], 'team-a');
  assert.equal(cache.labels('nope'), undefined);
});

test('token bucket: burst then qps', () => {
  let now = 0;
  const bucket = new TokenBucket({ qps: 10, burst: 3, now: () => now });
  assert.equal([1, 2, 3, 4].map(() => bucket.tryTake()).filter(Boolean).length, 3);
  assert.equal(Math.round(bucket.delayMs()), 100);
  now += 100;
  assert.equal(bucket.tryTake(), true);
  assert.equal(bucket.tryTake(), false);
  now += 10_000;
  assert.equal([1, 2, 3, 4].map(() => bucket.tryTake()).filter(Boolean).length, 3, 'never more than burst');
});
