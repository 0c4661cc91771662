/**
 * The audit work queue: keyed by object, deduplicated, with capped
 * exponential-backoff retries and a bounded size. Semantics follow
 * client-go's `workqueue` (a key is never processed by two workers at once; a
 * key added while it is being processed is processed again afterwards), the
 * lifecycle follows piscina/undici (`close()` drains, `destroy()` stops now,
 * work submitted after either rejects with a typed error).
 *
 * Keys are `group/kind/namespace/name` (see {@link objectKey}); the payload
 * kept with a key is the latest one added (latest wins), so a burst of
 * informer events for one object costs one evaluation.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { backoffDelay } from '../util/backoff.ts';
import { ErrorCode, PortalError, toError } from '../observability/errors.ts';
import { queueMetrics, type QueueMetrics } from './metrics.ts';
import { LogKey } from '../observability/log-keys.ts';

export interface WorkQueueOptions {
  /** Name used in logs and the `queue` metric label. @default "audit" */
  name?: string;
  /**
   * Most keys waiting at once (queued + delayed). 10,000 Pods is the sizing
   * target of issue 5; five times that leaves room for every other matched
   * kind before the queue pushes back. @default 50000
   */
  maxSize?: number;
  /** Failures of one key before it is dropped (logged + metric). @default 8 */
  maxRetries?: number;
  /** First retry delay; doubles per failure. @default 200 */
  baseDelayMs?: number;
  /**
   * Upper bound of a retry delay. 200 ms × 2^8 ≈ 51 s, so with the defaults
   * the cap is reached only by the last retry. @default 60000
   */
  maxDelayMs?: number;
  logger?: Logger;
  registry?: Registry;
}

export interface WorkItem<T> {
  key: string;
  item: T;
  /** Failures so far for this key (0 on the first attempt). */
  attempt: number;
}

export type RetryOutcome = 'retried' | 'dropped';

/** `group/kind/namespace/name`; "" for the core group and cluster-scoped objects. */
export function objectKey(group: string, kind: string, namespace: string, name: string): string {
  return `${group}/${kind}/${namespace}/${name}`;
}

export function parseObjectKey(key: string): { group: string; kind: string; namespace: string; name: string } {
  const parts = key.split('/');
  if (parts.length !== 4) throw new PortalError(ErrorCode.InputInvalid, `malformed work queue key "${key}"`);
  const [group = '', kind = '', namespace = '', name = ''] = parts;
  return { group, kind, namespace, name };
}

interface Waiter<T> {
  resolve: (value: WorkItem<T> | undefined) => void;
  reject: (err: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

export class WorkQueue<T = undefined> {
  readonly name: string;
  readonly #maxSize: number;
  readonly #maxRetries: number;
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #logger: Logger | undefined;
  readonly #metrics: QueueMetrics | undefined;

  /** Keys ready for a worker, in order. Every key here is also in #dirty. */
  readonly #order: string[] = [];
  #orderHead = 0;
  /** Keys that need processing (queued, or re-added while processing) → latest payload. */
  readonly #dirty = new Map<string, T>();
  readonly #processing = new Set<string>();
  /**
   * When each waiting key's change arrived (performance.now(), the first add
   * since it was last handed out). Keys are inserted in arrival order and
   * removed when handed out, so the first entry is the oldest.
   */
  readonly #since = new Map<string, number>();
  /** The arrival time of the change each in-flight key is processing. */
  readonly #inFlightSince = new Map<string, number>();
  readonly #unregisterGauges: (() => void) | undefined;
  /** Retry timers, by key. */
  readonly #delayed = new Map<string, { timer: NodeJS.Timeout; item: T; dueAt: number }>();
  readonly #failures = new Map<string, number>();
  readonly #waiters: Waiter<T>[] = [];
  #state: 'open' | 'closing' | 'destroyed' = 'open';
  #drained: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(options: WorkQueueOptions = {}) {
    this.name = options.name ?? 'audit';
    this.#maxSize = options.maxSize ?? 50_000;
    this.#maxRetries = options.maxRetries ?? 8;
    this.#baseDelayMs = options.baseDelayMs ?? 200;
    this.#maxDelayMs = options.maxDelayMs ?? 60_000;
    this.#logger = options.logger?.child({ [LogKey.subcomponent]: 'work-queue', [LogKey.queue]: this.name });
    this.#metrics = options.registry ? queueMetrics(options.registry) : undefined;
    if (!(this.#maxSize > 0) || !(this.#maxRetries >= 0) || !(this.#baseDelayMs >= 0) || !(this.#maxDelayMs >= this.#baseDelayMs)) {
      throw new PortalError(ErrorCode.ConfigInvalid, `work queue "${this.name}": invalid options`);
    }
    this.#unregisterGauges = this.#metrics?.observe(this.name, { depth: () => this.length, lagSeconds: () => this.lagMs() / 1000 });
  }

  /** Keys waiting for a worker (not counting delayed retries or keys in flight). */
  get length(): number {
    return this.#order.length - this.#orderHead;
  }
  /** Keys currently handed to workers. */
  get processing(): number {
    return this.#processing.size;
  }
  /** Keys waiting for their retry delay. */
  get delayed(): number {
    return this.#delayed.size;
  }
  /**
   * The performance.now() at which the oldest change not yet processed
   * (waiting for a worker or in flight) arrived; undefined when there is none.
   * Delayed retries are not counted: they wait on purpose.
   */
  oldestPendingSince(): number | undefined {
    let oldest: number | undefined = this.#since.values().next().value;
    for (const at of this.#inFlightSince.values()) if (oldest === undefined || at < oldest) oldest = at;
    return oldest;
  }

  /** Milliseconds since {@link oldestPendingSince}; 0 when nothing is pending. */
  lagMs(): number {
    const since = this.oldestPendingSince();
    return since === undefined ? 0 : Math.max(0, performance.now() - since);
  }

  get closed(): boolean {
    return this.#state !== 'open';
  }

  /**
   * Queues `key` (or refreshes its payload if it is already waiting).
   * Returns false when the key was already waiting (deduplicated).
   * @throws PortalError Closed after close()/destroy(), QueueFull at capacity.
   */
  add(key: string, item: T = undefined as T): boolean {
    if (this.#state !== 'open') throw new PortalError(ErrorCode.Closed, `work queue "${this.name}" is closed`);
    if (this.#dirty.has(key)) {
      this.#dirty.set(key, item);
      return false;
    }
    // A newer add supersedes a pending retry: process now, with the new payload.
    const delayed = this.#delayed.get(key);
    if (delayed) {
      clearTimeout(delayed.timer);
      this.#delayed.delete(key);
    } else if (this.#dirty.size + this.#delayed.size >= this.#maxSize) {
      this.#metrics?.drops.inc({ queue: this.name, reason: 'full' });
      throw new PortalError(ErrorCode.QueueFull, `work queue "${this.name}" is full (${this.#maxSize} keys waiting)`);
    }
    this.#enqueue(key, item);
    this.#metrics?.adds.inc({ queue: this.name });
    return true;
  }

  /**
   * Waits for the next key. Resolves `undefined` once the queue is closed and
   * drained, or destroyed. Rejects with the signal's reason when aborted.
   * The caller must call {@link done} for every item it receives.
   */
  get(signal?: AbortSignal): Promise<WorkItem<T> | undefined> {
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    const next = this.#take();
    if (next) return Promise.resolve(next);
    if (this.#state === 'destroyed' || (this.#state === 'closing' && this.#idle())) return Promise.resolve(undefined);
    return new Promise((resolve, reject) => {
      const waiter: Waiter<T> = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          this.#removeWaiter(waiter);
          reject(signal?.reason);
        },
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  /** Marks a key finished; if it was re-added meanwhile it becomes ready again. */
  done(key: string): void {
    if (!this.#processing.delete(key)) return;
    this.#inFlightSince.delete(key);
    if (this.#dirty.has(key) && this.#state !== 'destroyed') this.#pushReady(key);
    this.#checkDrained();
  }

  /** Forgets the failure count of a key (call after a success). */
  forget(key: string): void {
    this.#failures.delete(key);
  }

  /**
   * Schedules a failed key again after exponential backoff, or drops it after
   * `maxRetries` failures. Call before {@link done}.
   */
  retry(key: string, item: T, error?: unknown): RetryOutcome {
    const failures = (this.#failures.get(key) ?? 0) + 1;
    if (failures > this.#maxRetries) {
      this.#failures.delete(key);
      this.#metrics?.drops.inc({ queue: this.name, reason: 'max_retries' });
      this.#logger?.error({ [LogKey.key]: key, [LogKey.failures]: failures - 1, [LogKey.error]: toError(error) }, 'audit work item dropped after max retries');
      return 'dropped';
    }
    this.#failures.set(key, failures);
    this.#metrics?.retries.inc({ queue: this.name });
    this.addAfter(key, item, backoffDelay(failures - 1, { initialMs: this.#baseDelayMs, maxMs: this.#maxDelayMs }));
    return 'retried';
  }

  /**
   * Queues `key` after `delayMs` without counting a failure (a PDB's 429, an
   * alert re-send that is due later). An earlier pending delay wins. No-op
   * once closing: a draining replica does not start future work.
   */
  addAfter(key: string, item: T, delayMs: number): void {
    if (this.#state !== 'open') return;
    // Already waiting (or re-added while in flight): it runs sooner than any delay.
    if (this.#dirty.has(key)) return;
    const dueAt = Date.now() + delayMs;
    const existing = this.#delayed.get(key);
    if (existing && existing.dueAt <= dueAt) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.#delayed.delete(key);
      if (this.#state !== 'open' || this.#dirty.has(key)) return;
      this.#enqueue(key, item);
    }, Math.max(0, delayMs));
    this.#delayed.set(key, { timer, item, dueAt });
  }

  /**
   * Stops accepting work and resolves once every waiting key has been
   * processed and no worker holds one. Pending delayed retries are cancelled:
   * a replica that is shutting down does not start future work (the next
   * leader re-evaluates everything from its own warm cache). Idempotent.
   */
  close(): Promise<void> {
    if (this.#state === 'open') {
      this.#state = 'closing';
      this.#cancelDelayed();
    }
    if (!this.#drained) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.#drained = { promise, resolve };
    }
    this.#checkDrained();
    return this.#drained.promise;
  }

  /** Drops everything now; waiting `get()` calls resolve `undefined`. Idempotent. */
  destroy(): void {
    if (this.#state === 'destroyed') return;
    this.#state = 'destroyed';
    this.#cancelDelayed();
    this.#order.length = 0;
    this.#orderHead = 0;
    this.#dirty.clear();
    this.#since.clear();
    this.#inFlightSince.clear();
    this.#failures.clear();
    this.#unregisterGauges?.();
    for (const w of this.#waiters.splice(0)) {
      w.signal?.removeEventListener('abort', w.onAbort);
      w.resolve(undefined);
    }
    this.#drained?.resolve();
  }

  #enqueue(key: string, item: T): void {
    this.#dirty.set(key, item);
    if (!this.#since.has(key)) this.#since.set(key, performance.now());
    // A key in flight is re-queued by done(), never handed to a second worker.
    if (!this.#processing.has(key)) this.#pushReady(key);
  }

  #pushReady(key: string): void {
    const waiter = this.#waiters.shift();
    if (waiter) {
      waiter.signal?.removeEventListener('abort', waiter.onAbort);
      waiter.resolve(this.#hand(key));
      return;
    }
    this.#order.push(key);
  }

  #take(): WorkItem<T> | undefined {
    if (this.#orderHead >= this.#order.length) return undefined;
    const key = this.#order[this.#orderHead++]!;
    // Compact the array once the consumed head dominates, keeping take() O(1) amortised.
    if (this.#orderHead > 1024 && this.#orderHead * 2 > this.#order.length) {
      this.#order.splice(0, this.#orderHead);
      this.#orderHead = 0;
    }
    return this.#hand(key);
  }

  #hand(key: string): WorkItem<T> {
    const item = this.#dirty.get(key) as T;
    this.#dirty.delete(key);
    this.#inFlightSince.set(key, this.#since.get(key) ?? performance.now());
    this.#since.delete(key);
    this.#processing.add(key);
    return { key, item, attempt: this.#failures.get(key) ?? 0 };
  }

  #removeWaiter(waiter: Waiter<T>): void {
    const i = this.#waiters.indexOf(waiter);
    if (i >= 0) this.#waiters.splice(i, 1);
  }

  #cancelDelayed(): void {
    for (const { timer } of this.#delayed.values()) clearTimeout(timer);
    this.#delayed.clear();
  }

  #idle(): boolean {
    return this.length === 0 && this.#processing.size === 0;
  }

  #checkDrained(): void {
    if (this.#state !== 'closing' || !this.#idle()) return;
    for (const w of this.#waiters.splice(0)) {
      w.signal?.removeEventListener('abort', w.onAbort);
      w.resolve(undefined);
    }
    this.#drained?.resolve();
  }
}
