/**
 * What the main thread and the evaluation workers exchange (adr/0013).
 *
 * - Tasks go through piscina. One task is a batch: every evaluation that
 *   waited for a worker while it was busy (at most MAX_BATCH), so that one
 *   thread hand-off each way serves many requests under load, and a lone
 *   request on an idle pool still goes at once. Each item's input is
 *   structured cloned (an admission review travels as its text), the
 *   namespace labels travel with it, and `seq` names the policy revision the
 *   batch must be evaluated at.
 * - Policy changes go through a BroadcastChannel, each with the next `seq`;
 *   a worker that has not applied `seq` yet waits for it. A new worker says
 *   `hello` and the main thread answers with a snapshot of every store.
 * - Progress goes through shared memory: the worker claims the batch's
 *   items one at a time from a counter in the task's slot (the main thread
 *   can close it to take back the items not started: a batch stuck in one
 *   item does not hold the others), and before each rule (or VAP) runs it
 *   writes the rule's key there, so when the deadline passes and the worker
 *   is terminated, the main thread still knows which item and which rule
 *   were running.
 */
import type { EvaluationInput, KubeObject, RuleVerdict } from '../policy/index.ts';
import type { AnsweredReview, ExemptNamespaces } from '../policy/review/answer.ts';
import type { BindingEvaluation, VapAttributes } from '../policy/vap/index.ts';
import type { PackedReview } from './packed-review.ts';
import type { KindValidation } from '../policy/portal-kinds.ts';

/** The stores a worker mirrors, by name. */
export type StoreName = 'rules' | 'vaps' | 'params' | 'namespaces' | 'poison';

export type ChannelMessage =
  | { type: 'hello' }
  /** A worker holds a snapshot (at `seq`) and can take tasks. */
  | { type: 'synced'; thread: number; seq: number }
  | { type: 'change'; seq: number; store: StoreName; change: unknown }
  | { type: 'snapshot'; seq: number; changes: { store: StoreName; change: unknown }[] };

/** One piscina task: a batch of evaluations, one entry per item in each column. */
export interface Task {
  /** Evaluate at this policy revision (or later). */
  seq: number;
  /** Progress slot in the shared buffer, and the task's id written there. */
  slot: number;
  id: number;
  /** Every item's time budget from its claim (ms). */
  ms: number;
  /**
   * What each item asks. Columns rather than an object per item: a
   * structured clone costs per object and per property, and 16 reviews as
   * objects of five properties cost twice what their bare texts cost in
   * one array (the clone is paid on both threads, per batch).
   */
  bodies: ItemBody[];
  /**
   * Each item's deadline is `ms` from when the worker claims it (neither
   * the queue nor a worker's start-up counts), but never later than this:
   * epoch milliseconds (both threads read `performance.timeOrigin +
   * performance.now()`) by which the request must be answered; undefined:
   * no such bound (the audit).
   */
  deadlines: (number | undefined)[];
  /** Rule keys (or VAP names) abandoned in an earlier attempt: `error` without running. Absent when no item has any. */
  abandoned?: (string[] | undefined)[] | undefined;
}

/**
 * One item's question. A whole AdmissionReview travels as its bare text
 * (the common item): the worker reads, decides and serialises the answer
 * (answerReview). A rule's apply-time check (`rule`, rule-check.ts) travels
 * as the review's text too, with the custom kinds' schemas it reads.
 */
export type ItemBody = string | { kind: 'audit'; input: EvaluationInput } | { kind: 'vap'; attrs: VapAttributes; namespaceObject: KubeObject | null } | RuleCheckBody;

/** A PortalRule's check (policy/rule-check.ts): `key` names the rule in the slot while it runs, as a rule's key does. */
export interface RuleCheckBody {
  kind: 'rule';
  key: string;
  review: string;
  /** policy/rule-check.ts, kindSchemaText. */
  schemas: string[];
}

/**
 * What the worker answers for each item: the result, or — for an item the
 * main thread took back before the worker claimed it — nothing, or, if the
 * item threw (a bug: the engine turns rule errors into verdicts), the key of
 * the rule that was running. A result that is a string (a packed allow,
 * packed-review.ts: the common answer) travels bare, without the `ok`
 * object: every object an answer carries is one the main thread
 * deserialises and its young collections then copy (packed-review.ts).
 */
export type ItemOutcome = string | { ok: unknown } | { thrown: string | undefined } | undefined;

/** A task's answer: an outcome per item, or — when every item is a packed allow — their strings joined (packed-review.ts, joinPacked). */
export type TaskOutcomes = ItemOutcome[] | string;

export interface TaskResults {
  /** Packed when it is a plain allow (packed-review.ts). */
  review: AnsweredReview | PackedReview;
  audit: RuleVerdict[];
  vap: BindingEvaluation[];
  rule: KindValidation;
}

export interface WorkerData {
  channel: string;
  progress: SharedArrayBuffer;
  /** Reviews: namespaces whose requests are allowed unevaluated (already includes the install namespace). */
  exempt: ExemptNamespaces;
  /** Reviews: namespace labels from the mirrored `namespaces` store (cluster mode), or only the name label (file mode). */
  namespaceLabels: 'mirror' | 'name-only';
  /** Reviews: the channel on which the worker announces its per-rule counts page (rule-stats.ts); absent: not counted. */
  ruleStats?: string | undefined;
}

/**
 * One progress slot: [task id, key length, claim counter, running item,
 * compiling, compile ms] as int32, then the key's UTF-8 bytes, and at the
 * end each item's measured evaluation time (int32 µs, MAX_BATCH of them:
 * what fair queuing charges its flow, fair-queue.ts). The 872 bytes left for
 * the key hold any rule key (`PortalRule/<63>/<253>`) or VAP name.
 * `compiling` is 1 while the running item compiles a rule version on first
 * use (rule-code.ts, RuleCode) and `compile ms` what such compiles took
 * in the running item so far: that time does not count against the item's
 * own deadline (batcher.ts), only against the request's.
 */
export const SLOT_BYTES = 1024;
export const SLOT_HEADER = 24;
/** Int32 offsets in a slot. */
export const SLOT_ID = 0;
export const SLOT_KEY_LENGTH = 1;
export const SLOT_CLAIM = 2;
export const SLOT_ITEM = 3;
export const SLOT_COMPILING = 4;
export const SLOT_COMPILE_MS = 5;
/** The claim counter once the main thread closed it: every later claim is past the batch. */
export const CLAIM_CLOSED = 0x40000000;
/** Evaluations one task carries at most: under load a batch forms while the workers are busy; this bounds its length (a few ms of work). */
export const MAX_BATCH = 32;
/** Where the items' times start in a slot (bytes), and the room left for the key. */
export const SLOT_TIMES = SLOT_BYTES - 4 * MAX_BATCH;
export const SLOT_KEY_BYTES = SLOT_TIMES - SLOT_HEADER;

/** This thread's performance.timeOrigin: fixed for the thread's life, and its getter costs as much as `now()` (the evaluator reads the clock before every rule). */
const ORIGIN = performance.timeOrigin;

/** The clock both sides use for deadlines: comparable across threads (each has its own performance.timeOrigin). */
export function epochNow(): number {
  return ORIGIN + performance.now();
}
