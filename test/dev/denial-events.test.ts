// Issue 33 item 3 on a real `portal dev` (its replica under the chart's RBAC
// for denials.events=true) with real kubectl: with --denial-events a denied
// create is one PortalDenied Event in the namespace, whose count grows on
// repeats; without it there is none. Hostile: a tenant denied thousands of
// times costs a bounded number of Event calls (counted by the API server),
// every one of its requests is still answered by Portal, and another
// namespace's creates and denial Event go through. A replica stopped with
// SIGTERM writes the Events still waiting for their namespace's tokens.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import * as k8s from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { sideApi } from '../support/side-api.ts';
import { until } from '../support/until.ts';
import { kubectl, startDevFor, type Dev, type DevState } from './support.ts';

const REPLICA_USER = 'system:serviceaccount:portal-system:portal-0';
/** The per-namespace Event bucket (src/audit/namespace-buckets.ts EVENT_BUCKETS). */
const BURST = 25;
const REFILL_MS = 10_000;

const RULE = {
  apiVersion: 'portal.dev/v1alpha1',
  kind: 'PortalClusterRule',
  metadata: { name: 'deny-privileged' },
  spec: {
    enforcement: 'Deny',
    match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] },
    validate: { message: 'privileged containers are not allowed', cel: { expressions: [{ expression: 'object.spec.containers.all(c, !c.?securityContext.?privileged.orValue(false))' }] } },
  },
};

const pod = (name: string, privileged: boolean): k8s.V1Pod => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name },
  spec: { containers: [{ name: 'app', image: 'nginx:1.27', securityContext: { privileged } }] },
});

interface Event {
  metadata: { name: string };
  involvedObject: { kind?: string; name?: string; namespace?: string; uid?: string };
  message?: string;
  count?: number;
}

async function startDenialDev(t: TestContext, extra: string[]): Promise<{ dev: Dev; state: DevState; stateDir: string }> {
  const dev = await startDevFor(t, {
    name: 'dev-denial-events',
    replicas: 1,
    policies: { 'rule.yaml': stringify(RULE) },
    flags: extra,
    // Each denial's log line is written at info.
    logLevel: 'info',
    outputTail: 20_000,
    readyMs: 120_000,
  });
  const { state } = dev;
  const stateDir = join(dev.dir, 'state');
  await until('the rule in force', 60_000, async () => ((await (await fetch(`${state.replicas[0]!.probes}/metrics`)).text()).match(/^portal_rules_loaded 1$/m) ? true : undefined));
  for (const ns of ['team-a', 'team-b', 'tenant']) assert.equal((await kubectl(state.kubeconfig, ['create', 'namespace', ns])).code, 0);
  return { dev, state, stateDir };
}

async function denialEvents(kc: string, namespace: string): Promise<Event[]> {
  const r = await kubectl(kc, ['get', 'events', '-n', namespace, '--field-selector', 'reason=PortalDenied', '-o', 'json']);
  assert.equal(r.code, 0, r.stderr);
  return (JSON.parse(r.stdout) as { items: Event[] }).items;
}

async function debugVars(state: DevState): Promise<Record<string, unknown>> {
  return (await (await fetch(`${state.replicas[0]!.probes}/debug/vars`)).json()) as Record<string, unknown>;
}

/** Creates and patches of Events in `namespace` by the replica, from the API server's own request log. */
async function eventCalls(kubeconfig: string, namespace: string): Promise<number> {
  const side = await sideApi(kubeconfig);
  const r = await side.request('GET', '/_portal/requests');
  const mine = (r.body as Record<string, Record<string, number>>)[REPLICA_USER] ?? {};
  // Past 1000 distinct paths the API server sums the rest under "other", which this count would miss.
  assert.equal(mine['other'], undefined, 'every request of the replica is counted by path');
  return Object.entries(mine)
    .filter(([req]) => /^(POST|PATCH) /.test(req) && req.split(' ')[1]!.startsWith(`/api/v1/namespaces/${namespace}/events`))
    .reduce((n, [, c]) => n + c, 0);
}

function apiClient(kubeconfig: string): k8s.CoreV1Api {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kubeconfig);
  return kc.makeApiClient(k8s.CoreV1Api);
}

const statusOf = (err: unknown): number => (err as { code?: number }).code ?? 0;

void test('--denial-events: a denied create is one PortalDenied Event whose count grows; a flood in one namespace stays bounded and others still get theirs', { timeout: 600_000 }, async (t) => {
  const { state } = await startDenialDev(t, ['--denial-events']);
  const kc = state.kubeconfig;
  const file = join(await mkdtemp(join(tmpdir(), 'portal-denial-pod-')), 'pod.yaml');
  t.after(() => rm(join(file, '..'), { recursive: true, force: true }));
  await writeFile(file, stringify(pod('web', true)));
  await writeFile(file.replace(/pod\.yaml$/, 'dry.yaml'), stringify(pod('dry', true)));

  const first = await kubectl(kc, ['apply', '-n', 'team-a', '-f', file]);
  assert.notEqual(first.code, 0);
  assert.match(first.stderr, /denied the request: deny-privileged/);
  const [event] = await until('the Event', 30_000, async () => {
    const es = await denialEvents(kc, 'team-a');
    return es.length > 0 ? es : undefined;
  });
  assert.deepEqual(event!.involvedObject, { apiVersion: 'v1', kind: 'Pod', name: 'web', namespace: 'team-a' });
  assert.match(event!.message!, /^rule deny-privileged denied CREATE by \S+$/);
  assert.equal(event!.count, 1);
  // A dry run is denied too, but writes nothing (the webhook declares no side effects).
  const dry = await kubectl(kc, ['apply', '--dry-run=server', '-n', 'team-a', '-f', file.replace(/pod\.yaml$/, 'dry.yaml')]);
  assert.match(dry.stderr, /denied the request: deny-privileged/);
  for (let i = 0; i < 3; i++) assert.notEqual((await kubectl(kc, ['apply', '-n', 'team-a', '-f', file])).code, 0);
  await until('count 4 on the one Event', 30_000, async () => ((await denialEvents(kc, 'team-a'))[0]?.count === 4 ? true : undefined));
  assert.deepEqual((await denialEvents(kc, 'team-a')).map((e) => e.involvedObject.name), ['web'], 'aggregated: one Event, none for the dry run');
  // The view docs/operations.md gives: kubectl's table.
  const table = await kubectl(kc, ['get', 'events', '-A', '--field-selector', 'reason=PortalDenied']);
  assert.match(table.stdout, /team-a .*Warning\s+PortalDenied\s+pod\/web\s+rule deny-privileged denied CREATE/);

  // Hostile: the tenant is denied 2000 times (1500 objects, one object 500 times), 16 at a time.
  const core = apiClient(kc);
  const started = Date.now();
  const before = await eventCalls(kc, 'tenant');
  const answers = new Map<string, number>();
  const names = [...Array.from({ length: 1500 }, (_, i) => `pod-${i}`), ...Array.from({ length: 500 }, () => 'hammer')];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < names.length) {
      const name = names[next++]!;
      const key = await core.createNamespacedPod({ namespace: 'tenant', body: pod(name, true) }).then(
        () => 'created',
        (err: unknown) => (statusOf(err) === 403 && /deny-privileged/.test(String((err as { body?: unknown }).body)) ? 'denied by the rule' : `HTTP ${statusOf(err)}: ${String((err as { body?: unknown }).body).slice(0, 200)}`),
      );
      answers.set(key, (answers.get(key) ?? 0) + 1);
    }
  };
  // Meanwhile team-b: 20 allowed creates and one denial.
  const teamB = (async () => {
    let created = 0;
    for (let i = 0; i < 20; i++) if (await core.createNamespacedPod({ namespace: 'team-b', body: pod(`ok-${i}`, false) }).then(() => true, () => false)) created++;
    const denied = await core.createNamespacedPod({ namespace: 'team-b', body: pod('bad', true) }).then(() => 0, (err: unknown) => statusOf(err));
    return { created, denied };
  })();
  await Promise.all([...Array.from({ length: 16 }, worker), teamB]);
  assert.deepEqual(Object.fromEntries(answers), { 'denied by the rule': 2000 }, 'every tenant request was answered by the rule');
  assert.deepEqual(await teamB, { created: 20, denied: 403 });
  const b = await until("team-b's denial Event", 60_000, async () => {
    const es = await denialEvents(kc, 'team-b');
    return es.length === 1 ? es[0] : undefined;
  });
  assert.equal(b!.involvedObject.name, 'bad');
  const calls = (await eventCalls(kc, 'tenant')) - before;
  const bound = BURST + Math.ceil((Date.now() - started) / REFILL_MS) + 1;
  assert.ok(calls >= 1 && calls <= bound, `tenant Event calls ${calls}, bound ${bound}`);
  const tenantEvents = await denialEvents(kc, 'tenant');
  assert.ok(tenantEvents.length <= calls, `${tenantEvents.length} Events`);
  const stats = (await debugVars(state))['denial_events'] as Record<string, number>;
  t.diagnostic(`tenant: 2000 denials → ${calls} Event calls (bound ${bound}), ${tenantEvents.length} Events; replica: ${JSON.stringify(stats)}`);
  assert.ok(stats['denied']! >= 2005, JSON.stringify(stats));
  assert.ok(stats['held']! <= 64 * 3, `memory bounded: ${JSON.stringify(stats)}`);

  // SIGTERM to the replica: the Events still waiting for their namespace's tokens are written in its last pass.
  assert.equal((await kubectl(kc, ['create', 'namespace', 'team-c'])).code, 0);
  const waiting = 40;
  const codes = await Promise.all(Array.from({ length: waiting }, (_, i) => core.createNamespacedPod({ namespace: 'team-c', body: pod(`c-${i}`, true) }).then(() => 0, (err: unknown) => statusOf(err))));
  assert.deepEqual([...new Set(codes)], [403]);
  // The namespace's burst is written at once; the rest waits (a token every 10 s).
  const burst = await until("team-c's burst of Events", 60_000, async () => {
    const n = (await denialEvents(kc, 'team-c')).length;
    return n >= BURST ? n : undefined;
  });
  assert.ok(burst < waiting, `${burst} of ${waiting} Events written before the SIGTERM: the rest wait for tokens`);
  process.kill(state.replicas[0]!.pid!, 'SIGTERM');
  // More than one token's worth (a refill could add one): only the shutdown pass writes them.
  const after = await until('the waiting Events written at shutdown', 60_000, async () => {
    const n = (await denialEvents(kc, 'team-c')).length;
    return n >= burst + 2 ? n : undefined;
  });
  t.diagnostic(`team-c: ${burst} Events before the replica's SIGTERM, ${after} after`);
});

void test('without --denial-events a denial writes no Event (the log line still says it)', { timeout: 300_000 }, async (t) => {
  const { state, stateDir } = await startDenialDev(t, []);
  const kc = state.kubeconfig;
  const core = apiClient(kc);
  assert.equal(await core.createNamespacedPod({ namespace: 'team-a', body: pod('web', true) }).then(() => 0, (err: unknown) => statusOf(err)), 403);
  // The denial was handled by the replica: its log line is written where the Event would have been noted.
  await until('the denial log line', 30_000, async () => ((await readFile(join(stateDir, 'logs', 'portal-0.log'), 'utf8')).includes('"msg":"admission request denied"') ? true : undefined));
  assert.equal((await debugVars(state))['denial_events'], undefined, 'no denial Event writer runs');
  assert.deepEqual(await denialEvents(kc, 'team-a'), []);
  assert.equal(await eventCalls(kc, 'team-a'), 0);
});
