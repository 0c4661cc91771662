/**
 * Load-generator processes of bench/apiserver.ts (kept out of the server's
 * and the orchestrator's event loops):
 *
 *   writer URL TOKEN MODE N RATE  — MODE create|paced|closed. Writes go over a
 *     keep-alive agent with enough sockets for the rate. `paced` is open loop:
 *     write i is due at start + i/RATE, whatever happened to earlier ones,
 *     and carries its *send* wall-clock time in the annotation bench/sent.
 *   watchers URL TOKEN N — opens N watches on the configmaps of `default`
 *     from the current resourceVersion and records, per received event, now
 *     minus its bench/sent stamp (the delivery latency a controller sees).
 *     Prints its figures when it gets SIGTERM.
 *
 * Each prints one JSON line with its figures on stdout.
 */
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';

const [mode, url, token, ...args] = process.argv.slice(2);
if (!mode || !url || !token) throw new Error('usage: apiserver-load.ts writer|watchers URL TOKEN ...');
const base = new URL(url);
const CM = '/api/v1/namespaces/default/configmaps';
/** 64 sockets: at 2,000 writes/s and ~10 ms per write ~20 are busy; headroom for stalls. */
const agent = new Agent({ keepAlive: true, maxSockets: 64 });
const wallNow = (): number => performance.timeOrigin + performance.now();

function send(method: string, path: string, body: string, contentType: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: base.hostname, port: base.port, method, path, agent, headers: {
      Authorization: `Bearer ${token}`, 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

const write = (i: number, kind: string): Promise<number> => {
  const stamp = String(wallNow());
  if (kind === 'create') {
    return send('POST', CM, JSON.stringify({ metadata: { name: `cm-${i}`, annotations: { 'bench/sent': stamp } }, data: { k: 'v' } }), 'application/json');
  }
  return send('PATCH', `${CM}/cm-${i % 10_000}`, JSON.stringify({ metadata: { annotations: { 'bench/sent': stamp } } }), 'application/merge-patch+json');
};

function quantiles(xs: number[]): { p50Ms: number; p99Ms: number; maxMs: number } {
  xs.sort((a, b) => a - b);
  const q = (p: number): number => Number((xs[Math.min(xs.length - 1, Math.floor(p * xs.length))] ?? NaN).toFixed(2));
  return { p50Ms: q(0.5), p99Ms: q(0.99), maxMs: Number((xs[xs.length - 1] ?? NaN).toFixed(2)) };
}

if (mode === 'writer') {
  const [kind = 'paced', nArg = '1000', rateArg = '500'] = args;
  const n = Number(nArg);
  const rate = Number(rateArg);
  const lat: number[] = [];
  let errors = 0;
  const t0 = performance.now();
  const done = (due: number) => (code: number): void => {
    if (code >= 200 && code < 300) lat.push(performance.now() - due);
    else errors++;
  };
  if (kind === 'paced') {
    const inflight: Promise<void>[] = [];
    let i = 0;
    await new Promise<void>((resolve) => {
      const tick = (): void => {
        const now = performance.now();
        // Catch up on every write due since the last tick; each keeps its due time for the response latency.
        while (i < n && t0 + (i * 1000) / rate <= now) {
          const due = t0 + (i * 1000) / rate;
          inflight.push(write(i++, kind).then(done(due)));
        }
        if (i >= n) resolve();
        else setTimeout(tick, 1);
      };
      tick();
    });
    await Promise.all(inflight);
  } else {
    // Closed loop with 32 writers: the maximum sustained rate.
    let next = 0;
    await Promise.all(Array.from({ length: 32 }, async () => {
      while (next < n) {
        const i = next++;
        const start = performance.now();
        done(start)(await write(i, kind));
      }
    }));
  }
  const seconds = (performance.now() - t0) / 1000;
  process.stdout.write(`${JSON.stringify({ writes: n, errors, seconds: Number(seconds.toFixed(2)), writesPerSec: Math.round(lat.length / seconds), response: quantiles(lat) })}\n`);
  agent.destroy();
} else if (mode === 'watchers') {
  const count = Number(args[0] ?? '10');
  const lat: number[] = [];
  const perWatcher = new Array<number>(count).fill(0);
  let connected = 0;
  for (let w = 0; w < count; w++) {
    request({ host: base.hostname, port: base.port, path: `${CM}?watch=true&resourceVersion=${args[1] ?? '0'}`, headers: { Authorization: `Bearer ${token}` } }, (res) => {
      if (++connected === count) process.stdout.write('ready\n');
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        const now = wallNow();
        buf += chunk;
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          const ev = JSON.parse(line) as { object?: { metadata?: { annotations?: Record<string, string> } } };
          const sent = Number(ev.object?.metadata?.annotations?.['bench/sent'] ?? NaN);
          if (!Number.isNaN(sent)) {
            lat.push(now - sent);
            perWatcher[w]!++;
          }
        }
      });
    }).on('error', () => undefined).end();
  }
  process.on('SIGTERM', () => {
    process.stdout.write(`${JSON.stringify({ watchers: count, events: lat.length, minPerWatcher: Math.min(...perWatcher), delivery: quantiles(lat) })}\n`);
    process.exit(0);
  });
} else throw new Error(`unknown mode ${mode}`);
