/**
 * The readiness gate (docs/design.md §3): ready iff every source check passes (rules
 * loaded, informers synced) AND NOT (more than half of the last N decided
 * admission requests ended in an internal error, with a minimum sample).
 *
 * What the window counts (answerer.ts): every answered verdict (allow,
 * warn, deny: a rule's own `error` verdict included, which its
 * failurePolicy turned into an answer) as a success, and Portal's internal
 * errors as failures. Overload answers (a flow's queue full, an evaluation
 * that could not start in time: evaluation/pool.ts), not-ready answers,
 * exemptions and malformed reviews are not recorded at all: a replica
 * shedding a namespace's flood still decides correctly, and taking it out
 * of the Service would only move the flood to the other replicas.
 *
 * The error window is bounded in count AND in age: an outcome older than
 * `maxAgeMs` no longer counts. Without the age bound a replica taken out of
 * its Service by a burst of errors received no traffic, so nothing ever
 * pushed the errors out and it stayed unready forever (issue 16). With it,
 * a replica that sees no new internal error is ready again at most
 * `maxAgeMs` after its last one (plus the kubelet's probe period); if it is
 * still broken, the next `minSample` requests take it out again.
 *
 * `/validate` only consults {@link ReadinessGate.synced}: the error ratio
 * takes the replica out of the Service (via /readyz) but must not make it
 * deny everything as "not ready", or the window would never refill and the
 * replica would never recover.
 */
import { formatDuration } from '../util/duration.ts';

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
  /**
   * Outcomes older than this stop counting. 60 s: twelve periods of the
   * chart's readiness probe (5 s), so a replica that is really broken and
   * keeps erring under traffic spends about one probe period in the
   * Service per minute (its first `minSample` requests take it out again),
   * while one that recovered is back within a minute. @default 60_000
   */
  maxAgeMs?: number;
  /** Monotonic clock in ms. @default performance.now */
  now?: () => number;
}

export interface ReadinessStatus {
  ready: boolean;
  reasons: string[];
}

/** The default of {@link ReadinessOptions.maxAgeMs}. */
export const READINESS_ERROR_MAX_AGE_MS = 60_000;

/** A check's answer: true, its reason, or the reason it threw. */
function runCheck(check: ReadinessCheck): true | string {
  try {
    return check();
  } catch (err) {
    return `check failed: ${err instanceof Error ? err.message : String(err)}`;
  }
}

export class ReadinessGate {
  readonly #checks = new Map<string, ReadinessCheck>();
  /** FIFO ring of outcomes (1 = internal error) and when each was recorded; the oldest is at `#next - #count`. */
  readonly #ring: Uint8Array;
  readonly #at: Float64Array;
  readonly #minSample: number;
  readonly #maxErrorRatio: number;
  readonly #maxAgeMs: number;
  readonly #now: () => number;
  #next = 0;
  #count = 0;
  #errors = 0;

  constructor(opts: ReadinessOptions = {}) {
    const window = opts.window ?? 100;
    this.#ring = new Uint8Array(window);
    this.#at = new Float64Array(window);
    this.#minSample = opts.minSample ?? 20;
    this.#maxErrorRatio = opts.maxErrorRatio ?? 0.5;
    this.#maxAgeMs = opts.maxAgeMs ?? READINESS_ERROR_MAX_AGE_MS;
    this.#now = opts.now ?? (() => performance.now());
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
    this.#at[this.#next] = this.#now();
    this.#errors += bit;
    this.#next = (this.#next + 1) % this.#ring.length;
  }

  /** Drops the outcomes older than the age bound (read paths only: the hot path stays a store). */
  #expire(): void {
    const oldestKept = this.#now() - this.#maxAgeMs;
    const size = this.#ring.length;
    while (this.#count > 0) {
      const oldest = (this.#next - this.#count + size) % size;
      if ((this.#at[oldest] as number) > oldestKept) break;
      this.#errors -= this.#ring[oldest] as number;
      this.#count--;
    }
  }

  /** Reasons the sources are not ready (empty when synced). */
  sourceReasons(): string[] {
    const reasons: string[] = [];
    for (const [name, check] of this.#checks) {
      const r = runCheck(check);
      if (r !== true) reasons.push(`${name}: ${r}`);
    }
    return reasons;
  }

  /** Whether every source check passes: sourceReasons() is empty. Asked on every admission request, so it builds no reasons. */
  synced(): boolean {
    for (const check of this.#checks.values()) if (runCheck(check) !== true) return false;
    return true;
  }

  /** Internal errors among the recorded outcomes still in the window (count and age). */
  errorRatio(): { errors: number; sample: number } {
    this.#expire();
    return { errors: this.#errors, sample: this.#count };
  }

  /** True while the internal-error ratio alone takes the replica out of its Service (portal_readiness_error_gate_tripped). */
  errorGateTripped(): boolean {
    this.#expire();
    return this.#count >= this.#minSample && this.#errors / this.#count > this.#maxErrorRatio;
  }

  status(): ReadinessStatus {
    const reasons = this.sourceReasons();
    if (this.errorGateTripped()) {
      reasons.push(
        `internal errors: ${this.#errors} of the last ${this.#count} admission requests within ${formatDuration(this.#maxAgeMs)} (more than ${this.#maxErrorRatio * 100}%); ready again once fewer are that recent`,
      );
    }
    return { ready: reasons.length === 0, reasons };
  }
}
