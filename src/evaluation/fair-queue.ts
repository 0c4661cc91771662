/**
 * Fair queuing of evaluations by flow (issue 31 item 2), in the spirit of
 * the API server's Priority and Fairness: every evaluation belongs to a flow
 * (flows.ts: one per namespace, cluster-scoped objects and Portal's own
 * kinds in their own), each flow has its own FIFO, and the next evaluation
 * is taken across flows by deficit round robin, so a flow that floods waits
 * behind its own load and never in front of another's.
 *
 * Deficit round robin charged by measured time: the cost of an evaluation
 * is only known once a worker has run it, and a tenant's rule can take
 * 1,000 times what a typical one does. So a flow, on its turn, earns
 * `quantumMs`; taking an evaluation reserves the flow's recent mean cost
 * (`cost`, a moving average) against that credit; when the worker reports
 * what the evaluation really took (the batcher reads it from the progress
 * slot), the reservation is replaced by the measured time. A flow whose
 * evaluations ran long is in debt and is passed over, turn after turn,
 * until the other flows' turns have paid it back; when every waiting flow
 * is in debt, the rounds that would change nothing are skipped at once.
 * A flow that empties forfeits unused credit (no banking while idle) but
 * keeps its debt while it still has evaluations in flight.
 *
 * Pure bookkeeping, no timers and no workers (the batcher has those).
 */

/** What the queue needs of an evaluation. */
export interface Queued {
  readonly flow: Flow;
  /** Settled elsewhere (expired, refused): skipped and dropped when met. */
  readonly settled: boolean;
  /** Sent alone (a retry after an abandon). */
  readonly solo: boolean;
  /** Epoch ms by which a worker must have started it. */
  readonly startBy: number;
  /** The flow's cost reserved when it was taken (ms); 0 once settled against a measurement. */
  reserved: number;
}

/** A FIFO with O(1) push, shift and unshift; a slot is cleared when its item leaves (the array may be old-generation). */
export class Deque<T> {
  #items: (T | undefined)[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  peek(): T | undefined {
    return this.#items[this.#head];
  }

  push(x: T): void {
    this.#items.push(x);
  }

  unshift(x: T): void {
    if (this.#head > 0) this.#items[--this.#head] = x;
    else this.#items.unshift(x);
  }

  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const x = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    if (this.#head === this.#items.length) {
      this.#items = [];
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return x;
  }

  *[Symbol.iterator](): Generator<T> {
    for (let i = this.#head; i < this.#items.length; i++) yield this.#items[i] as T;
  }
}

export interface Flow {
  readonly key: string;
  /** Evaluations waiting (settled ones are dropped when met). */
  readonly waiting: Deque<Queued>;
  /** Credit in ms of worker time: positive, it may take; zero or less, it is passed over. */
  deficit: number;
  /** Moving mean of its measured evaluations (ms): what taking one reserves. */
  cost: number;
  /** Submitted and not settled (waiting or on a worker): the flow's share of the queue bound. */
  pending: number;
  /** In the rotation (has waiting evaluations). */
  active: boolean;
  /** Its turn has begun (it earned this round's quantum). */
  turn: boolean;
}

/** The cost a flow starts with, and the least any evaluation reserves: a typical review's evaluation (docs/benchmarks.md). */
export const MIN_COST_MS = 0.02;
/** Weight of the newest measurement in a flow's moving mean. */
const COST_WEIGHT = 0.25;

export class FairQueue<T extends Queued> {
  readonly #quantumMs: number;
  readonly #flows = new Map<string, Flow>();
  /** Flows with waiting evaluations, in turn order. */
  readonly #rotation = new Deque<Flow>();
  /** Evaluations in the flows' queues (settled ones included until they are met). */
  #length = 0;

  constructor(quantumMs: number) {
    this.#quantumMs = quantumMs;
  }

  /** The flow of `key`, created on first use (forgotten once idle: see settled()). */
  flow(key: string): Flow {
    let f = this.#flows.get(key);
    if (f === undefined) {
      f = { key, waiting: new Deque(), deficit: 0, cost: MIN_COST_MS, pending: 0, active: false, turn: false };
      this.#flows.set(key, f);
    }
    return f;
  }

  /** Evaluations waiting, settled ones not yet dropped included (O(1); waiting() counts exactly). */
  get length(): number {
    return this.#length;
  }

  /** Flows known (waiting or in flight): for /debug/vars. */
  get flows(): number {
    return this.#flows.size;
  }

  /** Queues a new evaluation (counted in its flow's pending); a solo one (a retry) goes first: it is older than what waits. */
  push(item: T): void {
    item.flow.pending++;
    this.#enqueue(item, item.solo);
  }

  /** Queues again, at the front of each one's flow and in order, evaluations taken back from a batch; their reservations are returned. */
  putBack(items: readonly T[]): void {
    for (let i = items.length - 1; i >= 0; i--) {
      const it = items[i]!;
      it.flow.deficit += it.reserved;
      it.reserved = 0;
      this.#enqueue(it, true);
    }
  }

  #enqueue(item: T, front: boolean): void {
    const f = item.flow;
    this.#length++;
    if (front) f.waiting.unshift(item);
    else f.waiting.push(item);
    if (!f.active) {
      f.active = true;
      f.turn = false;
      // A flow that was idle and owes nothing goes first, as FQ-CoDel serves new (sparse) flows first: a
      // tenant sending now and then is answered at once, not after a turn of every flow in debt.
      if (f.deficit >= 0) this.#rotation.unshift(f);
      else this.#rotation.push(f);
    }
  }

  /**
   * Up to `size` evaluations, by deficit round robin across the flows: the
   * first waiting one alone if it is solo; otherwise none that is. With a
   * `budgetMs`, the evaluations' reserved costs add up to at most that, and
   * flows whose mean cost alone is over it are passed over (they keep their
   * turn): what is sent to a busy worker must not hold it long.
   */
  take(size: number, budgetMs = Number.POSITIVE_INFINITY): T[] {
    const out: T[] = [];
    let passed = 0;
    let over = 0;
    let spent = 0;
    while (out.length < size) {
      const f = this.#rotation.peek();
      if (f === undefined) break;
      if (spent + Math.max(MIN_COST_MS, f.cost) > budgetMs) {
        if (out.length > 0 || ++over >= this.#rotation.length) break;
        this.#rotation.shift();
        this.#rotation.push(f);
        continue;
      }
      if (!f.turn) {
        f.turn = true;
        f.deficit += this.#quantumMs;
      }
      const it = f.waiting.peek() as T | undefined;
      if (it === undefined || it.settled) {
        this.#shift(f);
        if (f.waiting.length === 0) this.#retire(f);
        continue;
      }
      if (f.deficit <= 0) {
        this.#endTurn(f);
        // Every waiting flow is in debt: skip the rounds in which none could take.
        if (++passed >= this.#rotation.length) {
          this.#fastForward();
          passed = 0;
        }
        continue;
      }
      passed = 0;
      if (it.solo && out.length > 0) break;
      this.#shift(f);
      it.reserved = Math.max(MIN_COST_MS, f.cost);
      f.deficit -= it.reserved;
      spent += it.reserved;
      out.push(it);
      if (f.waiting.length === 0) this.#retire(f);
      else if (f.deficit <= 0) this.#endTurn(f);
      if (it.solo) break;
    }
    return out;
  }

  /** The evaluations waiting past their `startBy` (removed from their flows), and settled ones dropped on the way. */
  expired(now: number): T[] {
    const out: T[] = [];
    const n = this.#rotation.length;
    for (let k = 0; k < n; k++) {
      const f = this.#rotation.shift()!;
      for (let it = f.waiting.peek(); it !== undefined && (it.settled || it.startBy <= now); it = f.waiting.peek()) {
        this.#shift(f);
        if (!it.settled) out.push(it as T);
      }
      if (f.waiting.length === 0) {
        f.active = false;
        f.turn = false;
        if (f.deficit > 0) f.deficit = 0;
        if (f.pending <= 0) this.#flows.delete(f.key);
      } else this.#rotation.push(f);
    }
    return out;
  }

  /**
   * What an evaluation of `flow` really cost (ms), measured by its worker,
   * in place of what taking it reserved (`reserved`, returned here).
   */
  charge(flow: Flow, measuredMs: number, reserved: number): void {
    flow.deficit += reserved - measuredMs;
    flow.cost += COST_WEIGHT * (measuredMs - flow.cost);
  }

  /**
   * An evaluation of `flow` is settled. A flow with nothing waiting or in
   * flight is forgotten, debt included: a namespace that floods stays in
   * debt as long as it keeps evaluations in flight, and the map holds only
   * the flows in use.
   */
  settled(flow: Flow): void {
    flow.pending--;
    if (flow.pending <= 0 && !flow.active) this.#flows.delete(flow.key);
  }

  /** Every unsettled waiting evaluation (for counts and for refusing them at close). */
  *waiting(): Generator<T> {
    for (const f of this.#flows.values()) for (const it of f.waiting) if (!it.settled) yield it as T;
  }

  #shift(f: Flow): void {
    if (f.waiting.shift() !== undefined) this.#length--;
  }

  #endTurn(f: Flow): void {
    f.turn = false;
    this.#rotation.shift();
    this.#rotation.push(f);
  }

  /** A flow with nothing waiting leaves the rotation; unused credit is not kept (no banking while idle), debt is. */
  #retire(f: Flow): void {
    this.#rotation.shift();
    f.active = false;
    f.turn = false;
    if (f.deficit > 0) f.deficit = 0;
    if (f.pending <= 0) this.#flows.delete(f.key);
  }

  /** Adds to every flow in the rotation the quanta of the fewest rounds after which one of them can take. */
  #fastForward(): void {
    let rounds = Number.POSITIVE_INFINITY;
    for (const f of this.#rotation) rounds = Math.min(rounds, Math.floor(-f.deficit / this.#quantumMs) + 1);
    if (!Number.isFinite(rounds)) return;
    for (const f of this.#rotation) f.deficit += rounds * this.#quantumMs;
  }
}
