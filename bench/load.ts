/**
 * A small HTTPS load generator (node:https, keep-alive Agent): closed loop
 * (N connections, each sends the next request when the previous answered:
 * max throughput) and open loop (a fixed request rate; latency is measured
 * from the *scheduled* send time, so queueing is not hidden — no coordinated
 * omission).
 */
import { Agent, request } from 'node:https';

export interface Target {
  port: number;
  ca: Buffer;
  body: Buffer;
  /** Checks a response body; false counts as an error. */
  check: (body: string) => boolean;
}

export interface LoadResult {
  requests: number;
  errors: number;
  seconds: number;
  rps: number;
  p50ms: number;
  p99ms: number;
  maxms: number;
}

function send(agent: Agent, t: Target): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(
      { host: '127.0.0.1', servername: 'localhost', port: t.port, path: '/validate', method: 'POST', agent, ca: t.ca, headers: { 'content-type': 'application/json', 'content-length': t.body.length } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(res.statusCode === 200 && t.check(Buffer.concat(chunks).toString())));
        res.on('error', () => resolve(false));
      },
    );
    req.on('error', () => resolve(false));
    req.end(t.body);
  });
}

function summarize(latencies: number[], errors: number, seconds: number): LoadResult {
  latencies.sort((a, b) => a - b);
  const q = (p: number): number => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;
  const round = (n: number): number => Math.round(n * 1000) / 1000;
  return {
    requests: latencies.length,
    errors,
    seconds: round(seconds),
    rps: Math.round(latencies.length / seconds),
    p50ms: round(q(0.5)),
    p99ms: round(q(0.99)),
    maxms: round(latencies[latencies.length - 1] ?? NaN),
  };
}

export async function closedLoop(t: Target, connections: number, durationMs: number): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const latencies: number[] = [];
  let errors = 0;
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        if (await send(agent, t)) latencies.push(performance.now() - t0);
        else errors++;
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  agent.destroy();
  return summarize(latencies, errors, seconds);
}

export async function openLoop(t: Target, connections: number, ratePerSecond: number, durationMs: number): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const latencies: number[] = [];
  let errors = 0;
  const interval = 1000 / ratePerSecond;
  const total = Math.round((durationMs / 1000) * ratePerSecond);
  const start = performance.now();
  const inflight: Promise<void>[] = [];
  let sent = 0;
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const now = performance.now();
      while (sent < total && start + sent * interval <= now) {
        const scheduled = start + sent * interval;
        sent++;
        inflight.push(
          send(agent, t).then((ok) => {
            if (ok) latencies.push(performance.now() - scheduled);
            else errors++;
          }),
        );
      }
      if (sent >= total) resolve();
      // 1 ms timers with catch-up: a busy loop would steal a core from the servers.
      else setTimeout(tick, 1);
    };
    tick();
  });
  await Promise.all(inflight);
  const seconds = (performance.now() - start) / 1000;
  agent.destroy();
  return summarize(latencies, errors, seconds);
}
