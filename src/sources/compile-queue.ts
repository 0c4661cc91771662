/**
 * Paces rule compiles (issue 31 item 5): a RuleSink in front of the
 * RuleSet that lets compiling rules take at most a share of the replica's
 * time, and shares that time fairly between namespaces.
 *
 * Why: a rule version is compiled on the main thread and again on every
 * evaluation thread (adr/0013), each compile a synchronous block of ajv
 * code generation (a 62 KB schema: ~0.1–0.3 s). Applied as fast as the
 * informer delivers them, one tenant creating 100 such rules kept every
 * evaluation thread compiling back to back: the reviews of every other
 * namespace waited behind the compiles (they are evaluated at the revision
 * the main thread holds) until their deadline passed before they started.
 *
 * How: an upsert that arrives while no compile is owed runs at once (the
 * usual case: one edit, in force before the next review). After each
 * upsert the queue measures how long it took (d) and owes a pause of
 * d × (1 − share) / share before the next one; upserts arriving meanwhile
 * wait, one FIFO per namespace (cluster-scoped rules in their own), taken
 * round robin, so a namespace that queues 100 rules delays another
 * namespace's rule by one turn, not by 100. A rule updated again while it
 * waits keeps its place with its latest version; a rule deleted while it
 * waits is dropped. Deletes and exceptions are not queued (no compile).
 *
 * Before the informers have listed once everything is applied at once: the
 * replica is not ready then, and it must hold every rule before it is.
 */
import type { KubeObject, PortalRuleObject } from '../policy/types.ts';
import type { RuleSink } from './rule-informers.ts';

export interface CompileQueueConfig {
  /** The share of wall time rule upserts may take (0 < share ≤ 1). @default 0.25 */
  share?: number | undefined;
  /** The RuleSet's key of a rule. */
  ruleKey: (rule: PortalRuleObject) => string;
  /** Whether to pace yet (the informers have listed once); before, upserts apply at once. */
  pacing: () => boolean;
  /** A queued upsert the sink threw on (the direct path's caller handles its own). */
  onError: (rule: PortalRuleObject, err: unknown) => void;
  /** Clock in ms (tests). @default performance.now */
  now?: () => number;
}

export class CompileQueue implements RuleSink {
  readonly #sink: RuleSink;
  readonly #share: number;
  readonly #key: (rule: PortalRuleObject) => string;
  readonly #pacing: () => boolean;
  readonly #now: () => number;
  readonly #onError: (rule: PortalRuleObject, err: unknown) => void;
  /** Waiting upserts by namespace ('' for cluster rules), each a FIFO of rule keys; Map order is the round robin. */
  readonly #waiting = new Map<string, Map<string, PortalRuleObject>>();
  #size = 0;
  /** When the pause owed by the last upsert ends (ms, on #now). */
  #freeAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(sink: RuleSink, config: CompileQueueConfig) {
    const share = config.share ?? 0.25;
    if (!(share > 0 && share <= 1)) throw new Error(`compile share must be in (0, 1], got ${share}`);
    this.#sink = sink;
    this.#share = share;
    this.#key = config.ruleKey;
    this.#pacing = config.pacing;
    this.#now = config.now ?? (() => performance.now());
    this.#onError = config.onError;
  }

  /** Upserts waiting for their turn. */
  get waiting(): number {
    return this.#size;
  }

  /** Waiting upserts per namespace ('' for cluster rules), for /debug/vars. */
  waitingByNamespace(): Record<string, number> {
    return Object.fromEntries([...this.#waiting].map(([ns, q]) => [ns, q.size]));
  }

  upsert(rule: PortalRuleObject): unknown {
    if (this.#closed || !this.#pacing() || (this.#size === 0 && this.#now() >= this.#freeAt)) return this.#apply(rule);
    const ns = rule.metadata?.namespace ?? '';
    let queue = this.#waiting.get(ns);
    if (queue === undefined) this.#waiting.set(ns, (queue = new Map()));
    const key = this.#key(rule);
    if (!queue.has(key)) this.#size++;
    queue.set(key, rule); // an update keeps the key's place (Map order), with its latest version
    this.#schedule();
    return undefined;
  }

  remove(key: string): unknown {
    for (const [ns, queue] of this.#waiting) {
      if (!queue.delete(key)) continue;
      this.#size--;
      if (queue.size === 0) this.#waiting.delete(ns);
    }
    return this.#sink.remove(key);
  }

  upsertException(exception: KubeObject): unknown {
    return this.#sink.upsertException(exception);
  }

  removeException(key: string): unknown {
    return this.#sink.removeException(key);
  }

  /** Applies everything still waiting at once and stops pacing (the replica is stopping). */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#size > 0) this.#next();
  }

  #apply(rule: PortalRuleObject): unknown {
    const started = this.#now();
    try {
      return this.#sink.upsert(rule);
    } finally {
      const ended = this.#now();
      this.#freeAt = ended + ((ended - started) * (1 - this.#share)) / this.#share;
    }
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#size === 0) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#now() >= this.#freeAt) this.#next();
      this.#schedule();
    }, Math.max(0, Math.ceil(this.#freeAt - this.#now())));
    // Pacing never keeps a process alive by itself.
    this.#timer.unref();
  }

  /** The first rule of the namespace whose turn it is; the namespace goes to the back of the round. */
  #next(): void {
    const first = this.#waiting.entries().next();
    if (first.done) return;
    const [ns, queue] = first.value;
    const head = queue.entries().next();
    this.#waiting.delete(ns);
    if (head.done) return;
    const [key, rule] = head.value;
    queue.delete(key);
    this.#size--;
    if (queue.size > 0) this.#waiting.set(ns, queue);
    try {
      this.#apply(rule);
    } catch (err) {
      // One rule never stops the others.
      this.#onError(rule, err);
    }
  }
}
