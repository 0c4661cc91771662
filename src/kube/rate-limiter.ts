/**
 * Client-side token bucket (client-go's `flowcontrol` semantics): `qps`
 * tokens per second refill a bucket of `burst` tokens. Used to pace writes so
 * that a burst of audit work cannot flood the API server.
 */
import { PortalError, ErrorCode } from '../observability/errors.ts';
import { sleep } from '../util/backoff.ts';

export interface RateLimiterOptions {
  /** Sustained rate, tokens per second (> 0). */
  qps: number;
  /** Bucket size: how many calls may go back to back (>= 1). */
  burst: number;
  /** Monotonic clock in ms; injectable for tests. @default performance.now */
  now?: () => number;
}

export class TokenBucket {
  readonly #qps: number;
  readonly #burst: number;
  readonly #now: () => number;
  #tokens: number;
  #last: number;

  constructor(options: RateLimiterOptions) {
    if (!(options.qps > 0) || !(options.burst >= 1)) {
      throw new PortalError(ErrorCode.ConfigInvalid, `rate limiter needs qps > 0 and burst >= 1 (got qps=${options.qps}, burst=${options.burst})`);
    }
    this.#qps = options.qps;
    this.#burst = options.burst;
    this.#now = options.now ?? (() => performance.now());
    this.#tokens = options.burst;
    this.#last = this.#now();
  }

  #refill(): void {
    const now = this.#now();
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#last) / 1000) * this.#qps);
    this.#last = now;
  }

  /** Takes a token if one is available right now. */
  tryTake(): boolean {
    this.#refill();
    if (this.#tokens >= 1) {
      this.#tokens -= 1;
      return true;
    }
    return false;
  }

  /** Milliseconds until a token will be available (0 if one is). */
  delayMs(): number {
    this.#refill();
    return this.#tokens >= 1 ? 0 : ((1 - this.#tokens) / this.#qps) * 1000;
  }

  /**
   * Waits for a token. Rejects with the abort reason if `signal` aborts first.
   * Waiters are not strictly FIFO; with JS's single thread and short waits
   * that is good enough for pacing.
   */
  async take(signal?: AbortSignal): Promise<void> {
    for (;;) {
      signal?.throwIfAborted();
      if (this.tryTake()) return;
      await sleep(this.delayMs(), signal);
    }
  }
}
