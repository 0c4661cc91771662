/**
 * Fencing: a leader term. Leader-only code receives a LeaderTerm and calls
 * `assertValid()` immediately before every side effect. Validity is purely
 * monotonic arithmetic (`performance.now()` against the last renewal that was
 * *sent* and later succeeded), never a timer: a process that was paused
 * (GC, SIGSTOP) finds its term invalid the moment it wakes, before any timer
 * callback had a chance to run.
 */
import { ErrorCode, PortalError } from '../observability/errors.ts';
import { epochString, type Epoch, type LeaderTerm } from '../util/leader-term.ts';

export class Term implements LeaderTerm {
  readonly epoch: Readonly<Epoch>;
  readonly epochString: string;
  readonly startedAt: number;
  readonly #controller = new AbortController();
  readonly #validityMs: number;
  readonly #onExpired: (term: Term) => void;
  #lastRenewSentAt: number;
  #timer: NodeJS.Timeout | undefined;

  /**
   * @param lastRenewSentAt monotonic time at which the successful acquire was sent
   * @param validityMs leaseDuration − safety margin (Infinity when leading alone)
   * @param onExpired called once if the validity runs out without a renewal
   */
  constructor(epoch: Epoch, lastRenewSentAt: number, validityMs: number, onExpired: (term: Term) => void = () => {}) {
    this.epoch = Object.freeze({ ...epoch });
    this.epochString = epochString(epoch);
    this.startedAt = performance.now();
    this.#lastRenewSentAt = lastRenewSentAt;
    this.#validityMs = validityMs;
    this.#onExpired = onExpired;
    this.#arm();
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  validUntil(): number {
    return this.#lastRenewSentAt + this.#validityMs;
  }

  isValid(): boolean {
    return !this.#controller.signal.aborted && performance.now() < this.validUntil();
  }

  assertValid(): void {
    if (this.isValid()) return;
    const why = this.#controller.signal.aborted
      ? `term ended: ${(this.#controller.signal.reason as Error | undefined)?.message ?? 'unknown'}`
      : `term validity ran out ${Math.round(performance.now() - this.validUntil())}ms ago without a renewal`;
    throw new PortalError(ErrorCode.TermExpired, `leader term ${this.epochString} is no longer valid (${why})`);
  }

  /** A renewal that was sent at `sentAt` succeeded. */
  renewed(sentAt: number): void {
    if (this.#controller.signal.aborted) return;
    this.#lastRenewSentAt = Math.max(this.#lastRenewSentAt, sentAt);
    this.#arm();
  }

  /** Ends the term (idempotent). */
  end(reason: string): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (!this.#controller.signal.aborted) this.#controller.abort(new PortalError(ErrorCode.LeaseLost, reason));
  }

  get ended(): boolean {
    return this.#controller.signal.aborted;
  }

  /** Backstop so the signal fires at expiry even if the renew loop is stuck in a request. */
  #arm(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (!Number.isFinite(this.#validityMs)) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (!this.ended && performance.now() >= this.validUntil()) this.#onExpired(this);
      else if (!this.ended) this.#arm();
    }, Math.max(0, this.validUntil() - performance.now()) + 1);
    this.#timer.unref();
  }
}
