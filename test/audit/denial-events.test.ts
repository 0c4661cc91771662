/**
 * Denial Events (issue 33 item 3) against the embedded API server: a denied
 * request becomes one PortalDenied Event on the object, in its namespace,
 * whose count grows on repeats (one create, then patches); a flood of
 * denials in one namespace costs a bounded number of Event calls, takes no
 * request on the admission path, and leaves other namespaces' Events
 * written. The API server's own request log counts the calls.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { Registry, type Counter } from 'prom-client';
import { DenialEvents, denialFact } from '../../src/audit/denial-events.ts';
import { denialEventMetrics } from '../../src/audit/metrics.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import type { Outcome } from '../../src/policy/review/answer.ts';
import { apiServer, clientFor, until } from '../leader/cluster.ts';
import type { ApiServer } from '../../packages/devcluster/src/apiserver/index.ts';

interface Event {
  metadata: { name: string };
  involvedObject: { apiVersion?: string; kind?: string; name?: string; namespace?: string; uid?: string };
  reason?: string;
  message?: string;
  type?: string;
  count?: number;
  reportingComponent?: string;
  reportingInstance?: string;
}

const denied = (namespace: string, name: string, opts: { user?: string; rules?: string[]; kind?: Outcome['request'] extends infer R ? R extends { kind: infer K } ? K : never : never } = {}): Outcome => ({
  httpStatus: 200,
  apiVersion: 'admission.k8s.io/v1',
  decision: 'deny',
  response: { uid: 'u', allowed: false, status: { code: 403, message: 'denied' } },
  request: { uid: 'u', operation: 'CREATE', kind: opts.kind ?? { group: '', version: 'v1', kind: 'Pod' }, namespace, name, user: opts.user ?? 'alice' },
  deniedBy: opts.rules ?? ['deny-privileged'],
});

async function events(api: ApiServer, namespace: string): Promise<Event[]> {
  const r = await fetch(`${api.url}/api/v1/namespaces/${namespace}/events`, { headers: { authorization: `Bearer ${api.adminToken}` } });
  return ((await r.json()) as { items: Event[] }).items.filter((e) => e.reason === 'PortalDenied');
}

/** Event creates and patches `user` sent to `namespace`, from the API server's request log. */
async function eventCalls(api: ApiServer, user: string, namespace: string): Promise<number> {
  const res = await fetch(`${api.url}/_portal/requests`, { headers: { Authorization: `Bearer ${api.adminToken}` } });
  const counts = ((await res.json()) as Record<string, Record<string, number>>)[user] ?? {};
  assert.equal(counts['other'], undefined, 'every request is counted by path');
  const prefix = `/api/v1/namespaces/${namespace}/events`;
  return Object.entries(counts)
    .filter(([request]) => (request.startsWith('POST ') || request.startsWith('PATCH ')) && request.split(' ')[1]!.startsWith(prefix))
    .reduce((n, [, c]) => n + c, 0);
}

/** Runs `d` until the test ends; returns its stop (what the replica's SIGTERM does to it): abort, then its end. */
function running(t: TestContext, d: DenialEvents): () => Promise<void> {
  const controller = new AbortController();
  const done = d.start(controller.signal);
  const stop = (): Promise<void> => {
    controller.abort();
    return done;
  };
  t.after(stop);
  return stop;
}

test('a denied create is one PortalDenied Event on the object; repeats grow its count (one create, then patches)', async (t) => {
  const api = await apiServer(t, { namespaces: ['default', 'team-a'] });
  const d = new DenialEvents({ client: clientFor(api, 'portal'), logger: silentLogger(), identity: 'portal-0_ab', retryMs: 50 });
  running(t, d);
  d.denied(denied('team-a', 'web'));
  const [first] = await until('the Event', 10_000, async () => ((await events(api, 'team-a')).length === 1 ? await events(api, 'team-a') : undefined));
  assert.equal(first!.type, 'Warning');
  assert.equal(first!.message, 'rule deny-privileged denied CREATE by alice');
  assert.deepEqual(first!.involvedObject, { apiVersion: 'v1', kind: 'Pod', name: 'web', namespace: 'team-a' }, 'no uid: a CREATE has none');
  assert.equal(first!.reportingComponent, 'portal.dev/admission');
  assert.equal(first!.reportingInstance, 'portal-0_ab');
  for (let i = 0; i < 4; i++) d.denied(denied('team-a', 'web'));
  await until('count 5', 10_000, async () => ((await events(api, 'team-a'))[0]?.count === 5 ? true : undefined));
  const after = await events(api, 'team-a');
  assert.equal(after.length, 1, 'aggregated: still one Event');
  assert.equal(after[0]!.metadata.name, first!.metadata.name);
  d.denied(denied('team-a', 'web', { user: 'bob' }));
  await until('a second Event for another user', 10_000, async () => ((await events(api, 'team-a')).length === 2 ? true : undefined));
  assert.equal(d.stats()['created'], 2);
  assert.ok((d.stats()['patched'] ?? 0) >= 1);
});

test('a cluster-scoped object: the Event is in "default"; a long rule list is cut at a word, under 1 KiB', async (t) => {
  const api = await apiServer(t, { namespaces: ['default'] });
  const d = new DenialEvents({ client: clientFor(api, 'portal'), logger: silentLogger(), identity: 'portal-0', retryMs: 50 });
  running(t, d);
  const rules = Array.from({ length: 100 }, (_, i) => `rule-number-${i}-with-a-long-name`);
  d.denied(denied('', 'system:aggregate', { rules, kind: { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'ClusterRole' } }));
  const [e] = await until('the Event', 10_000, async () => ((await events(api, 'default')).length === 1 ? await events(api, 'default') : undefined));
  assert.deepEqual(e!.involvedObject, { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'system:aggregate' });
  assert.ok(e!.metadata.name.startsWith('system-aggregate.'), e!.metadata.name);
  assert.ok(e!.message!.length <= 1024 && e!.message!.endsWith('…'), e!.message);
  const shown = e!.message!.slice('rules '.length, -1).split(', ');
  for (const r of shown) assert.ok(rules.includes(r), `a whole rule name, not cut: ${r}`);
});

test('hostile: thousands of denials in one namespace cost a bounded number of Event calls, none on the admission path; other namespaces still get theirs', async (t) => {
  const api = await apiServer(t, { namespaces: ['default', 'tenant', 'team-b'] });
  const burst = 5;
  const d = new DenialEvents({
    client: clientFor(api, 'portal'),
    logger: silentLogger(),
    identity: 'portal-0',
    // Refills far beyond the test: the tenant's calls are its burst, whatever it does.
    perNamespace: { burst, refillMs: 3_600_000 },
    aggregation: { perNamespace: 16 },
    retryMs: 20,
  });
  running(t, d);
  // The admission path: 6000 denials (5000 objects, and one object 1000 times) noted without one request or await.
  const before = await eventCalls(api, 'portal', 'tenant');
  for (let i = 0; i < 5000; i++) assert.equal(d.denied(denied('tenant', `pod-${i}`)), undefined);
  for (let i = 0; i < 1000; i++) d.denied(denied('tenant', 'hammer'));
  assert.equal(await eventCalls(api, 'portal', 'tenant'), before, 'nothing was sent while admission ran');
  d.denied(denied('team-b', 'web'));
  await until("team-b's Event", 10_000, async () => ((await events(api, 'team-b')).length === 1 ? true : undefined));
  await until('the tenant to have spent its burst', 10_000, async () => ((await eventCalls(api, 'portal', 'tenant')) === burst ? true : undefined));
  // More denials and passes later: still the burst.
  for (let i = 0; i < 1000; i++) d.denied(denied('tenant', 'hammer'));
  d.denied(denied('team-b', 'web'));
  await until("team-b's count to grow", 10_000, async () => ((await events(api, 'team-b'))[0]?.count === 2 ? true : undefined));
  assert.equal(await eventCalls(api, 'portal', 'tenant'), burst);
  assert.ok((await events(api, 'tenant')).length <= burst);
  const stats = d.stats();
  assert.ok(stats['held']! <= 16 + 1, `memory bounded: ${stats['held']} entries held`);
  assert.equal(stats['denied'], 7002);
});

/** `portal_denial_events_total` by outcome. */
async function outcomes(metrics: Counter<'outcome'>): Promise<Record<string, number>> {
  return Object.fromEntries((await metrics.get()).values.map((v) => [String(v.labels['outcome']), v.value]));
}

test('at shutdown the counts still pending are written: a namespace out of tokens loses none of its denials', async (t) => {
  const api = await apiServer(t, { namespaces: ['default', 'team-a', 'team-b'] });
  const metrics = denialEventMetrics(new Registry());
  // One write per namespace, then none for the rest of the test: every later count waits in memory.
  const d = new DenialEvents({ client: clientFor(api, 'portal'), logger: silentLogger(), identity: 'portal-0', perNamespace: { burst: 1, refillMs: 3_600_000 }, retryMs: 20, metrics });
  const stop = running(t, d);
  for (const ns of ['team-a', 'team-b']) d.denied(denied(ns, 'web'));
  await until('both Events created', 10_000, async () => ((await events(api, 'team-a')).length + (await events(api, 'team-b')).length === 2 ? true : undefined));
  for (let i = 0; i < 3; i++) for (const ns of ['team-a', 'team-b']) d.denied(denied(ns, 'web'));
  await until('a pass that found both namespaces out of tokens', 10_000, async () => (d.stats()['deferred']! >= 2 ? true : undefined));
  assert.deepEqual((await events(api, 'team-a')).map((e) => e.count), [1], 'pending before the shutdown');
  await stop();
  for (const ns of ['team-a', 'team-b']) assert.deepEqual((await events(api, ns)).map((e) => e.count), [4], `${ns}: every denial counted`);
  assert.deepEqual(await outcomes(metrics), { created: 2, patched: 2 });
});

test('the shutdown pass is bounded by its deadline and the write budget; what it could not write is counted as dropped', async (t) => {
  const api = await apiServer(t, { namespaces: ['default', 'team-a', 'team-b'] });
  const metrics = denialEventMetrics(new Registry());
  // Two writes, then one every 100 s: the shutdown pass gets no token before its 300 ms run out.
  const d = new DenialEvents({ client: clientFor(api, 'portal'), logger: silentLogger(), identity: 'portal-0', writes: { qps: 0.01, burst: 2 }, retryMs: 20, flushMs: 300, metrics });
  const stop = running(t, d);
  for (const ns of ['team-a', 'team-b']) d.denied(denied(ns, 'web'));
  await until('both Events created', 10_000, async () => ((await events(api, 'team-a')).length + (await events(api, 'team-b')).length === 2 ? true : undefined));
  for (const ns of ['team-a', 'team-b']) d.denied(denied(ns, 'web'));
  await stop();
  for (const ns of ['team-a', 'team-b']) assert.deepEqual((await events(api, ns)).map((e) => e.count), [1]);
  assert.deepEqual(await outcomes(metrics), { created: 2, dropped_shutdown: 2 });
});

test('denialFact: nothing for an answer that is not a denial, names no object or is a dry run', () => {
  assert.equal(denialFact({ ...denied('a', 'b'), decision: 'allow' }), undefined);
  assert.equal(denialFact({ ...denied('a', 'b'), request: undefined }), undefined);
  const dry = denied('a', 'b');
  dry.request!.dryRun = true;
  assert.equal(denialFact(dry), undefined, 'a dry run (the webhook declares no side effects)');
  assert.equal(denialFact(denied('a', 'b', { rules: ['x', 'y'], user: '' }))?.message, 'rules x, y denied CREATE');
});
