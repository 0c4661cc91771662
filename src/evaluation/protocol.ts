/**
 * What the main thread and the evaluation workers exchange (adr/0013).
 *
 * - Tasks go through piscina, one per evaluation: the input is structured
 *   cloned once (object and the request that holds it are one graph), the
 *   namespace labels travel with it, and `seq` names the policy revision it
 *   must be evaluated at.
 * - Policy changes go through a BroadcastChannel, each with the next `seq`;
 *   a worker that has not applied `seq` yet waits for it. A new worker says
 *   `hello` and the main thread answers with a snapshot of every store.
 * - Progress goes through shared memory: before each rule (or VAP) runs,
 *   the worker writes its key into the task's slot, so when the deadline
 *   passes and the worker is terminated, the main thread still knows which
 *   rule was running.
 */
import type { AdmissionDecision, EvaluationInput, KubeObject, RuleVerdict } from '../policy/index.ts';
import type { BindingEvaluation, VapAttributes } from '../policy/vap/index.ts';

/** The stores a worker mirrors, by name. */
export type StoreName = 'rules' | 'vaps' | 'params';

export type ChannelMessage =
  | { type: 'hello' }
  /** A worker holds a snapshot (at `seq`) and can take tasks. */
  | { type: 'synced'; thread: number; seq: number }
  | { type: 'change'; seq: number; store: StoreName; change: unknown }
  | { type: 'snapshot'; seq: number; changes: { store: StoreName; change: unknown }[] };

interface TaskHeader {
  /** Evaluate at this policy revision (or later). */
  seq: number;
  /** Cooperative deadline, epoch milliseconds (both threads read `performance.timeOrigin + performance.now()`). */
  deadline: number;
  /** The deadline's length, for messages. */
  ms: number;
  /** Rule keys (or VAP names) abandoned in an earlier attempt: `error` without running. */
  abandoned: string[] | undefined;
  /** Progress slot in the shared buffer, and the task's id written there. */
  slot: number;
  id: number;
}

export type Task =
  /**
   * With `body` (the review's JSON text), `input.object`, `input.oldObject`
   * and those of `input.request` are null and the worker takes them from
   * `JSON.parse(body).request`: copying a string and parsing it again costs
   * less than cloning the objects.
   */
  | (TaskHeader & { kind: 'admission'; input: EvaluationInput; body?: string | undefined })
  | (TaskHeader & { kind: 'audit'; input: EvaluationInput })
  | (TaskHeader & { kind: 'vap'; attrs: VapAttributes; namespaceObject: KubeObject | null });

export interface TaskResults {
  /** The decision, and the rules' `error` verdicts when there are any (the main thread counts and reports them). */
  admission: { decision: AdmissionDecision; errors?: RuleVerdict[] };
  audit: RuleVerdict[];
  vap: BindingEvaluation[];
}

export interface WorkerData {
  channel: string;
  progress: SharedArrayBuffer;
}

/**
 * One progress slot: [task id, key length] as int32, then the key's UTF-8
 * bytes. 1 KiB holds any rule key (`PortalRule/<63>/<253>`) or VAP name.
 */
export const SLOT_BYTES = 1024;
export const SLOT_HEADER = 8;

/** The clock both sides use for deadlines: comparable across threads (each has its own performance.timeOrigin). */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}
