/**
 * The readiness gate (DESIGN §3): ready iff every source check passes (rules
 * loaded, informers synced) AND NOT (more than half of the last N decided
 * admission requests ended in an internal error, with a minimum sample).
 *
 * `/validate` only consults {@link ReadinessGate.synced}: the error ratio
 * takes the replica out of the Service (via /readyz) but must not make it
 * deny everything as "not ready", or the window would never refill and the
 * replica would never recover.
 */
export type ReadinessCheck = () => true | string;

export interface ReadinessOptions {
  /** @default 100 */
  window?: number;
  /**
   * Fewer recorded requests than this never trip the gate, so a handful of
   * errors at start-up does not flap it. @default 20
   */
  minSample?: number;
  /** @default 0.5 */
  maxErrorRatio?: number;
}

export interface ReadinessStatus {
  ready: boolean;
  reasons: string[];
}

export class ReadinessGate {
  readonly #checks = new Map<string, ReadinessCheck>();
  readonly #ring: Uint8Array;
  readonly #minSample: number;
  readonly #maxErrorRatio: number;
  #next = 0;
  #count = 0;
  #errors = 0;

  constructor(opts: ReadinessOptions = {}) {
    this.#ring = new Uint8Array(opts.window ?? 100);
    this.#minSample = opts.minSample ?? 20;
    this.#maxErrorRatio = opts.maxErrorRatio ?? 0.5;
  }

  /** Adds a source check; a string result is the reason it is not ready. Returns a remover. */
  addCheck(name: string, check: ReadinessCheck): () => void {
    this.#checks.set(name, check);
    return () => this.#checks.delete(name);
  }

  /** Records the outcome of one decided admission request. */
  record(internalError: boolean): void {
    const bit = internalError ? 1 : 0;
    if (this.#count === this.#ring.length) this.#errors -= this.#ring[this.#next] as number;
    else this.#count++;
    this.#ring[this.#next] = bit;
    this.#errors += bit;
    this.#next = (this.#next + 1) % this.#ring.length;
  }

  /** Reasons the sources are not ready (empty when synced). */
  sourceReasons(): string[] {
    const reasons: string[] = [];
    for (const [name, check] of this.#checks) {
      let r: true | string;
      try {
        r = check();
      } catch (err) {
        r = `check failed: ${err instanceof Error ? err.message : String(err)}`;
      }
      if (r !== true) reasons.push(`${name}: ${r}`);
    }
    return reasons;
  }

  synced(): boolean {
    return this.sourceReasons().length === 0;
  }

  errorRatio(): { errors: number; sample: number } {
    return { errors: this.#errors, sample: this.#count };
  }

  status(): ReadinessStatus {
    const reasons = this.sourceReasons();
    if (this.#count >= this.#minSample && this.#errors / this.#count > this.#maxErrorRatio) {
      reasons.push(
        `internal errors: ${this.#errors} of the last ${this.#count} admission requests (more than ${this.#maxErrorRatio * 100}%)`,
      );
    }
    return { ready: reasons.length === 0, reasons };
  }
}
