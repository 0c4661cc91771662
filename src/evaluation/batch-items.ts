/**
 * The batcher's items and batches (batcher.ts), and the pure parts of its
 * bookkeeping: which waiting items the next batch takes, and what a settled
 * item lets go of. No timers, no workers: the batcher does those.
 */
import type { TaskAbort } from './task-abort.ts';
import type { ItemBody } from './protocol.ts';

/**
 * One attempt's outcome: the worker's result, or abandoned (with the rule or
 * VAP that was running, if one was); `outOfMemory` when its thread died of
 * its resourceLimits (thread-memory.ts) rather than at the deadline.
 */
export type Attempt = { ok: true; value: unknown } | { ok: false; running: string | undefined; outOfMemory?: true };

export interface Item {
  /** Released (with resolve and reject) once settled: see release(). */
  body: ItemBody | undefined;
  /** Epoch ms; undefined: counts from when a worker claims the item. */
  readonly deadline: number | undefined;
  /** Past this (epoch ms) the item is abandoned: deadline + grace (Infinity while an item without a deadline is not claimed). */
  hard: number;
  /** Past this (epoch ms) an item without a deadline that no worker claimed is settled as never started. */
  readonly startBy: number;
  readonly abandoned: string[] | undefined;
  /**
   * Sent alone: a second attempt after an abandon (it ran next to something slow once already), or an item
   * whose batch exhausted its thread's memory before any item ran (each goes again alone, so only the one
   * that cannot fit fails).
   */
  solo: boolean;
  settled: boolean;
  /** The batch that holds it now, and its index there; undefined while it waits. */
  batch: Batch | undefined;
  index: number;
  /** Its position in the batcher's timeline (-1: not in it, an item without a deadline). */
  at: number;
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

/**
 * The next batch from `waiting` (settled items skipped): the first waiting
 * item alone if it is solo, else up to `size` items that are not. `rest` is
 * what still waits, in order.
 */
export function takeBatch(waiting: Item[], size: number): { items: Item[]; rest: Item[] } {
  const w = waiting;
  let i = 0;
  while (i < w.length && w[i]!.settled) i++;
  if (i === w.length) return { items: [], rest: [] };
  if (w[i]!.solo) return { items: [w[i]!], rest: w.slice(i + 1) };
  const items: Item[] = [];
  let j = i;
  for (; j < w.length && items.length < size; j++) {
    const it = w[j]!;
    if (it.settled) continue;
    if (it.solo) break;
    items.push(it);
  }
  return { items, rest: j === w.length ? [] : w.slice(j) };
}
