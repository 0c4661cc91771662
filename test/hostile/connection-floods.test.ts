// Issue 31, items 3 and 4, end to end: unauthenticated clients on the
// webhook and probes ports of real `portal dev` replicas, while a victim
// creates Pods through the embedded API server at 10/s.
//
// Measured before (issue 31): 200 TLS connections per replica from each of
// three other addresses trickling a 100,000-byte body failed 76% of the
// victim's creates; slow headers 8.5%; 200 concurrent 400 KB reviews per
// replica 75%, and turned a replica not-ready. 80 slow `POST /metrics` per
// replica failed 19 of 19 /healthz and /readyz polls.
//
// Later (CI, session 13's code): 136 of 200 creates timed out. Every webhook
// call of the dev API server made a new TLS connection (a per-request
// checkServerIdentity kept Node's agent from pooling), and each waited in the
// replica's accept queue behind the attackers' reconnections: libuv accepts
// one connection per listening socket per event-loop turn. Fixed by pooling
// as kube-apiserver does and by 8 accepting sockets (acceptors.ts): 200 of
// 200, p99 0.6 s.
//
// The attackers come from other loopback addresses (127.0.0.2 ...): each
// is a distinct peer; the API server connects from 127.0.0.1.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import * as k8s from '@kubernetes/client-node';
import { fileURLToPath } from 'node:url';
import { alive, readState, startDevFor } from '../dev/support.ts';
import { compliantPod, coreApi, percentile, victim } from '../support/victim.ts';
import { attack, peakRss, type AttackPlan } from './floods.ts';
import { metricValue } from '../support/exposition.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
/** `portal dev` with two replicas and the shipped policies; the last 20 kB of its output kept (the floods' warnings). */
const DEV = { name: 'floods', replicas: 2, policies: join(root, 'policies'), outputTail: 20_000 };

const VICTIM_NS = 'tenant-b';
const RATE = 10;
const SECONDS = 20;
const GIB = 1024 ** 3;

/** Passes the shipped policies (as test/dev/dev.test.ts's compliant Pod). */

async function createNamespace(kubeconfig: string, name: string): Promise<void> {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kubeconfig);
  await kc.makeApiClient(k8s.CoreV1Api).createNamespace({ body: { metadata: { name } } });
}

async function metrics(probes: string): Promise<string> {
  return (await fetch(`${probes}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
}

test('webhook port: slow bodies, slow headers and 200 × 400 KB reviews per replica from other addresses; the victim\'s creates through the API server still succeed', { timeout: 180_000 }, async (t) => {
  const { stateFile, state } = await startDevFor(t, DEV);
  await createNamespace(state.kubeconfig, VICTIM_NS);
  const pids = state.replicas.map((r) => r.pid as number);

  const plan: AttackPlan = { slow: [], floods: [] };
  for (const r of state.replicas) {
    const port = Number(new URL(r.webhook).port);
    plan.slow.push({ port, peer: '127.0.0.2', count: 200, tls: true, head: 'POST /validate HTTP/1.1\r\nHost: portal\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n', drip: '{', everyMs: 3_000 });
    plan.slow.push({ port, peer: '127.0.0.3', count: 200, tls: true, head: 'POST /validate HTTP/1.1\r\n', drip: 'X-Slow: a\r\n', everyMs: 3_000 });
    plan.floods.push({ url: r.webhook, peer: '127.0.0.4', concurrency: 200, bytes: 400 * 1024, namespace: VICTIM_NS });
  }
  const attacker = await attack(t, plan);
  const result = await victim(await coreApi(state.kubeconfig), { namespace: VICTIM_NS, pod: (name) => compliantPod(name, VICTIM_NS), rate: RATE, seconds: SECONDS }).done;
  const texts = await Promise.all(state.replicas.map((r) => metrics(r.probes)));
  const report = await attacker.stop();

  const p99 = percentile(result.latenciesMs, 99);
  t.diagnostic(`victim: ${result.ok} of ${RATE * SECONDS} created, p50 ${percentile(result.latenciesMs, 50).toFixed(0)} ms, p99 ${p99.toFixed(0)} ms`);
  for (const f of result.failed.slice(0, 3)) t.diagnostic(`failed: ${f}`);
  t.diagnostic(`flood answers per replica (by HTTP status): ${JSON.stringify(report.floodAnswers)}; slow connections opened: ${report.slowOpened.join(', ')}`);
  for (const [i, text] of texts.entries()) {
    const waiting = metricValue(text, 'portal_webhook_requests_waiting');
    const closed = ['slow_body', 'cap_unfinished_closed', 'cap_idle_closed', 'cap_all_busy', 'cap_newcomer_refused', 'peer_limit'].map((reason) => `${reason}=${metricValue(text, `portal_webhook_connections_closed_total{reason="${reason}"}`) ?? 0}`);
    t.diagnostic(`portal-${i}: ${closed.join(' ')}, waiting ${waiting}, peak RSS ${((await peakRss(pids[i] as number)) / 2 ** 20).toFixed(0)} MiB`);
  }

  assert.ok(result.ok >= 0.99 * RATE * SECONDS, `${result.failed.length} of ${RATE * SECONDS} creates failed:\n${result.failed.slice(0, 5).join('\n')}`);
  // The p99 is reported, not asserted (house rule: no timing assertion that depends on the machine's load): on the
  // shared 2-vCPU machine this was written on (load average ~30), the embedded API server alone took seconds per create.
  // The attack landed: each replica's guard closed connections (the cap was reached, or bodies were too slow).
  for (const text of texts) {
    const closed = ['slow_body', 'cap_unfinished_closed', 'cap_idle_closed'].reduce((n, reason) => n + (metricValue(text, `portal_webhook_connections_closed_total{reason="${reason}"}`) ?? 0), 0);
    assert.ok(closed > 0, 'the guard closed some of the attacker\'s connections');
  }
  // No replica restarted, and none grew past 2 GiB.
  const after = await readState(stateFile);
  assert.deepEqual(after?.replicas.map((r) => r.pid), pids, 'no replica restarted');
  for (const pid of pids) {
    assert.ok(alive(pid));
    assert.ok((await peakRss(pid)) <= 2 * GIB, `peak RSS ${await peakRss(pid)} bytes`);
  }
  // Overload is not an internal error: nothing counted against /readyz.
  for (const text of texts) assert.equal(metricValue(text, 'portal_admission_errors_total{reason="internal"}') ?? 0, 0);
});

test('probes port: 80 slow POST /metrics and 80 slow-header connections per replica from other addresses; every /healthz and /readyz poll is answered 200', { timeout: 120_000 }, async (t) => {
  const { state } = await startDevFor(t, DEV);
  const plan: AttackPlan = { slow: [], floods: [] };
  for (const r of state.replicas) {
    const port = Number(new URL(r.probes).port);
    // 5 addresses × 16 (the per-peer share) each way: together past the port's cap of 64.
    for (let i = 0; i < 5; i++) {
      plan.slow.push({ port, peer: `127.0.0.${10 + i}`, count: 16, tls: false, head: 'POST /metrics HTTP/1.1\r\nHost: portal\r\nContent-Length: 100000\r\n\r\n', drip: 'x', everyMs: 3_000 });
      plan.slow.push({ port, peer: `127.0.0.${20 + i}`, count: 16, tls: false, head: 'GET /metrics HTTP/1.1\r\n', drip: 'X-Slow: a\r\n', everyMs: 3_000 });
    }
  }
  const attacker = await attack(t, plan);

  // The kubelet's probes: a new connection each, 1 s timeout (timeoutSeconds' default), 20 rounds a second apart.
  const failures: string[] = [];
  for (let round = 0; round < 20; round++) {
    const started = performance.now();
    for (const r of state.replicas) {
      for (const path of ['/healthz', '/readyz']) {
        try {
          const res = await fetch(`${r.probes}${path}`, { signal: AbortSignal.timeout(1_000), headers: { connection: 'close' } });
          if (res.status !== 200) failures.push(`${r.name}${path}: ${res.status} ${await res.text()}`);
        } catch (err) {
          failures.push(`${r.name}${path}: ${(err as Error).message}`);
        }
      }
    }
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 1_000 - (performance.now() - started))));
  }
  const report = await attacker.stop();
  t.diagnostic(`slow connections opened: ${report.slowOpened.reduce((n, x) => n + x, 0)}`);
  assert.deepEqual(failures, [], `${failures.length} of 80 polls failed`);
});
