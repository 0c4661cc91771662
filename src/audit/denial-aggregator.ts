/**
 * The Events of denied requests, aggregated in memory as client-go's
 * EventRecorder aggregates (its EventCorrelator): the same involved object,
 * reason and message is one Event whose `count` grows, and the writer
 * (denial-events.ts) creates it once and patches its count afterwards.
 *
 * Bounded whatever a tenant does: at most `perNamespace` Events are held per
 * namespace (a new one evicts that namespace's least recently denied), and at
 * most `maxEntries` in all (a new one evicts from the namespace holding the
 * most). So a tenant denied for thousands of different objects evicts its
 * own Events, never another namespace's. Entries not denied again for
 * `forgetMs` are forgotten (client-go's aggregation window is 10 minutes;
 * the API server deletes Events after its --event-ttl, 1 h by default).
 *
 * Pure: no I/O, an injectable clock.
 */

/** What one denied request is recorded as. */
export interface DenialFact {
  /** Where the Event goes: the object's namespace, `default` for a cluster-scoped object. */
  namespace: string;
  involvedObject: { apiVersion: string; kind: string; name: string; namespace?: string };
  reason: string;
  message: string;
}

export interface DenialEntry {
  readonly key: string;
  readonly fact: DenialFact;
  /** Denials seen (the Event's count once written). */
  count: number;
  /** The count the API server has (0: not created yet). */
  written: number;
  /** The Event's name once created. */
  eventName?: string;
  firstAt: number;
  lastAt: number;
}

export interface AggregatorOptions {
  /** @default 4096 (client-go's LRU cache size) */
  maxEntries?: number;
  /** @default 64 */
  perNamespace?: number;
  /** @default 10 min */
  forgetMs?: number;
  /** @default Date.now */
  now?: () => number;
}

export class DenialAggregator {
  readonly #max: number;
  readonly #perNamespace: number;
  readonly #forgetMs: number;
  readonly #now: () => number;
  /** Namespace → its entries, least recently denied first. */
  readonly #byNamespace = new Map<string, Map<string, DenialEntry>>();
  #size = 0;
  /** Entries evicted before their count was written (the denials in them are not in any Event). */
  evictedUnwritten = 0;

  constructor(o: AggregatorOptions = {}) {
    this.#max = o.maxEntries ?? 4096;
    this.#perNamespace = o.perNamespace ?? 64;
    this.#forgetMs = o.forgetMs ?? 10 * 60_000;
    this.#now = o.now ?? Date.now;
  }

  /** The aggregation key: involved object, reason and message, as client-go's. */
  static key(f: DenialFact): string {
    const o = f.involvedObject;
    return JSON.stringify([f.namespace, o.apiVersion, o.kind, o.namespace ?? '', o.name, f.reason, f.message]);
  }

  /** Records one denial: a new entry (count 1) or one more on the entry of the same key. O(1) unless it evicts. */
  note(fact: DenialFact): DenialEntry {
    const now = this.#now();
    const key = DenialAggregator.key(fact);
    let ns = this.#byNamespace.get(fact.namespace);
    const found = ns?.get(key);
    if (found !== undefined && now - found.lastAt < this.#forgetMs) {
      found.count++;
      found.lastAt = now;
      // Most recently denied last.
      ns!.delete(key);
      ns!.set(key, found);
      return found;
    }
    if (found !== undefined) this.#remove(fact.namespace, key);
    ns = this.#byNamespace.get(fact.namespace);
    if (ns !== undefined && ns.size >= this.#perNamespace) this.#evictOldest(fact.namespace);
    else if (this.#size >= this.#max) this.#evictOldest(this.#largestNamespace());
    ns = this.#byNamespace.get(fact.namespace);
    if (ns === undefined) this.#byNamespace.set(fact.namespace, (ns = new Map()));
    const entry: DenialEntry = { key, fact, count: 1, written: 0, firstAt: now, lastAt: now };
    ns.set(key, entry);
    this.#size++;
    return entry;
  }

  /** Entries whose count is not yet what the API server has, namespace by namespace. */
  *unwritten(): Generator<{ namespace: string; entries: DenialEntry[] }> {
    for (const [namespace, ns] of this.#byNamespace) {
      const entries = [...ns.values()].filter((e) => e.count > e.written);
      if (entries.length > 0) yield { namespace, entries };
    }
  }

  /** Whether any count is not yet written. */
  get dirty(): boolean {
    for (const ns of this.#byNamespace.values()) for (const e of ns.values()) if (e.count > e.written) return true;
    return false;
  }

  /** Forgets the entries not denied for `forgetMs`. */
  sweep(): void {
    const now = this.#now();
    for (const [namespace, ns] of this.#byNamespace) {
      for (const [key, e] of ns) if (now - e.lastAt >= this.#forgetMs && e.count === e.written) this.#remove(namespace, key);
    }
  }

  get size(): number {
    return this.#size;
  }

  get namespaces(): number {
    return this.#byNamespace.size;
  }

  #largestNamespace(): string {
    let largest = '';
    let most = -1;
    for (const [namespace, ns] of this.#byNamespace) {
      if (ns.size > most) {
        most = ns.size;
        largest = namespace;
      }
    }
    return largest;
  }

  #evictOldest(namespace: string): void {
    const oldest = this.#byNamespace.get(namespace)?.values().next();
    if (oldest === undefined || oldest.done) return;
    if (oldest.value.count > oldest.value.written) this.evictedUnwritten++;
    this.#remove(namespace, oldest.value.key);
  }

  #remove(namespace: string, key: string): void {
    const ns = this.#byNamespace.get(namespace);
    if (ns?.delete(key) !== true) return;
    this.#size--;
    if (ns.size === 0) this.#byNamespace.delete(namespace);
  }
}
