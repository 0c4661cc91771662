/**
 * Denial Events on the admission path (issue 33 item 3): the main-thread CPU
 * a denied request costs with `--denial-events` (DenialEvents.denied: build
 * the Event's key and message, count it in memory) on top of what it costs
 * without (the denial's log line, DenialLog as the replica configures it),
 * measured in the same run. The Events themselves are written later by the
 * replica's writer, off the request: not measured here.
 *
 * Two cases: the same object denied again and again (aggregation: one
 * counter), and a different object each time (a new entry, evicting the
 * namespace's oldest at its cap of 64). And the memory held after 200,000
 * distinct denials over 200 namespaces (bounded by 4,096 entries).
 *
 * Rounds alternate the sides; each takes the best of 10 batches of process
 * CPU per call; the figure is the median over rounds.
 *
 * Run: node --expose-gc --import tsx bench/denial-events.ts [--rounds 9]
 */
import { cpus, loadavg } from 'node:os';
import { pino } from 'pino';
import { Counter, Registry } from 'prom-client';
import { DenialLog } from '../src/admission/denial-log.ts';
import { DenialEvents } from '../src/audit/denial-events.ts';
import { TokenBucket } from '../src/kube/rate-limiter.ts';
import { silentLogger } from '../src/observability/logger.ts';
import type { Outcome } from '../src/policy/review/answer.ts';
import { cpuMicrosPerCall } from './cpu-time.ts';

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const ROUNDS = arg('rounds', 9);

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const outcome = (namespace: string, name: string): Outcome => ({
  httpStatus: 200,
  apiVersion: 'admission.k8s.io/v1',
  decision: 'deny',
  response: { uid: '6a1f0c1e-0000-4000-8000-000000000000', allowed: false, status: { code: 403, message: 'denied' } },
  request: { uid: '6a1f0c1e-0000-4000-8000-000000000000', operation: 'CREATE', kind: { group: '', version: 'v1', kind: 'Pod' }, namespace, name, user: 'system:serviceaccount:team-a:deployer' },
  deniedBy: ['disallow-privileged-containers'],
});

/** The replica's denial log line (manager/replica.ts: 20 a second, bursts of 100) to /dev/null. */
function denialLog(): DenialLog {
  const log = pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: true }));
  const notLogged = new Counter({ name: 'x_not_logged_total', help: 'x', registers: [new Registry()] });
  return new DenialLog({ log, pacer: new TokenBucket({ qps: 20, burst: 100 }), notLogged });
}

function main(): void {
  const lines = denialLog();
  // A client that never writes: start() is not called, so only the admission side runs.
  const events = new DenialEvents({ client: {} as never, logger: silentLogger(), identity: 'bench' });
  const same = outcome('team-a', 'web');
  let n = 0;
  const sides = {
    baseline: (): void => lines.denied(same),
    repeat: (): void => (lines.denied(same), events.denied(same)),
    distinct: (): void => (lines.denied(same), events.denied(outcome('team-a', `web-${n++}`))),
  };
  const samples: Record<keyof typeof sides, number[]> = { baseline: [], repeat: [], distinct: [] };
  const order = Object.keys(sides) as (keyof typeof sides)[];
  for (let round = 0; round < ROUNDS; round++) {
    for (const k of round % 2 === 0 ? order : [...order].reverse()) samples[k].push(cpuMicrosPerCall(sides[k], { batch: 5000, warmupBatches: 2 }));
  }
  lines.flush();

  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const heap0 = process.memoryUsage().heapUsed;
  const flood = new DenialEvents({ client: {} as never, logger: silentLogger(), identity: 'bench' });
  for (let i = 0; i < 200_000; i++) flood.denied(outcome(`ns-${i % 200}`, `pod-${i}`));
  gc?.();
  const heldBytes = process.memoryUsage().heapUsed - heap0;

  const base = median(samples.baseline);
  const repeat = median(samples.repeat);
  const distinct = median(samples.distinct);
  console.log(
    JSON.stringify(
      {
        benchmark: 'denial-events',
        machine: { cpus: cpus().length, node: process.version, loadavg1m: Math.round((loadavg()[0] ?? NaN) * 100) / 100 },
        rounds: ROUNDS,
        cpuMicrosecondsPerDenial: { baseline: Number(base.toFixed(3)), repeat: Number(repeat.toFixed(3)), distinct: Number(distinct.toFixed(3)) },
        costMicroseconds: { repeat: Number((repeat - base).toFixed(3)), distinct: Number((distinct - base).toFixed(3)) },
        ratio: { repeat: Number((repeat / base).toFixed(3)), distinct: Number((distinct / base).toFixed(3)) },
        flood: { denials: 200_000, namespaces: 200, held: flood.stats()['held'], heapMiB: gc ? Number((heldBytes / 1048576).toFixed(2)) : 'run with --expose-gc' },
      },
      null,
      2,
    ),
  );
}

main();
