/**
 * An evaluation worker (piscina's task handler; adr/0013). It holds its own
 * compiled copy of the policies, kept current from the main thread's change
 * channel, and evaluates one task at a time with the same functions as
 * `portal test` (answerReview, evaluate, VapSet.evaluate).
 *
 * The module does not finish loading before it has a snapshot (top-level
 * await), so piscina counts a worker ready — and gives it tasks — only once
 * it holds the policies; a replaced worker starts from a fresh snapshot.
 */
import { BroadcastChannel, threadId, workerData } from 'node:worker_threads';
import { evaluate, RuleSet, type EvaluationBudget, type Replicated } from '../policy/index.ts';
import { NamespaceLabelStore } from '../policy/namespace-label-store.ts';
import { answerReview, nameOnlyNamespaceLabels, type ReviewContext } from '../policy/review/answer.ts';
import { ParamStore, VapSet } from '../policy/vap/index.ts';
import { checkRuleReview } from '../policy/rule-check.ts';
import { joinPacked, packReview } from './packed-review.ts';
import { RuleStatsWriter } from './rule-stats-page.ts';
import type { PageMessage } from './rule-stats.ts';
import { poisonCheck, PoisonPairs } from './poison-pairs.ts';
import { ProgressSlotWriter } from './progress.ts';
import {
  CLAIM_CLOSED,
  epochNow,
  SLOT_BYTES,
  SLOT_CLAIM,
  SLOT_COMPILE_MS,
  SLOT_COMPILING,
  SLOT_ID,
  SLOT_ITEM,
  SLOT_KEY_LENGTH,
  SLOT_TIMES,
  type ChannelMessage,
  type ItemOutcome,
  type TaskOutcomes,
  type StoreName,
  type Task,
  type WorkerData,
} from './protocol.ts';

const data = workerData as WorkerData;

interface Stores {
  rules: RuleSet;
  vaps: VapSet;
  params: ParamStore;
  namespaces: NamespaceLabelStore;
  poison: PoisonPairs;
}

// A thread compiles a rule version when it first evaluates something the rule applies to (adr/0021).
const fresh = (): Stores => ({ rules: new RuleSet({}, { compile: 'on-first-use' }), vaps: new VapSet(), params: new ParamStore(), namespaces: new NamespaceLabelStore(), poison: new PoisonPairs() });
const exempt = data.exempt;

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

/** Per-rule admission counts, in a page the main thread reads (rule-stats-page.ts); announced before the first task. */
const ruleStats = data.ruleStats === undefined ? undefined : statsWriter(data.ruleStats);

function statsWriter(name: string): RuleStatsWriter {
  const stats = new BroadcastChannel(name);
  stats.unref();
  return new RuleStatsWriter((page) => stats.postMessage({ thread: threadId, page } satisfies PageMessage));
}

await ready;

const progress = new Int32Array(data.progress);
/** Each slot's writer of the running rule's key (read by the main thread if the worker is terminated). */
const writers: ProgressSlotWriter[] = [];

/** The slot (int32 offset) and request bound of the item this thread is running, for {@link compiling}. */
let runningWords = 0;
let runningCap: number | undefined;

/**
 * A first-use rule compile (EvaluationBudget.compiling): flagged in the slot
 * while it runs, its time added to the slot's compile ms and to the item's
 * deadline, never past the request's own bound. Its time is still the
 * item's (fair queuing charges it to the item's flow).
 */
function compiling<T>(budget: EvaluationBudget, compile: () => T): T {
  const started = epochNow();
  progress[runningWords + SLOT_COMPILING] = 1;
  try {
    return compile();
  } finally {
    const spent = epochNow() - started;
    progress[runningWords + SLOT_COMPILING] = 0;
    progress[runningWords + SLOT_COMPILE_MS] = (progress[runningWords + SLOT_COMPILE_MS] ?? 0) + Math.ceil(spent);
    const later = budget.deadline + spent;
    budget.deadline = runningCap !== undefined && runningCap < later ? runningCap : later;
  }
}

function execute(task: Task, i: number, onRule: (key: string) => void): unknown {
  const body = task.bodies[i]!;
  const given = task.abandoned?.[i];
  const abandoned = given !== undefined && given.length > 0 ? new Set(given) : undefined;
  const ms = task.ms;
  // The budget starts now, at the claim; the request's own bound (if any) caps it.
  const cap = task.deadlines[i];
  const fromClaim = epochNow() + ms;
  const deadline = cap !== undefined && cap < fromClaim ? cap : fromClaim;
  runningCap = cap;
  const poisoned = poisonedCheck();
  if (typeof body === 'string') return packReview(answerReview(body, reviewContext(), { deadline, now: epochNow, ms, abandoned, onRule, results: ruleStats, poisoned, compiling }));
  // A rule's apply-time check (rule-check.ts): its key is in the slot while it runs, as a rule's is.
  if (body.kind === 'rule') {
    onRule(body.key);
    return checkRuleReview(body.review, body.schemas);
  }
  if (body.kind === 'vap') {
    return stores.vaps.evaluate(body.attrs, { namespaceObject: body.namespaceObject, params: stores.params }, {
      deadline: { at: deadline, now: epochNow, ms, abandoned, onPolicy: onRule },
    });
  }
  const budget: EvaluationBudget = { deadline, now: epochNow, ms, abandoned, onRule, poisoned, compiling };
  return evaluate(stores.rules, body.input, budget);
}

let context: { stores: Stores; ctx: ReviewContext } | undefined;
let poisonedFor: { stores: Stores; check: ReturnType<typeof poisonCheck> } | undefined;

/** The check of the (rule, object) pairs that exhausted a thread's memory (poison-pairs.ts), for the stores in force. */
function poisonedCheck(): ReturnType<typeof poisonCheck> {
  if (poisonedFor?.stores === stores) return poisonedFor.check;
  const { rules, poison } = stores;
  poisonedFor = { stores, check: poisonCheck(poison, (key) => rules.version(key)) };
  return poisonedFor.check;
}

/** What reviews are answered with, for the stores in force (a snapshot replaces them). */
function reviewContext(): ReviewContext {
  if (context?.stores === stores) return context.ctx;
  const { rules, namespaces } = stores;
  const namespaceLabels = data.namespaceLabels === 'mirror' ? (ns: string) => (ns === '' ? undefined : namespaces.labels(ns)) : nameOnlyNamespaceLabels;
  context = { stores, ctx: { rules, exempt, namespaceLabels } };
  return context.ctx;
}

/**
 * Evaluates the batch's items in order, claiming each from the slot's
 * counter first: once the main thread closes it (it took the rest back,
 * because this batch ran long), the remaining items are left undefined.
 * Each item's time (µs) goes into the slot: fair queuing charges it to the
 * item's flow (fair-queue.ts).
 */
function executeBatch(task: Task): TaskOutcomes {
  const base = task.slot * SLOT_BYTES;
  const words = base / 4;
  const times = (base + SLOT_TIMES) / 4;
  const onRule = (writers[task.slot] ??= new ProgressSlotWriter(data.progress, task.slot)).key;
  runningWords = words;
  const n = task.bodies.length;
  const out: ItemOutcome[] = new Array<ItemOutcome>(n);
  for (;;) {
    const i = Atomics.add(progress, words + SLOT_CLAIM, 1);
    if (i >= n || i >= CLAIM_CLOSED) break;
    progress[words + SLOT_COMPILE_MS] = 0;
    progress[words + SLOT_ITEM] = i;
    progress[words + SLOT_KEY_LENGTH] = 0;
    let key: string | undefined;
    const started = performance.now();
    try {
      const value = execute(task, i, (k) => onRule((key = k)));
      out[i] = typeof value === 'string' ? value : { ok: value };
    } catch {
      // A bug (rule errors are verdicts): this item only is reported, with the rule that was running.
      out[i] = { thrown: key };
    }
    // At least 1: 0 means "not run" to the main thread.
    progress[times + i] = Math.min(0x7fffffff, Math.max(1, Math.round((performance.now() - started) * 1000)));
  }
  return joinPacked(out) ?? out;
}

/** piscina's handler: evaluates at the task's revision, waiting for it when this worker is behind. */
export default function run(task: Task): TaskOutcomes | Promise<TaskOutcomes> {
  // The main thread reset the slot before it sent the task; the id tells it which task wrote what it reads.
  progress[(task.slot * SLOT_BYTES) / 4 + SLOT_ID] = task.id;
  if (seq >= task.seq) return executeBatch(task);
  return new Promise<void>((resolve) => waiting.push({ seq: task.seq, resolve })).then(() => executeBatch(task));
}
