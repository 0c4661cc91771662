/**
 * Per-rule admission results and evaluation times, counted where rules run
 * (the evaluation workers) in shared memory that the main thread reads at
 * scrape time (issue 33: `portal_admission_results_total`,
 * `portal_admission_rule_duration_seconds`).
 *
 * Why shared memory: a review matches a dozen rules, and the main thread is
 * what limits a replica's rate (adr/0013). A message per observation, or
 * counts shipped with every batch, would cost the main thread a clone and a
 * fold per answer; here a worker adds to its own page (plain stores: one
 * writer per page) and the main thread sums the pages only when /metrics is
 * scraped. A worker's counts are written before it answers the batch, so a
 * scrape after an answer sees them.
 *
 * One page per worker thread, a SharedArrayBuffer: a header (the slots in
 * use), then one slot per (rule, enforcement) the worker has seen:
 * the result counts, the sum and count of the timed evaluations, the
 * histogram buckets (not cumulative; +Inf is the count), the enforcement,
 * and the rule's display name in UTF-8. The name is published before the
 * slot count (Atomics), so a reader never sees a slot without its name.
 * A page starts small; a worker that fills it starts a new one twice the
 * size, at most {@link MAX_SLOTS} (the main thread keeps the old page's
 * counts, of the rules still in force: rule churn costs a bounded amount).
 */
import type { Enforcement } from '../policy/types.ts';

/** The `result` label: a rule's verdict at admission (`skip`: a PortalException exempted the request). */
export const RESULTS = ['pass', 'fail', 'warn', 'error', 'skip'] as const;
export type ResultLabel = (typeof RESULTS)[number];
export const RESULT_INDEX: Readonly<Record<ResultLabel, number>> = { pass: 0, fail: 1, warn: 2, error: 3, skip: 4 };

export const ENFORCEMENTS: readonly Enforcement[] = ['Deny', 'Warn', 'Audit'];

/** Seconds: one rule's CEL and schema on one object, normally tens of microseconds; the evaluation deadline bounds it. */
export const RULE_DURATION_BUCKETS = [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

/** Float64 offsets within a slot. */
export const SUM = RESULTS.length;
export const COUNT = SUM + 1;
export const BUCKET0 = COUNT + 1;
const ENFORCEMENT = BUCKET0 + RULE_DURATION_BUCKETS.length;
/** Int32 index (within the slot's words) of the name's byte length, written last. */
const NAME_LENGTH_WORD = (ENFORCEMENT + 1) * 2;
const NAME_OFFSET = (ENFORCEMENT + 1) * 8 + 8;
/** `namespace/name` of a PortalRule: 63 + 1 + 253 bytes. */
const MAX_NAME = 320;
export const SLOT_BYTES = Math.ceil((NAME_OFFSET + MAX_NAME) / 64) * 64;
const HEADER_BYTES = 64;
export const MAX_SLOTS = 4096;
const INITIAL_SLOTS = 16;

/** A slot as the reader sees it. */
export interface SlotView {
  rule: string;
  enforcement: Enforcement;
  /** The page's doubles, and where this slot's start. */
  values: Float64Array;
  base: number;
}

/**
 * A page of `slots` slots. Not a growable SharedArrayBuffer: V8's
 * length-tracking views over one cost ~300 ns per element access (measured
 * here), a fixed one a few ns. A full page is replaced by one twice its size.
 */
function newPage(slots: number): SharedArrayBuffer {
  return new SharedArrayBuffer(HEADER_BYTES + slots * SLOT_BYTES);
}

/** What the writer needs of a rule: the evaluator's RuleEntry fits. */
export interface RuleIdentity {
  readonly display: string;
  readonly enforcement: Enforcement;
}

/** A worker's writer: one per thread. */
export class RuleStatsWriter {
  #capacity = INITIAL_SLOTS;
  #page = newPage(this.#capacity);
  #values = new Float64Array(this.#page);
  #words = new Int32Array(this.#page);
  #bytes = new Uint8Array(this.#page);
  /** Slot of a rule entry (an entry is replaced, not changed, when its rule changes). */
  #byEntry = new WeakMap<RuleIdentity, number>();
  #byName = new Map<string, number>();
  readonly #encoder = new TextEncoder();
  readonly #announce: (page: SharedArrayBuffer) => void;

  /** `announce` tells the main thread about each page (the first at once). */
  constructor(announce: (page: SharedArrayBuffer) => void) {
    this.#announce = announce;
    announce(this.#page);
  }

  /** One rule's result; `seconds` < 0: not timed (an exemption: no rule code ran). */
  record(rule: RuleIdentity, result: number, seconds: number): void {
    const slot = this.#byEntry.get(rule) ?? this.#slot(rule);
    const v = this.#values;
    const base = slot * (SLOT_BYTES / 8) + HEADER_BYTES / 8;
    v[base + result]! += 1;
    if (seconds < 0) return;
    v[base + SUM]! += seconds;
    v[base + COUNT]! += 1;
    let b = 0;
    // The first bound >= the value, as prom-client's findBound; past the last bound only +Inf (the count) holds it.
    while (b < RULE_DURATION_BUCKETS.length && seconds > RULE_DURATION_BUCKETS[b]!) b++;
    if (b < RULE_DURATION_BUCKETS.length) v[base + BUCKET0 + b]! += 1;
  }

  #slot(rule: RuleIdentity): number {
    const name = `${rule.display}\u0000${rule.enforcement}`;
    let slot = this.#byName.get(name);
    if (slot === undefined) {
      let used = Atomics.load(this.#words, 0);
      if (used >= this.#capacity) {
        this.#replacePage(Math.min(MAX_SLOTS, this.#capacity * 2));
        used = 0;
      }
      slot = used;
      const start = HEADER_BYTES + slot * SLOT_BYTES;
      const encoded = this.#encoder.encode(rule.display).subarray(0, MAX_NAME);
      this.#bytes.set(encoded, start + NAME_OFFSET);
      this.#values[start / 8 + ENFORCEMENT] = ENFORCEMENTS.indexOf(rule.enforcement);
      Atomics.store(this.#words, start / 4 + NAME_LENGTH_WORD, encoded.length);
      Atomics.store(this.#words, 0, slot + 1);
      this.#byName.set(name, slot);
    }
    this.#byEntry.set(rule, slot);
    return slot;
  }

  /** A new, empty page: the main thread keeps the old one's counts (rule-stats.ts) once it hears of the new one. */
  #replacePage(capacity: number): void {
    this.#capacity = capacity;
    this.#page = newPage(capacity);
    this.#values = new Float64Array(this.#page);
    this.#words = new Int32Array(this.#page);
    this.#bytes = new Uint8Array(this.#page);
    this.#byEntry = new WeakMap();
    this.#byName = new Map();
    this.#announce(this.#page);
  }
}

/** The reader's view of one page: its slots, names decoded once. */
export class PageReader {
  readonly #values: Float64Array;
  readonly #words: Int32Array;
  readonly #bytes: Uint8Array;
  readonly #decoder = new TextDecoder();
  readonly #slots: SlotView[] = [];

  constructor(page: SharedArrayBuffer) {
    this.#values = new Float64Array(page);
    this.#words = new Int32Array(page);
    this.#bytes = new Uint8Array(page);
  }

  /** Every slot published so far. */
  slots(): readonly SlotView[] {
    const used = Math.min(Atomics.load(this.#words, 0), (this.#values.byteLength - HEADER_BYTES) / SLOT_BYTES);
    for (let slot = this.#slots.length; slot < used; slot++) {
      const start = HEADER_BYTES + slot * SLOT_BYTES;
      const length = Atomics.load(this.#words, start / 4 + NAME_LENGTH_WORD);
      const rule = this.#decoder.decode(this.#bytes.slice(start + NAME_OFFSET, start + NAME_OFFSET + length));
      const enforcement = ENFORCEMENTS[this.#values[start / 8 + ENFORCEMENT]!] ?? 'Deny';
      this.#slots.push({ rule, enforcement, values: this.#values, base: start / 8 });
    }
    return this.#slots;
  }
}

/** Doubles of a slot's counts (results, sum, count, buckets). */
export const SLOT_VALUES = BUCKET0 + RULE_DURATION_BUCKETS.length;
