/**
 * Fair queuing's cost per review on the main thread (issue 31 item 2): what
 * the evaluation pool now does per review and did not before, measured
 * alone, since on the admission bench (bench/admission.ts --baseline main)
 * a few µs drown in a shared machine's noise.
 *
 * Per review, both sides: queue it, take it in a batch of BATCH (the mean
 * batch the admission bench measured under load, ~14), settle it.
 * - fifo: the previous queue (one array, batches sliced off its front).
 * - fair: the flow read from the review's text (flows.ts), the flow's FIFO,
 *   deficit round robin (fair-queue.ts), the measured time charged to the
 *   flow, the flow's bookkeeping on settle; reviews spread over FLOWS
 *   namespaces.
 * Interleaved rounds; the median of each side's ns per review, and their
 * difference. Run: npm run bench -- fair-queue [--rounds 15] [--flows 8]
 */
import { cpus, loadavg } from 'node:os';
import { FairQueue, type Flow, type Queued } from '../src/evaluation/fair-queue.ts';
import { reviewFlow } from '../src/evaluation/flows.ts';
import { podInput, realisticPod } from './realistic-pod.ts';

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? (process.argv[i + 1] ?? fallback) : fallback;
}
const ROUNDS = Number(flag('rounds', '15'));
const FLOWS = Number(flag('flows', '8'));
const BATCH = 14;
const REVIEWS = 200_000;

/** The admission bench's review (realistic-pod.ts), as kube-apiserver orders it, in FLOWS namespaces. */
function bodies(): string[] {
  return Array.from({ length: FLOWS }, (_, i) => {
    const object = realisticPod();
    const input = podInput(object);
    const request = {
      uid: '705ab4f5-6393-11e8-b7cc-42010a800002', kind: input.kind, resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: input.kind, requestResource: { group: '', version: 'v1', resource: 'pods' }, name: input.name, namespace: `tenant-${i}`,
      operation: input.operation, userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller', groups: ['system:serviceaccounts'] },
      object, oldObject: null, dryRun: false, options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
    };
    return JSON.stringify({ kind: 'AdmissionReview', apiVersion: 'admission.k8s.io/v1', request });
  });
}

interface FifoItem { body: string | undefined; settled: boolean }
interface FairItem extends Queued { body: string | undefined; settled: boolean; reserved: number }

function fifo(reviews: string[]): number {
  let waiting: FifoItem[] = [];
  const t0 = process.cpuUsage();
  for (let n = 0; n < REVIEWS; n += BATCH) {
    for (let k = 0; k < BATCH; k++) waiting.push({ body: reviews[(n + k) % reviews.length], settled: false });
    const items = waiting.slice(0, BATCH);
    waiting = waiting.slice(BATCH);
    for (const it of items) {
      it.settled = true;
      it.body = undefined;
    }
  }
  const used = process.cpuUsage(t0);
  return ((used.user + used.system) * 1000) / REVIEWS;
}

function fair(reviews: string[]): number {
  const q = new FairQueue<FairItem>(1);
  const t0 = process.cpuUsage();
  for (let n = 0; n < REVIEWS; n += BATCH) {
    for (let k = 0; k < BATCH; k++) {
      const body = reviews[(n + k) % reviews.length]!;
      const flow: Flow = q.flow(reviewFlow(body));
      q.push({ body, flow, settled: false, solo: false, startBy: Number.POSITIVE_INFINITY, reserved: 0 });
    }
    for (const it of q.take(BATCH)) {
      q.charge(it.flow, 0.05, it.reserved);
      it.reserved = 0;
      it.settled = true;
      it.body = undefined;
      q.settled(it.flow);
    }
  }
  const used = process.cpuUsage(t0);
  return ((used.user + used.system) * 1000) / REVIEWS;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[s.length >> 1]! * 10) / 10;
};

const reviews = bodies();
const load = [loadavg()[0]];
// Warm-up (JIT).
fifo(reviews);
fair(reviews);
const a: number[] = [];
const b: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  if (r % 2 === 0) {
    a.push(fifo(reviews));
    b.push(fair(reviews));
  } else {
    b.push(fair(reviews));
    a.push(fifo(reviews));
  }
}
load.push(loadavg()[0]);
const diffs = a.map((x, i) => b[i]! - x);
process.stdout.write(
  `${JSON.stringify({
    benchmark: 'fair-queue',
    machine: { cpus: cpus().length, node: process.version, loadavg1m: load },
    setup: { reviewBytes: reviews[0]!.length, flows: FLOWS, batch: BATCH, reviewsPerRound: REVIEWS, rounds: ROUNDS },
    nsPerReview: { fifo: median(a), fair: median(b), fairMinusFifo: median(diffs) },
    rounds: { fifo: a.map((x) => Math.round(x)), fair: b.map((x) => Math.round(x)) },
  }, null, 2)}\n`,
);
