/**
 * At most `size` calls in flight; the rest wait their turn in order.
 *
 * Why: an evaluation's deadline starts when it is handed to the pool. The
 * audit hands the pool work from `--audit-workers` loops at once while its
 * pool has one thread, so without a gate an audit evaluation could spend its
 * whole deadline waiting behind the others and come back as an `error`
 * verdict on a slow machine: a violation would seem to end and start again
 * (an alert resolved and re-fired across a leader change). Gated, an audit
 * evaluation is handed over only when a thread is free, so its deadline
 * measures the rules, not the queue. Admission is not gated: its deadline is
 * the request's, queue included.
 */
export class Gate {
  readonly #size: number;
  #inFlight = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`a gate needs a size of at least 1, got ${size}`);
    this.#size = size;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#inFlight >= this.#size) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#inFlight++;
    try {
      return await fn();
    } finally {
      // The slot passes straight to the next waiter (inFlight unchanged), or is freed.
      const next = this.#waiting.shift();
      if (next) next();
      else this.#inFlight--;
    }
  }

  /** Calls waiting for a slot. */
  get waiting(): number {
    return this.#waiting.length;
  }
}
