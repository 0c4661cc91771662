/**
 * Embedded API server scale check: 10,000 objects, 10 watchers, p99 watch
 * delivery latency at a paced 500 writes/s, and the sustained write rate
 * with 32 concurrent writers. Run: node --import tsx bench/apiserver.ts
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const OBJECTS = 10_000;
const WATCHERS = 10;
const PACED_RATE = 500;
const PACED_SECONDS = 4;
const CONCURRENCY = 32;

// The server runs in its own process so the load generator does not share its event loop.
const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./apiserver-child.ts', import.meta.url))], { stdio: ['ignore', 'pipe', 'inherit'] });
const [line] = (await once(child.stdout, 'data')) as [Buffer];
const { url, token } = JSON.parse(line.toString()) as { url: string; token: string };
const api = { url, close: async () => { child.kill('SIGTERM'); await once(child, 'exit'); } };
const H = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' };
const CM = `${api.url}/api/v1/namespaces/default/configmaps`;
const put = (i: number, stamp: number): Promise<Response> =>
  fetch(`${CM}/cm-${i}`, { method: 'PATCH', headers: { ...H, 'Content-Type': 'application/merge-patch+json' }, body: JSON.stringify({ data: { t: String(stamp) } }) });

async function pool(n: number, work: (i: number) => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < n) await work(next++);
  }));
  return n / ((performance.now() - t0) / 1000);
}

const createRate = await pool(OBJECTS, async (i) => (await fetch(CM, { method: 'POST', headers: H, body: JSON.stringify({ metadata: { name: `cm-${i}` }, data: { t: '0' } }) })).text());

const latencies: number[] = [];
const controllers: AbortController[] = [];
const rv = ((await (await fetch(`${CM}?limit=1`, { headers: H })).json()) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
for (let w = 0; w < WATCHERS; w++) {
  const ac = new AbortController();
  controllers.push(ac);
  const res = await fetch(`${CM}?watch=true&resourceVersion=${rv}`, { headers: H, signal: ac.signal });
  void (async () => {
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let buf = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += dec.decode(value, { stream: true });
        let i: number;
        while ((i = buf.indexOf('\n')) >= 0) {
          const ev = JSON.parse(buf.slice(0, i)) as { object: { data?: { t?: string } } };
          buf = buf.slice(i + 1);
          const t = Number(ev.object.data?.t ?? 0);
          if (t > 0) latencies.push(performance.timeOrigin + performance.now() - t);
        }
      }
    } catch { /* aborted */ }
  })();
}

// Paced phase: one write every 2 ms (500/s), each stamped with its send time.
const total = PACED_RATE * PACED_SECONDS;
const start = performance.now();
const inflight: Promise<unknown>[] = [];
for (let i = 0; i < total; i++) {
  const due = start + (i * 1000) / PACED_RATE;
  const wait = due - performance.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  inflight.push(put(i % OBJECTS, performance.timeOrigin + performance.now()).then((r) => r.text()));
}
await Promise.all(inflight);
const pacedAchieved = total / ((performance.now() - start) / 1000);
await new Promise((r) => setTimeout(r, 200));
const delivered = latencies.length;
latencies.sort((a, b) => a - b);
const pct = (p: number): number => Number((latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? NaN).toFixed(2));
const paced = { writes: total, achievedWritesPerSec: Math.round(pacedAchieved), eventsDelivered: delivered, expectedEvents: total * WATCHERS, p50Ms: pct(50), p99Ms: pct(99), maxMs: pct(100) };

latencies.length = 0;
const sustained = await pool(10_000, async (i) => (await put(i % OBJECTS, 0)).text());
for (const c of controllers) c.abort();
await api.close();
console.log(JSON.stringify({ objects: OBJECTS, watchers: WATCHERS, createsPerSec: Math.round(createRate), paced500: paced, sustainedWritesPerSecWith10Watchers: Math.round(sustained), concurrency: CONCURRENCY }, null, 2));
