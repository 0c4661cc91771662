/**
 * Retry pacing shared by informers, the manager and the elector: capped
 * exponential backoff with jitter, and an abortable sleep.
 */

export interface BackoffOptions {
  /** First delay. @default 200 */
  initialMs?: number;
  /** Ceiling for the delay. @default 30000 */
  maxMs?: number;
  /** Growth per failure. @default 2 */
  factor?: number;
  /**
   * Extra random fraction added to each delay, so that replicas that failed
   * together (an API server restart) do not retry in lock-step. @default 0.2
   */
  jitter?: number;
}

/**
 * The capped exponential delay before retry number `attempt` (0 = the first
 * retry): `min(maxMs, initialMs · factor^attempt)`, without jitter. The one
 * formula every retry loop in Portal uses (informers, elector, audit queue,
 * Alertmanager sends, the dev supervisor and controllers).
 */
export function backoffDelay(attempt: number, options: { initialMs: number; maxMs: number; factor?: number }): number {
  return Math.min(options.maxMs, options.initialMs * (options.factor ?? 2) ** Math.max(0, attempt));
}

export class Backoff {
  readonly #initial: number;
  readonly #max: number;
  readonly #factor: number;
  readonly #jitter: number;
  #attempt = 0;

  constructor(options: BackoffOptions = {}) {
    this.#initial = options.initialMs ?? 200;
    this.#max = options.maxMs ?? 30_000;
    this.#factor = options.factor ?? 2;
    this.#jitter = options.jitter ?? 0.2;
  }

  /** The delay before the next attempt; grows with every call until reset(). */
  next(): number {
    const base = backoffDelay(this.#attempt, { initialMs: this.#initial, maxMs: this.#max, factor: this.#factor });
    this.#attempt++;
    return base * (1 + Math.random() * this.#jitter);
  }

  reset(): void {
    this.#attempt = 0;
  }

  get attempts(): number {
    return this.#attempt;
  }
}

/**
 * Sleeps `ms` unless `signal` aborts first (or `wake` fires). Resolves `true`
 * when the full time elapsed, `false` when cut short; never rejects.
 */
export function sleep(ms: number, signal?: AbortSignal, wake?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted || wake?.aborted) {
      resolve(false);
      return;
    }
    const done = (full: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      wake?.removeEventListener('abort', onAbort);
      resolve(full);
    };
    const onAbort = () => done(false);
    const timer = setTimeout(() => done(true), Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
    wake?.addEventListener('abort', onAbort, { once: true });
  });
}
