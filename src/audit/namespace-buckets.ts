/**
 * A token bucket per namespace, for the Events Portal writes (issue 31): a
 * tenant who creates 150 failing rules, or floods exceptions, gets a burst
 * of Events in its namespace and then one per refill interval; the rest are
 * dropped and counted, and the other namespaces' Events are untouched. In
 * the spirit of the API server's EventRateLimit admission plugin (its
 * `Namespace` limit type) and client-go's event spam filter (burst 25).
 *
 * A namespace whose bucket has refilled is forgotten, so the map holds only
 * namespaces that wrote recently.
 */

export interface BucketOptions {
  /** Events a quiet namespace may write at once. */
  burst: number;
  /** One more Event per this many milliseconds. */
  refillMs: number;
  /** @default Date.now */
  now?: () => number;
}

/** 25 at once, then one every 10 s per namespace: client-go's burst, a tenant's failing rules still show within minutes. */
export const EVENT_BUCKETS: Readonly<BucketOptions> = Object.freeze({ burst: 25, refillMs: 10_000 });

interface Bucket {
  tokens: number;
  at: number;
  /** Dropped since the drop was last reported ({@link NamespaceBuckets.take}'s `report`). */
  unreported: number;
  reportedAt: number;
}

/** How often the drops of one namespace are reported (logged), at most. */
const REPORT_MS = 60_000;
/** Sweep refilled buckets when more namespaces than this are held. */
const SWEEP_AT = 1_000;

export class NamespaceBuckets {
  readonly #o: Required<BucketOptions>;
  readonly #buckets = new Map<string, Bucket>();
  /** Events dropped, all namespaces. */
  dropped = 0;

  constructor(o: BucketOptions = EVENT_BUCKETS) {
    this.#o = { now: Date.now, ...o };
  }

  #refilled(b: Bucket, now: number): number {
    return Math.min(this.#o.burst, b.tokens + (now - b.at) / this.#o.refillMs);
  }

  /**
   * Takes a token of `namespace`: true when the Event may be written. When
   * not, `report` is called at most once a minute per namespace with the
   * Events dropped there since the last report.
   */
  take(namespace: string, report?: (dropped: number) => void): boolean {
    const now = this.#o.now();
    let b = this.#buckets.get(namespace);
    if (b === undefined) {
      if (this.#buckets.size >= SWEEP_AT) this.#sweep(now);
      b = { tokens: this.#o.burst, at: now, unreported: 0, reportedAt: -Infinity };
      this.#buckets.set(namespace, b);
    }
    b.tokens = this.#refilled(b, now);
    b.at = now;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return true;
    }
    this.dropped++;
    b.unreported++;
    if (report && now - b.reportedAt >= REPORT_MS) {
      report(b.unreported);
      b.unreported = 0;
      b.reportedAt = now;
    }
    return false;
  }

  /** Namespaces held (for /debug/vars and tests). */
  get size(): number {
    return this.#buckets.size;
  }

  #sweep(now: number): void {
    for (const [ns, b] of this.#buckets) if (this.#refilled(b, now) >= this.#o.burst) this.#buckets.delete(ns);
  }
}
