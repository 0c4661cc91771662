/**
 * An evaluation worker (piscina's task handler; adr/0013). It holds its own
 * compiled copy of the policies, kept current from the main thread's change
 * channel, and evaluates one task at a time with the same functions as
 * `portal test` (decideAdmission, evaluate, VapSet.evaluate).
 *
 * The module does not finish loading before it has a snapshot (top-level
 * await), so piscina counts a worker ready — and gives it tasks — only once
 * it holds the policies; a replaced worker starts from a fresh snapshot.
 */
import { BroadcastChannel, threadId, workerData } from 'node:worker_threads';
import { decideAdmission, evaluate, RuleSet, type EvaluationBudget, type EvaluationInput, type KubeObject, type Replicated, type RuleVerdict } from '../policy/index.ts';
import { ParamStore, VapSet } from '../policy/vap/index.ts';
import { epochNow, SLOT_BYTES, SLOT_HEADER, type ChannelMessage, type StoreName, type Task, type WorkerData } from './protocol.ts';

const data = workerData as WorkerData;

interface Stores {
  rules: RuleSet;
  vaps: VapSet;
  params: ParamStore;
}

const fresh = (): Stores => ({ rules: new RuleSet(), vaps: new VapSet(), params: new ParamStore() });

let stores = fresh();
/** The last change applied; -1 until the first snapshot. */
let seq = -1;
const waiting: { seq: number; resolve: () => void }[] = [];

function applyTo(s: Stores, store: StoreName, change: unknown): void {
  // The main thread applied the same change to the same code without a throw; a throw here is a bug, and the
  // change is skipped rather than kill the worker (its rules then differ until the next snapshot).
  try {
    (s[store] as Replicated<unknown>).apply(change);
  } catch {
    // see above
  }
}

const channel = new BroadcastChannel(data.channel);
const ready = new Promise<void>((resolve) => waiting.push({ seq: 0, resolve }));

channel.onmessage = (event: unknown) => {
  const m = (event as { data: ChannelMessage }).data;
  if (m.type === 'snapshot') {
    if (m.seq <= seq) return;
    const s = fresh();
    for (const c of m.changes) applyTo(s, c.store, c.change);
    stores = s;
    seq = m.seq;
    channel.postMessage({ type: 'synced', thread: threadId, seq } satisfies ChannelMessage);
  } else if (m.type === 'change') {
    if (seq < 0 || m.seq <= seq) return; // before our snapshot: already in it
    if (m.seq !== seq + 1) {
      // A gap cannot happen on one ordered channel; if it did, start over from a snapshot.
      seq = -1;
      channel.postMessage({ type: 'hello' } satisfies ChannelMessage);
      return;
    }
    applyTo(stores, m.store, m.change);
    seq = m.seq;
  } else return;
  for (let i = waiting.length - 1; i >= 0; i--) {
    const w = waiting[i]!;
    if (w.seq <= seq) {
      waiting.splice(i, 1);
      w.resolve();
    }
  }
};
channel.postMessage({ type: 'hello' } satisfies ChannelMessage);
await ready;

const progress = new Int32Array(data.progress);
const progressBytes = new Uint8Array(data.progress);
const encoder = new TextEncoder();
/** Encoded keys, so recording progress costs one copy per rule. */
const encoded = new Map<string, Uint8Array>();

function recorder(task: Task): (key: string) => void {
  const base = task.slot * SLOT_BYTES;
  const words = base / 4;
  progress[words] = task.id;
  progress[words + 1] = 0;
  return (key) => {
    let bytes = encoded.get(key);
    if (bytes === undefined) {
      if (encoded.size > 10_000) encoded.clear();
      bytes = encoder.encode(key).subarray(0, SLOT_BYTES - SLOT_HEADER);
      encoded.set(key, bytes);
    }
    progressBytes.set(bytes, base + SLOT_HEADER);
    progress[words + 1] = bytes.length;
  };
}

function execute(task: Task): unknown {
  const onRule = recorder(task);
  const abandoned = task.abandoned && task.abandoned.length > 0 ? new Set(task.abandoned) : undefined;
  if (task.kind === 'vap') {
    return stores.vaps.evaluate(task.attrs, { namespaceObject: task.namespaceObject, params: stores.params }, {
      deadline: { at: task.deadline, now: epochNow, ms: task.ms, abandoned, onPolicy: onRule },
    });
  }
  const budget: EvaluationBudget = { deadline: task.deadline, now: epochNow, ms: task.ms, abandoned, onRule };
  if (task.kind === 'audit') return evaluate(stores.rules, task.input, budget);
  let errors: RuleVerdict[] | undefined;
  const decision = decideAdmission(stores.rules, task.body === undefined ? task.input : withObjects(task.input, task.body), budget, (v) => (errors ??= []).push(v));
  return errors === undefined ? { decision } : { decision, errors };
}

/** The input with the objects the main thread left out, from the review's own text. */
function withObjects(input: EvaluationInput, body: string): EvaluationInput {
  const request = (JSON.parse(body) as { request?: { object?: KubeObject | null; oldObject?: KubeObject | null } }).request;
  const object = request?.object ?? null;
  const oldObject = request?.oldObject ?? null;
  return { ...input, object, oldObject, ...(input.request ? { request: { ...input.request, object, oldObject } } : {}) };
}

/** piscina's handler: evaluates at the task's revision, waiting for it when this worker is behind. */
export default function run(task: Task): unknown {
  if (seq >= task.seq) return execute(task);
  return new Promise<void>((resolve) => waiting.push({ seq: task.seq, resolve })).then(() => execute(task));
}
