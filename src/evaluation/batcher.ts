/**
 * Batches evaluations into pool tasks, takes them fairly across flows, and
 * enforces their deadlines (adr/0013, "Batches"; issue 31 item 2).
 *
 * Why batches: each piscina task costs a thread hand-off each way (a
 * message, the worker's wake-up, the answer's wake-up of the main thread).
 * On a busy 2-core machine that measured 25–65 µs of CPU per task, more than
 * the evaluation of a typical review (docs/benchmarks.md). So a task is
 * sent only when a worker can take it (`batches`: one running and one
 * waiting per worker), and carries every evaluation that waited meanwhile
 * (up to `maxBatch`): on an idle pool a request goes alone and at once
 * (after the current event-loop turn, which gathers the requests that
 * arrived together); under load the hand-off is shared by the batch.
 *
 * Which evaluations a batch takes: fair-queue.ts, deficit round robin across
 * flows (a namespace, cluster-scoped objects, Portal's kinds), charged with
 * the time each evaluation really took its worker (the worker writes it in
 * the slot). A batch estimated to run long (`heavyMs`, from its flows' mean
 * costs) is sent only to an idle worker, never queued on the port of a busy
 * one (another flow's evaluation sent after it would wait behind it there),
 * and such batches hold at most all workers but one, so cheap evaluations
 * never wait for a slow one to end.
 *
 * What batching must not cost (issue 16): one slow evaluation must not hold
 * the others of its batch. The worker claims items one at a time from a
 * counter in shared memory. A batch still running `reclaimMs` after it was
 * sent is taken back: the counter is closed (the worker stops after the
 * item it is on) and every item but that one is queued again, to be sent
 * with the next batch; the results of those that had finished are lost and
 * they are evaluated again (cheap: they were fast). The same holds for a
 * batch waiting on a worker's port behind a slow one (threads.ts,
 * pipelineBalancer), even of one item: none of it started, all of it goes
 * back.
 *
 * Deadlines: an evaluation's time budget (`timeoutMs`) starts when a worker
 * claims it, so neither a queue nor a replacement worker's start-up eats
 * it; it never runs past the item's `end` (when the request must be
 * answered), and an item not claimed by its `startBy` is settled as never
 * started. The worker computes its own cooperative deadline from its claim;
 * the ticker (every `tickMs` while anything is in flight, rather than a
 * timer per item, which cost more than a typical evaluation) sees the claim
 * in the slot at most `tickMs` late, and at that deadline + `graceMs`
 * terminates the worker (the task's signal): the item is settled as
 * abandoned, with the rule that was running (read from the slot).
 */
import type { Logger } from 'pino';
import { LogKey } from '../observability/log-keys.ts';
import { toError } from '../observability/errors.ts';
import { FairQueue, type Flow } from './fair-queue.ts';
import { ProgressSlots } from './progress.ts';
import { epochNow, SLOT_BYTES, type ItemBody, type Task, type TaskOutcomes } from './protocol.ts';
import { splitPacked } from './packed-review.ts';
import { TaskAbort } from './task-abort.ts';
import { isTermination, release, type Attempt, type Batch, type Item } from './batch-items.ts';
import { isOutOfMemory } from './thread-memory.ts';

export interface BatcherConfig {
  /** Worker threads: at most this many batches are active while one of them is heavy. */
  workers: number;
  /** Batches sent at once (the workers', and one waiting on each). */
  batches: number;
  /** Evaluations one batch carries at most. */
  maxBatch: number;
  timeoutMs: number;
  graceMs: number;
  /** How long one first-use rule compile (protocol.ts) may run before the item is abandoned, unless the request's bound comes first. */
  compileMs: number;
  /** How long a batch may run before the items it has not finished are taken back and sent again. */
  reclaimMs: number;
  /** How often deadlines and batches are checked. */
  tickMs: number;
  /** A flow's credit per turn of the fair queue (ms of worker time). */
  quantumMs: number;
  /** A batch estimated to take longer than this (ms) is heavy: sent to an idle worker only. */
  heavyMs: number;
}

export interface BatcherDeps {
  log: Logger;
  /** Runs one task on a worker (piscina's `run`); rejects when the signal aborted it or the worker died. */
  run: (task: Task, signal: TaskAbort) => Promise<TaskOutcomes>;
  /** The policy revision a task is evaluated at. */
  seq: () => number;
  progress: SharedArrayBuffer;
  /** Called with the error a task failed with when the pool is closing (its items reject with it). */
  closedError: (cause: unknown) => Error | undefined;
}

/** When one attempt may start and must end (epoch ms). */
export interface AttemptWindow {
  /** Settled as never started if no worker claimed it by then. */
  startBy: number;
  /** The request's answer is due (Infinity: no one waits). */
  end: number;
}

export class Batcher {
  readonly #config: BatcherConfig;
  readonly #deps: BatcherDeps;
  readonly #slots: ProgressSlots;
  /**
   * Free progress slots. Slots of a terminated worker's task go to the
   * front (reused last): the dying thread may still write to its slot for
   * a moment after its task was rejected.
   */
  readonly #freeSlots: number[];
  /** Items waiting for a worker, by flow. */
  readonly #queue: FairQueue<Item>;
  readonly #active = new Set<Batch>();
  /** Active batches that are heavy. */
  #heavy = 0;
  #ids = 0;
  #dispatchQueued = false;
  #ticker: NodeJS.Timeout | undefined;
  #inFlight = 0;
  #drainWaiters: (() => void)[] = [];
  #batches = 0;
  #items = 0;
  #reclaims = 0;

  constructor(config: BatcherConfig, deps: BatcherDeps) {
    this.#config = config;
    this.#deps = deps;
    this.#slots = new ProgressSlots(deps.progress);
    this.#queue = new FairQueue(config.quantumMs);
    const slots = deps.progress.byteLength / SLOT_BYTES;
    this.#freeSlots = Array.from({ length: slots }, (_, i) => slots - 1 - i);
  }

  /** Evaluations submitted and not settled (waiting or in a batch). */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** The flow of `key` (its `pending` is its share of the queue). */
  flow(key: string): Flow {
    return this.#queue.flow(key);
  }

  /** Evaluations waiting for a worker. */
  waiting(): number {
    let n = 0;
    for (const _ of this.#queue.waiting()) n++;
    return n;
  }

  stats(): { batches: number; batchedItems: number; reclaims: number; flows: number } {
    return { batches: this.#batches, batchedItems: this.#items, reclaims: this.#reclaims, flows: this.#queue.flows };
  }

  /** Resolves once nothing is in flight. */
  drained(): Promise<void> {
    if (this.#inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  /** One attempt at evaluating `body`, queued in `flow`, within `window`. */
  attempt(body: ItemBody, flow: Flow, window: AttemptWindow, abandoned: string[] | undefined, solo: boolean): Promise<Attempt> {
    this.#inFlight++;
    return new Promise<Attempt>((resolve, reject) => {
      const item: Item = { body, flow, end: window.end, startBy: window.startBy, abandoned, solo, settled: false, reserved: 0, batch: undefined, index: -1, resolve, reject };
      this.#queue.push(item);
      this.#ticker ??= setInterval(() => this.#tick(), this.#config.tickMs).unref();
      if (!this.#dispatchQueued) {
        this.#dispatchQueued = true;
        // After this event-loop turn: the requests whose bodies arrived in the same turn travel together.
        setImmediate(() => this.#dispatch());
      }
    });
  }

  #settle(item: Item, attempt: Attempt): void {
    if (item.settled) return;
    const resolve = item.resolve;
    this.#done(item);
    resolve(attempt);
    if (this.#inFlight === 0) for (const w of this.#drainWaiters.splice(0)) w();
  }

  #fail(item: Item, err: unknown): void {
    if (item.settled) return;
    const reject = item.reject;
    this.#done(item);
    reject(err);
    if (this.#inFlight === 0) for (const w of this.#drainWaiters.splice(0)) w();
  }

  /** A settled item lets go of what it held (batch-items.ts, release) and of its flow's share. */
  #done(item: Item): void {
    item.settled = true;
    this.#inFlight--;
    release(item);
    this.#queue.settled(item.flow);
  }

  /** Rejects with `err` the items no one waits for (the audit's) that wait for a worker: the pool closes, they would only delay it. */
  refuseWaiting(err: Error): void {
    for (const it of [...this.#queue.waiting()]) if (it.end === Number.POSITIVE_INFINITY) this.#fail(it, err);
  }

  /** Sends batches while a worker can take one. */
  #dispatch(): void {
    this.#dispatchQueued = false;
    const { workers, batches, maxBatch } = this.#config;
    for (;;) {
      const limit = this.#heavy > 0 ? workers : batches;
      if (this.#active.size >= limit) return;
      // The waiting items are shared among the batches that can be sent now (piscina gives each to the least busy
      // worker), so idle workers run in parallel what one batch would run in sequence.
      const size = Math.min(maxBatch, Math.max(1, Math.ceil(this.#queue.length / (limit - this.#active.size))));
      // To a busy worker's port (no worker idle) only what is estimated to be quick: what follows it there waits.
      // And heavy batches hold at most all workers but one: cheap evaluations, every namespace's common case,
      // always find a worker that is not stuck in someone's slow rule (threads cannot be pre-empted).
      const idle = this.#active.size < workers;
      const heavyRoom = this.#heavy < Math.max(1, workers - 1);
      const items = this.#queue.take(size, idle && heavyRoom ? Number.POSITIVE_INFINITY : this.#config.heavyMs);
      if (items.length === 0) return;
      let estimate = 0;
      for (const it of items) estimate += it.reserved;
      const slot = this.#freeSlots.pop();
      if (slot === undefined) {
        // Cannot happen (there are more slots than batches can be active); keep the items waiting.
        this.#queue.putBack(items);
        return;
      }
      this.#send(items, slot, estimate > this.#config.heavyMs);
    }
  }

  #send(items: Item[], slot: number, heavy: boolean): void {
    const id = (this.#ids = (this.#ids % 0x7fffffff) + 1);
    this.#slots.reset(slot, items.length);
    const now = epochNow();
    const batch: Batch = { items, slot, id, abort: new TaskAbort(), reclaimAt: now + this.#config.reclaimMs, reclaimed: false, heavy, runIndex: -1, runSince: now };
    // Built by push, not preallocated: V8 clones an array with holes element by element, as an object.
    const bodies: ItemBody[] = [];
    const caps: (number | undefined)[] = [];
    let abandoned: (string[] | undefined)[] | undefined;
    const grace = this.#config.graceMs;
    for (let i = 0; i < items.length; i++) {
      const it = items[i]!;
      it.batch = batch;
      it.index = i;
      bodies.push(it.body as ItemBody);
      // The cooperative deadline ends a grace before the answer is due, so the hard one still fits.
      caps.push(it.end === Number.POSITIVE_INFINITY ? undefined : it.end - grace);
      if (it.abandoned !== undefined) abandoned ??= items.map((x) => x.abandoned);
    }
    this.#active.add(batch);
    if (heavy) this.#heavy++;
    this.#batches++;
    this.#items += items.length;
    this.#deps.run({ seq: this.#deps.seq(), slot, id, ms: this.#config.timeoutMs, bodies, deadlines: caps, abandoned }, batch.abort).then(
      (outcomes) => this.#finished(batch, outcomes, undefined),
      (err: unknown) => this.#finished(batch, undefined, err),
    );
  }

  #finished(batch: Batch, answer: TaskOutcomes | undefined, err: unknown): void {
    this.#active.delete(batch);
    if (batch.heavy) this.#heavy--;
    this.#charge(batch, answer === undefined);
    if (answer !== undefined) {
      const outcomes = typeof answer === 'string' ? splitPacked(answer) : answer;
      this.#freeSlots.push(batch.slot);
      for (let i = 0; i < batch.items.length; i++) {
        const it = batch.items[i]!;
        if (it.settled) continue;
        const o = outcomes[i];
        // Undefined: taken back before the worker claimed it (queued again then), or a claim lost to a dying
        // worker's write (queued again below).
        if (o === undefined) continue;
        if (typeof o === 'string') this.#settle(it, { ok: true, value: o });
        else if ('ok' in o) this.#settle(it, { ok: true, value: o.ok });
        else {
          this.#deps.log.error({ [LogKey.rule]: o.thrown }, 'evaluation threw (a bug): handled as abandoned');
          this.#settle(it, { ok: false, running: o.thrown, started: true });
        }
      }
    } else {
      this.#freeSlots.unshift(batch.slot);
      const closed = this.#deps.closedError(err);
      const running = this.#slots.runningIndex(batch.slot, batch.id);
      const key = this.#slots.runningKey(batch.slot, batch.id);
      // A batch waiting behind one whose worker was terminated at its deadline fails with piscina's
      // termination error: expected, its items are queued again below.
      if (closed === undefined && !batch.abort.aborted && !isTermination(err)) this.#deps.log.warn({ [LogKey.error]: toError(err) }, 'evaluation worker lost during a task');
      const outOfMemory = isOutOfMemory(err);
      for (let i = 0; i < batch.items.length; i++) {
        const it = batch.items[i]!;
        if (it.settled || it.batch !== batch) continue;
        if (closed !== undefined) this.#fail(it, closed);
        // The thread died of its memory before any item ran (receiving the batch): alone, an item that does not fit fails; in a batch, each goes again alone.
        else if (outOfMemory && running < 0 && batch.items.length === 1 && it.solo) this.#settle(it, { ok: false, running: undefined, started: true, outOfMemory: true });
        else if (outOfMemory && running < 0) it.solo = true;
        // Aborted at the deadline (its worker terminated), or the worker died under it (e.g. out of memory):
        // either way the rule that was running is the one to abandon.
        else if (i === running) this.#settle(it, outOfMemory ? { ok: false, running: key, started: true, outOfMemory: true } : { ok: false, running: key, started: true });
      }
    }
    this.#takeBack(batch, -1);
    this.#dispatch();
  }

  /**
   * Charges each item's flow what its worker measured, in place of what
   * taking it reserved (fair-queue.ts); on a failed batch, the item that
   * was running is charged from when it was seen to start.
   */
  #charge(batch: Batch, failed: boolean): void {
    const running = failed ? this.#slots.runningIndex(batch.slot, batch.id) : -1;
    for (let i = 0; i < batch.items.length; i++) {
      const it = batch.items[i]!;
      const own = it.batch === batch;
      let ms = this.#slots.timeMs(batch.slot, i);
      if (i === running && ms === 0) ms = Math.max(0, epochNow() - batch.runSince);
      const reserved = own ? it.reserved : 0;
      if (own) it.reserved = 0;
      if (ms > 0 || reserved > 0) this.#queue.charge(it.flow, ms, reserved);
    }
  }

  /** Queues again, at the front of their flows and in order (they are older than what waits), the batch's items not settled but `keep`. */
  #takeBack(batch: Batch, keep: number): void {
    const back: Item[] = [];
    for (let i = 0; i < batch.items.length; i++) {
      const it = batch.items[i]!;
      if (i === keep || it.settled || it.batch !== batch) continue;
      it.batch = undefined;
      it.index = -1;
      back.push(it);
    }
    if (back.length > 0) this.#queue.putBack(back);
  }

  /** Closes the batch's claim counter and queues again every item but the one the worker is on. */
  #reclaim(batch: Batch): void {
    if (batch.reclaimed) return;
    batch.reclaimed = true;
    this.#reclaims++;
    const claimed = this.#slots.close(batch.slot);
    // The worker is on item claimed - 1 (or has just finished it); every other item goes back.
    this.#takeBack(batch, claimed - 1);
    this.#dispatch();
  }

  /** Settles what passed its deadline, takes back batches that ran long; stops when nothing is in flight. */
  #tick(): void {
    const now = epochNow();
    // A batch of one is taken back only when it has not started while another runs long: it waits on that
    // worker's port. (Not merely because it has not started: on a loaded machine a worker can take longer
    // than reclaimMs to wake, and taking it back then would only send it again.)
    let runningLong = false;
    for (const batch of this.#active) {
      const index = this.#slots.runningIndex(batch.slot, batch.id);
      if (index !== batch.runIndex) {
        batch.runIndex = index;
        batch.runSince = now;
      }
      if (batch.reclaimAt <= now && index >= 0) runningLong = true;
    }
    for (const batch of this.#active) this.#checkBatch(batch, now, runningLong);
    for (const item of this.#queue.expired(now)) this.#settle(item, { ok: false, running: undefined, started: false });
    if (this.#inFlight === 0 && this.#active.size === 0 && this.#ticker !== undefined) {
      clearInterval(this.#ticker);
      this.#ticker = undefined;
    }
  }

  /** One active batch at a tick: its running item past its hard deadline, taken back when it ran long or holds an item that must start now. */
  #checkBatch(batch: Batch, now: number, runningLong: boolean): void {
    const index = batch.runIndex;
    const running = index >= 0 ? batch.items[index] : undefined;
    if (running !== undefined && !running.settled && running.batch === batch) {
      const { timeoutMs, graceMs, compileMs } = this.#config;
      // A rule compiled on first use does not eat the item's own budget; the request's bound holds regardless.
      const own = batch.runSince + timeoutMs + this.#slots.compileAllowanceMs(batch.slot, batch.id, compileMs);
      if (Math.min(own, running.end - graceMs) + graceMs <= now) {
        batch.abort.abort();
        return;
      }
    }
    if (batch.reclaimed) return;
    if (batch.reclaimAt <= now && (batch.items.length > 1 || (runningLong && index < 0))) {
      this.#reclaim(batch);
      return;
    }
    // Not claimed yet and due to start: back to its flow, where it is settled as never started.
    for (let i = index + 1; i < batch.items.length; i++) {
      const it = batch.items[i]!;
      if (!it.settled && it.batch === batch && it.startBy <= now) {
        this.#reclaim(batch);
        return;
      }
    }
  }
}
