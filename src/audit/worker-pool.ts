/**
 * A bounded pool of workers (`--audit-workers`) pulling from a {@link WorkQueue}.
 * Each worker takes a key, runs the handler with the pool's AbortSignal,
 * and reports the outcome to the queue: success forgets the failure count,
 * a thrown error is retried with backoff (capped), and a handler may ask for
 * a later run without it counting as a failure (`{ requeueAfterMs }`, like
 * controller-runtime's `Result{RequeueAfter}`; used for a PDB's 429 and for
 * alert re-sends).
 */
import type { Logger } from 'pino';
import { ErrorCode, PortalError, toError } from '../observability/errors.ts';
import type { WorkItem, WorkQueue } from './work-queue.ts';
import { LogKey } from '../observability/log-keys.ts';

/** What a handler may return; `void` means done. */
export type HandlerResult = void | { requeueAfterMs: number };

export type WorkHandler<T> = (work: WorkItem<T>, signal: AbortSignal) => Promise<HandlerResult>;

export interface WorkerPoolOptions {
  /** Concurrent workers (`--audit-workers`). @default 4 */
  concurrency?: number;
  logger?: Logger;
}

export class WorkerPool<T> {
  readonly #queue: WorkQueue<T>;
  readonly #handler: WorkHandler<T>;
  readonly #concurrency: number;
  readonly #logger: Logger | undefined;
  #inFlight = 0;
  #started = false;

  constructor(queue: WorkQueue<T>, handler: WorkHandler<T>, options: WorkerPoolOptions = {}) {
    this.#queue = queue;
    this.#handler = handler;
    this.#concurrency = options.concurrency ?? 4;
    this.#logger = options.logger?.child({ [LogKey.subcomponent]: 'worker-pool', [LogKey.queue]: queue.name });
    if (!Number.isInteger(this.#concurrency) || this.#concurrency < 1) {
      throw new PortalError(ErrorCode.ConfigInvalid, `worker pool: concurrency must be a positive integer, got ${this.#concurrency}`);
    }
  }

  /** Handlers running right now (never more than `concurrency`). */
  get inFlight(): number {
    return this.#inFlight;
  }

  /**
   * Runs the workers until `signal` aborts or the queue is closed and drained.
   * Resolves only after every in-flight handler has returned (the handler
   * receives the same signal, so it can stop early). Not restartable.
   */
  async start(signal: AbortSignal): Promise<void> {
    if (this.#started) throw new PortalError(ErrorCode.Internal, 'worker pool already started');
    this.#started = true;
    const workers = Array.from({ length: this.#concurrency }, () => this.#work(signal));
    await Promise.all(workers);
  }

  async #work(signal: AbortSignal): Promise<void> {
    for (;;) {
      let work: WorkItem<T> | undefined;
      try {
        work = await this.#queue.get(signal);
      } catch {
        return; // aborted
      }
      if (!work) return; // queue closed and drained, or destroyed
      this.#inFlight++;
      try {
        const result = await this.#handler(work, signal);
        this.#queue.forget(work.key);
        if (result && result.requeueAfterMs >= 0) this.#queue.addAfter(work.key, work.item, result.requeueAfterMs);
      } catch (err) {
        if (signal.aborted) {
          // Shutting down (or the leader term ended): not a failure of the key.
          this.#logger?.debug({ [LogKey.key]: work.key }, 'audit work interrupted');
        } else {
          const outcome = this.#queue.retry(work.key, work.item, err);
          this.#logger?.warn({ [LogKey.key]: work.key, [LogKey.attempt]: work.attempt + 1, [LogKey.outcome]: outcome, [LogKey.error]: toError(err) }, 'audit work failed');
        }
      } finally {
        this.#inFlight--;
        this.#queue.done(work.key);
      }
    }
  }
}
