/**
 * The batcher's items and batches (batcher.ts), and the pure parts of its
 * bookkeeping: what a settled item lets go of. Which waiting items the next
 * batch takes is fair-queue.ts's. No timers, no workers: the batcher does
 * those.
 */
import type { Flow, Queued } from './fair-queue.ts';
import type { TaskAbort } from './task-abort.ts';
import type { ItemBody } from './protocol.ts';

/**
 * One attempt's outcome: the worker's result, or abandoned (with the rule or
 * VAP that was running, if one was), or never started (no worker claimed it
 * by its `startBy`); `outOfMemory` when its thread died of its
 * resourceLimits (thread-memory.ts) rather than at the deadline.
 */
export type Attempt = { ok: true; value: unknown } | { ok: false; running: string | undefined; started: boolean; outOfMemory?: true };

export interface Item extends Queued {
  /** Released (with resolve and reject) once settled: see release(). */
  body: ItemBody | undefined;
  readonly flow: Flow;
  /** Epoch ms by which the request must be answered (Infinity: no one waits, the audit): caps the evaluation's deadline. */
  readonly end: number;
  readonly startBy: number;
  readonly abandoned: string[] | undefined;
  /**
   * Sent alone: a second attempt after an abandon (it ran next to something slow once already), or an item
   * whose batch exhausted its thread's memory before any item ran (each goes again alone, so only the one
   * that cannot fit fails).
   */
  solo: boolean;
  settled: boolean;
  reserved: number;
  /** The batch that holds it now, and its index there; undefined while it waits. */
  batch: Batch | undefined;
  index: number;
  resolve: (a: Attempt) => void;
  reject: (err: unknown) => void;
}

export interface Batch {
  readonly items: Item[];
  readonly slot: number;
  readonly id: number;
  readonly abort: TaskAbort;
  /** Epoch ms after which the items not finished are taken back. */
  readonly reclaimAt: number;
  reclaimed: boolean;
  /** Estimated to run long (its flows' mean costs): not queued on a busy worker's port (batcher.ts, #dispatch). */
  readonly heavy: boolean;
  /** The item its worker was on at the last tick (-1: none yet), and since when (epoch ms): its deadline counts from there. */
  runIndex: number;
  runSince: number;
}

const settledAlready = (): void => undefined;

/** piscina's error for the tasks of a worker it terminated (WorkerInfo.destroy: Errors.ThreadTermination). */
export function isTermination(err: unknown): boolean {
  return err instanceof Error && err.message === 'Terminating worker thread';
}

/**
 * A settled item stays referenced (by its batch until the batch ends) while
 * under load the young generation is collected: what it still points at
 * (the review's text, the promise with its result) survived the collection
 * and was promoted, and the main thread's scavenges took tens of ms each
 * (--trace-gc, the pool under load). The batcher's timeline lets go of it
 * at once (batcher.ts, #release).
 */
export function release(item: Item): void {
  item.body = undefined;
  item.resolve = settledAlready;
  item.reject = settledAlready;
}
