// Issue 31 item 2 (and Acceptance), end to end on `portal dev` with two
// replicas: alice (tenant-a) floods with dry-run creates of a heavy Pod
// under her own slow Deny rule, four at a time, while bob creates Pods in
// tenant-b at ~10/s through @kubernetes/client-node. Before fair queuing,
// 81-93% of bob's creates were denied ("evaluation time budget (2000 ms) ran
// out before this rule ran"). Now: bob >= 99% successful with p99 <= 1 s,
// alice gets denials naming her rule or the overload of her namespace, both
// replicas stay ready (/readyz 200) and neither restarts.
//
// The attacker's cost is a CEL rule well inside its cost budget (~350k of
// the 1M units per expression) on a legal 340 KB Pod whose one arg holds
// 40,000 words: accepted at apply however the apply-time bounds on JSON
// Schema tighten, and ~100s of ms of a worker per request. (One long string
// rather than 40,000 args: the embedded API server's own work on a list that
// long, not Portal's, would then dominate everyone's latency.)
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import * as k8s from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { sideApi } from '../support/side-api.ts';
import { until } from '../support/until.ts';
import { apiMessage, percentile, victim, type VictimResult } from '../support/victim.ts';
import { kubectl, readState, withDev, type DevState } from '../dev/support.ts';

const ATTACK_MS = 30_000;
const BOB_INTERVAL_MS = 100;
const ALICE_CONCURRENCY = 4;
const WORDS = 40_000;

const RULE = {
  apiVersion: 'portal.dev/v1alpha1',
  kind: 'PortalRule',
  metadata: { name: 'args-format', namespace: 'tenant-a' },
  spec: {
    enforcement: 'Deny',
    match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] },
    validate: {
      message: 'every word of every arg must be a DNS name',
      cel: { expressions: [{ expression: "object.spec.containers.all(c, !has(c.args) || c.args.all(a, a.split(' ').all(w, w.matches('^([a-z0-9]+[-.])*[a-z0-9]+$'))))" }] },
    },
  },
};

const RBAC = [
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'tenant-a' } },
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'tenant-b' } },
  { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'pod-writer' }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['create', 'get', 'list', 'delete'] }] },
  { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'alice', namespace: 'tenant-a' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'pod-writer' }, subjects: [{ kind: 'User', name: 'alice' }] },
  { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'bob', namespace: 'tenant-b' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'pod-writer' }, subjects: [{ kind: 'User', name: 'bob' }] },
];

/** Alice's Pod: legal (340 KB, far under the API server's 3 MiB); its last word breaks her own rule after the rule walked all the others. */
function heavyPod(): k8s.V1Pod {
  const words = Array.from({ length: WORDS }, (_, i) => `w${i}.example`);
  words.push('NOT-A-NAME!');
  return { metadata: { name: 'flood', namespace: 'tenant-a' }, spec: { containers: [{ name: 'app', image: 'nginx:1.27', args: [words.join(' ')] }] } };
}

/** The admin kubeconfig with `user`'s token instead. */
async function userConfig(kubeconfig: string, user: string): Promise<k8s.CoreV1Api> {
  const side = await sideApi(kubeconfig);
  const created = await side.request('POST', '/_portal/users', { name: user });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const kc = new k8s.KubeConfig();
  kc.loadFromString(await readFile(kubeconfig, 'utf8'));
  const current = kc.getCurrentUser();
  assert.ok(current);
  const users = kc.users.map((u) => (u.name === current.name ? { ...u, token: (created.body as { token: string }).token } : u));
  kc.loadFromOptions({ clusters: kc.clusters, users, contexts: kc.contexts, currentContext: kc.currentContext });
  return kc.makeApiClient(k8s.CoreV1Api);
}

/** Both replicas' duration histograms of one decision (`allow`: bob's; alice's are all denied), summed: count per `le`, and the sum. */
async function histogram(state: DevState, decision: string): Promise<{ buckets: Map<string, number>; sum: number }> {
  const buckets = new Map<string, number>();
  let sum = 0;
  for (const r of state.replicas) {
    for (const line of (await (await fetch(`${r.probes}/metrics`)).text()).split('\n')) {
      const b = /^portal_admission_request_duration_seconds_bucket\{(.*)\} (\S+)$/.exec(line);
      const le = b ? /le="([^"]+)"/.exec(b[1]!)?.[1] : undefined;
      if (b && le !== undefined && b[1]!.includes(`decision="${decision}"`)) buckets.set(le, (buckets.get(le) ?? 0) + Number(b[2]));
      const m = /^portal_admission_request_duration_seconds_sum\{decision="([^"]+)"\} (\S+)$/.exec(line);
      if (m?.[1] === decision) sum += Number(m[2]);
    }
  }
  return { buckets, sum };
}

/** Portal's own time between two readings of a histogram: the mean, and the bucket bound under which 99% fell (seconds). */
function portalTime(before: Awaited<ReturnType<typeof histogram>>, after: Awaited<ReturnType<typeof histogram>>): { count: number; meanMs: number; p99AtMostS: number } {
  const count = (after.buckets.get('+Inf') ?? 0) - (before.buckets.get('+Inf') ?? 0);
  const bounds = [...after.buckets.keys()].filter((le) => le !== '+Inf').sort((a, b) => Number(a) - Number(b));
  const p99 = bounds.find((le) => (after.buckets.get(le) ?? 0) - (before.buckets.get(le) ?? 0) >= count * 0.99);
  return { count, meanMs: ((after.sum - before.sum) / Math.max(1, count)) * 1000, p99AtMostS: p99 === undefined ? Number.POSITIVE_INFINITY : Number(p99) };
}

/** Bob's creates in tenant-b at ~10/s for `ms`. */
function bobCreates(bob: k8s.CoreV1Api, prefix: string, ms: number): Promise<VictimResult> {
  const pod = (name: string): k8s.V1Pod => ({ metadata: { name }, spec: { containers: [{ name: 'app', image: 'nginx:1.27' }] } });
  return victim(bob, { namespace: 'tenant-b', pod, rate: 1000 / BOB_INTERVAL_MS, seconds: ms / 1000, prefix }).done;
}

function summary(latencies: number[]): string {
  const s = [...latencies].sort((a, b) => a - b);
  return `p50 ${Math.round(s[s.length >> 1] ?? 0)} p99 ${Math.round(percentile(latencies, 99) || 0)} max ${Math.round(s.at(-1) ?? 0)} ms`;
}

/** Polls every replica's /readyz until `stop`; returns the answers that were not 200. */
async function watchReadiness(state: DevState, stop: { done: boolean }): Promise<string[]> {
  const bad: string[] = [];
  while (!stop.done) {
    for (const r of state.replicas) {
      const res = await fetch(`${r.probes}/readyz`).catch((e: unknown) => ({ status: 0, text: () => Promise.resolve(String(e)) }));
      if (res.status !== 200) bad.push(`${r.name}: ${res.status} ${await res.text()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return bad;
}

void test("portal dev: one namespace's flood under its own slow rule leaves another namespace's creates answered, and every replica ready", { timeout: 600_000 }, async () => {
  const policies = async (dir: string): Promise<string> => {
    await mkdir(join(dir, 'policies'));
    // dev installs at least one rule; this one matches no Pod.
    await writeFile(
      join(dir, 'policies', 'configmaps.yaml'),
      stringify({ apiVersion: 'portal.dev/v1alpha1', kind: 'PortalClusterRule', metadata: { name: 'small-configmaps' }, spec: { match: { kinds: [{ apiGroups: [''], kinds: ['ConfigMap'] }] }, validate: { message: 'at most 100 keys', schema: { properties: { data: { maxProperties: 100 } } } } } }),
    );
    return join(dir, 'policies');
  };
  const options = { name: 'fair-shares', replicas: 2, policies, logLevel: 'error', flags: ['--audit-interval', '1h'], readyMs: 120_000, outputTail: 20_000 };
  await withDev(options, async (dev) => {
    const { state } = dev;
    const kc = state.kubeconfig;
    const applied = await kubectl(kc, ['apply', '-f', '-'], [...RBAC, RULE].map((o) => stringify(o)).join('---\n'));
    assert.equal(applied.code, 0, applied.stderr);
    const alice = await userConfig(kc, 'alice');
    const bob = await userConfig(kc, 'bob');
    const pod = heavyPod();
    const aliceTry = (): Promise<string> =>
      alice.createNamespacedPod({ namespace: 'tenant-a', body: pod, dryRun: 'All' }).then(
        () => 'admitted',
        (err: unknown) => apiMessage(err),
      );
    // Both replicas hold the rule (the API server alternates between them).
    await until('both replicas deny by the rule', 120_000, async () => {
      const answers = await Promise.all([aliceTry(), aliceTry(), aliceTry(), aliceTry()]);
      return answers.every((m) => m.includes('args-format')) ? true : undefined;
    });
    const pids = state.replicas.map((r) => r.pid);

    // Bob alone first: what the machine gives him without the flood (reported beside the figures under attack).
    const alone = await bobCreates(bob, 'alone', 5_000);
    const aliceStarted = performance.now();
    await aliceTry();
    const aliceAlone = performance.now() - aliceStarted;
    const allowBefore = await histogram(state, 'allow');
    const denyBefore = await histogram(state, 'deny');

    const stop = { done: false };
    const readiness = watchReadiness(state, stop);
    const aliceAnswers: string[] = [];
    const flood = Array.from({ length: ALICE_CONCURRENCY }, async () => {
      while (!stop.done) aliceAnswers.push(await aliceTry());
    });
    const { ok: bobOk, failed: bobFailures, latenciesMs: bobLatencies } = await bobCreates(bob, 'web', ATTACK_MS);
    stop.done = true;
    await Promise.all(flood);
    const notReady = await readiness;
    const bobInPortal = portalTime(allowBefore, await histogram(state, 'allow'));
    const aliceInPortal = portalTime(denyBefore, await histogram(state, 'deny'));

    const total = bobOk + bobFailures.length;
    const report = `bob: ${bobOk}/${total} created, ${summary(bobLatencies)} (alone: ${summary(alone.latenciesMs)}; in Portal under attack: mean ${Math.round(bobInPortal.meanMs)} ms, p99 <= ${bobInPortal.p99AtMostS * 1000} ms), failures: ${bobFailures.slice(0, 5).join(' | ')}; alice: ${aliceAnswers.length} answers (alone ${Math.round(aliceAlone)} ms; in Portal under attack: mean ${Math.round(aliceInPortal.meanMs)} ms)`;
    // Visible in the test's output whether it passes or not: what bob saw end to end, and what of it was Portal's.
    console.log(`fair shares: ${report}`);
    assert.ok(total >= 200, report);
    assert.ok(bobOk >= total * 0.99, report);
    // Portal's own share of bob's time (its histogram): the embedded API server is one JavaScript thread that
    // also parses and validates every one of alice's 340 KB Pods, so on a loaded machine the end-to-end figures
    // (reported above) measure it and the machine as much as Portal; the real kube-apiserver does that work on
    // many cores and behind its own Priority and Fairness.
    assert.ok(bobInPortal.count >= bobOk, report);
    assert.ok(bobInPortal.p99AtMostS <= 1, report);
    // Alice's own requests: denied by her rule, or refused as her namespace's overload; never admitted.
    assert.ok(aliceAnswers.length >= ALICE_CONCURRENCY, report);
    for (const m of aliceAnswers) {
      assert.ok(/denied the request: tenant-a\/args-format: every word of every arg must be a DNS name/.test(m) || /portal is overloaded: .*namespace tenant-a.*This is overload, not a policy verdict/.test(m), `alice got: ${m.slice(0, 300)}`);
    }
    assert.deepEqual(notReady, [], 'every replica stayed ready');
    const after = await readState(dev.stateFile);
    assert.deepEqual(after?.replicas.map((r) => r.pid), pids, 'no replica restarted');

    await dev.stop();
  });
});
