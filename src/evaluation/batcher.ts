/**
 * Batches evaluations into pool tasks, and enforces their deadlines
 * (adr/0013, "Batches").
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
 * What batching must not cost (issue 16): one slow evaluation must not hold
 * the others of its batch. The worker claims items one at a time from a
 * counter in shared memory. A batch still running `reclaimMs` after it was
 * sent is taken back: the counter is closed (the worker stops after the
 * item it is on) and every item but that one is queued again, to be sent
 * with the next batch; the results of those that had finished are lost and
 * they are evaluated again (cheap: they were fast). The same holds for a
 * batch waiting on a worker's port behind a slow one (threads.ts,
 * pipelineBalancer), even of one item: none of it started, all of it goes
 * back. The item still running
 * keeps its deadline: at `deadline + grace` its worker is terminated (the
 * task's signal) and it is settled as abandoned, with the rule that was
 * running (read from the slot). An item whose deadline passes before a
 * worker claimed it is settled as never started.
 *
 * Deadlines are checked by one ticker (every `tickMs` while anything is in
 * flight) rather than a timer per item: a timer per request cost more than
 * a typical evaluation.
 *
 * An item submitted without a deadline (the audit's) has one that counts
 * from when a worker claims it: the worker computes its own, and the ticker
 * starts the hard one when it sees the claim in the slot (at most `tickMs`
 * late). So neither a queue nor a replacement worker's start-up eats it;
 * `startWithinMs` still bounds the wait, so that nothing waits for ever on
 * workers that cannot start.
 */
import type { Logger } from 'pino';
import { LogKey } from '../observability/log-keys.ts';
import { ProgressSlots } from './progress.ts';
import { epochNow, SLOT_BYTES, type ItemBody, type Task, type TaskOutcomes } from './protocol.ts';
import { splitPacked } from './packed-review.ts';
import { TaskAbort } from './task-abort.ts';
import { isTermination, release, takeBatch, type Attempt, type Batch, type Item } from './batch-items.ts';
import { toError } from '../observability/errors.ts';
import { isOutOfMemory } from './thread-memory.ts';

export interface BatcherConfig {
  /** Batches sent at once (the workers', and one waiting on each). */
  batches: number;
  /** Evaluations one batch carries at most. */
  maxBatch: number;
  timeoutMs: number;
  graceMs: number;
  /** How long a batch may run before the items it has not finished are taken back and sent again. */
  reclaimMs: number;
  /** How often deadlines and batches are checked. */
  tickMs: number;
  /** How long an item without a deadline may wait for a worker to claim it. */
  startWithinMs: number;
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
  /** Items waiting for a worker, in order (settled ones are skipped when a batch is taken). */
  #waiting: Item[] = [];
  /**
   * Every item not settled, in submission (so deadline) order. A settled
   * item's slot is cleared at once (#release), not when the ticker passes
   * it: the array lives long enough to be in the old generation, and the
   * young objects an old one points at survive every scavenge; holding each
   * item until the next tick made the main thread's young collections
   * promote megabytes per second (docs/benchmarks.md, session 7).
   */
  #timeline: (Item | undefined)[] = [];
  #timelineHead = 0;
  /** The position in the whole sequence of #timeline[0] (it is compacted as the head moves). */
  #timelineBase = 0;
  /** Items without a deadline, not settled (the audit's: few, so scanned whole on each tick). */
  #fromStart: Item[] = [];
  readonly #active = new Set<Batch>();
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
    const slots = deps.progress.byteLength / SLOT_BYTES;
    this.#freeSlots = Array.from({ length: slots }, (_, i) => slots - 1 - i);
  }

  /** Evaluations submitted and not settled (waiting or in a batch). */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Evaluations waiting for a worker. */
  waiting(): number {
    let n = 0;
    for (const it of this.#waiting) if (!it.settled) n++;
    return n;
  }

  stats(): { batches: number; batchedItems: number; reclaims: number } {
    return { batches: this.#batches, batchedItems: this.#items, reclaims: this.#reclaims };
  }

  /** Resolves once nothing is in flight. */
  drained(): Promise<void> {
    if (this.#inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  /** One attempt at evaluating `body` by `deadline` (epoch ms; undefined: `timeoutMs` from when a worker claims it). */
  attempt(body: ItemBody, deadline: number | undefined, abandoned: string[] | undefined, solo: boolean): Promise<Attempt> {
    this.#inFlight++;
    return new Promise<Attempt>((resolve, reject) => {
      const hard = deadline === undefined ? Number.POSITIVE_INFINITY : deadline + this.#config.graceMs;
      const startBy = deadline === undefined ? epochNow() + this.#config.startWithinMs : hard;
      const item: Item = { body, deadline, hard, startBy, abandoned, solo, settled: false, batch: undefined, index: -1, at: -1, resolve, reject };
      this.#waiting.push(item);
      if (deadline === undefined) this.#fromStart.push(item);
      else item.at = this.#timelineBase + this.#timeline.push(item) - 1;
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
    item.settled = true;
    this.#inFlight--;
    const resolve = item.resolve;
    this.#release(item);
    resolve(attempt);
    if (this.#inFlight === 0) for (const w of this.#drainWaiters.splice(0)) w();
  }

  /** A settled item lets go of what it held, and the timeline of it. */
  #release(item: Item): void {
    release(item);
    const i = item.at - this.#timelineBase;
    if (i >= 0 && this.#timeline[i] === item) this.#timeline[i] = undefined;
  }

  /** Rejects with `err` the items without a deadline that wait for a worker (the pool closes: they would only delay it). */
  refuseWaiting(err: Error): void {
    for (const it of this.#waiting) if (it.deadline === undefined && it.batch === undefined) this.#fail(it, err);
  }

  #fail(item: Item, err: unknown): void {
    if (item.settled) return;
    item.settled = true;
    this.#inFlight--;
    const reject = item.reject;
    this.#release(item);
    reject(err);
    if (this.#inFlight === 0) for (const w of this.#drainWaiters.splice(0)) w();
  }

  /** Sends batches while a worker is free. */
  #dispatch(): void {
    this.#dispatchQueued = false;
    while (this.#active.size < this.#config.batches) {
      // The waiting items are shared among the batches that can be sent now (piscina gives each to the least busy
      // worker), so idle workers run in parallel what one batch would run in sequence: an evaluation's deadline
      // starts when it is submitted, and one that waits behind slow ones in its batch can run out of it.
      const size = Math.min(this.#config.maxBatch, Math.max(1, Math.ceil(this.#waiting.length / (this.#config.batches - this.#active.size))));
      const items = this.#take(size);
      if (items.length === 0) return;
      const slot = this.#freeSlots.pop();
      if (slot === undefined) {
        // Cannot happen (there are more slots than batches can be active); keep the items waiting.
        this.#waiting.unshift(...items);
        return;
      }
      this.#send(items, slot);
    }
  }

  /** The next batch (batch-items.ts, takeBatch); what it leaves keeps waiting. */
  #take(size: number): Item[] {
    const { items, rest } = takeBatch(this.#waiting, size);
    this.#waiting = rest;
    return items;
  }

  #send(items: Item[], slot: number): void {
    const id = (this.#ids = (this.#ids % 0x7fffffff) + 1);
    this.#slots.reset(slot);
    const batch: Batch = { items, slot, id, abort: new TaskAbort(), reclaimAt: epochNow() + this.#config.reclaimMs, reclaimed: false };
    // Built by push, not preallocated: V8 clones an array with holes element by element, as an object.
    const bodies: ItemBody[] = [];
    const deadlines: (number | undefined)[] = [];
    let abandoned: (string[] | undefined)[] | undefined;
    for (let i = 0; i < items.length; i++) {
      const it = items[i]!;
      it.batch = batch;
      it.index = i;
      bodies.push(it.body as ItemBody);
      deadlines.push(it.deadline);
      if (it.abandoned !== undefined) abandoned ??= items.map((x) => x.abandoned);
    }
    this.#active.add(batch);
    this.#batches++;
    this.#items += items.length;
    this.#deps.run({ seq: this.#deps.seq(), slot, id, ms: this.#config.timeoutMs, bodies, deadlines, abandoned }, batch.abort).then(
      (outcomes) => this.#finished(batch, outcomes, undefined),
      (err: unknown) => this.#finished(batch, undefined, err),
    );
  }

  #finished(batch: Batch, answer: TaskOutcomes | undefined, err: unknown): void {
    this.#active.delete(batch);
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
          this.#settle(it, { ok: false, running: o.thrown });
        }
      }
    } else {
      this.#freeSlots.unshift(batch.slot);
      const closed = this.#deps.closedError(err);
      const running = this.#runningIndex(batch);
      const key = this.#runningKey(batch);
      // A batch waiting behind one whose worker was terminated at its deadline fails with piscina's
      // termination error: expected, its items are queued again below.
      if (closed === undefined && !batch.abort.aborted && !isTermination(err)) this.#deps.log.warn({ [LogKey.error]: toError(err) }, 'evaluation worker lost during a task');
      const outOfMemory = isOutOfMemory(err);
      for (let i = 0; i < batch.items.length; i++) {
        const it = batch.items[i]!;
        if (it.settled || it.batch !== batch) continue;
        if (closed !== undefined) this.#fail(it, closed);
        // The thread died of its memory before any item ran (receiving the batch): alone, an item that does not fit fails; in a batch, each goes again alone.
        else if (outOfMemory && running < 0 && batch.items.length === 1 && it.solo) this.#settle(it, { ok: false, running: undefined, outOfMemory: true });
        else if (outOfMemory && running < 0) it.solo = true;
        // Aborted at the deadline (its worker terminated), or the worker died under it (e.g. out of memory):
        // either way the rule that was running is the one to abandon.
        else if (i === running) this.#settle(it, outOfMemory ? { ok: false, running: key, outOfMemory: true } : { ok: false, running: key });
      }
    }
    this.#takeBack(batch, -1);
    this.#dispatch();
  }

  /** Queues again, at the front and in order (they are older than what waits), the batch's items not settled but `keep`. */
  #takeBack(batch: Batch, keep: number): void {
    const back: Item[] = [];
    for (let i = 0; i < batch.items.length; i++) {
      const it = batch.items[i]!;
      if (i === keep || it.settled || it.batch !== batch) continue;
      it.batch = undefined;
      it.index = -1;
      // Without a deadline of its own: it counts again from the next claim.
      if (it.deadline === undefined) it.hard = Number.POSITIVE_INFINITY;
      back.push(it);
    }
    if (back.length > 0) this.#waiting.unshift(...back);
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

  /** The index of the item the batch's worker is on (-1: none yet). */
  #runningIndex(batch: Batch): number {
    return this.#slots.runningIndex(batch.slot, batch.id);
  }

  /** The key the worker wrote into the batch's slot (the rule or VAP it was running), if any. */
  #runningKey(batch: Batch): string | undefined {
    return this.#slots.runningKey(batch.slot, batch.id);
  }

  /** Settles what passed its deadline, takes back batches that ran long; stops when nothing is in flight. */
  #tick(): void {
    const now = epochNow();
    // A batch of one is taken back only when it has not started while another runs long: it waits on that
    // worker's port. (Not merely because it has not started: on a loaded machine a worker can take longer
    // than reclaimMs to wake, and taking it back then would only send it again.)
    let runningLong = false;
    for (const batch of this.#active) if (batch.reclaimAt <= now && this.#runningIndex(batch) >= 0) runningLong = true;
    for (const batch of this.#active) {
      if (batch.reclaimed || batch.reclaimAt > now) continue;
      if (batch.items.length > 1 || (runningLong && this.#runningIndex(batch) < 0)) this.#reclaim(batch);
    }
    const t = this.#timeline;
    while (this.#timelineHead < t.length) {
      const item = t[this.#timelineHead];
      if (item !== undefined && !item.settled && item.hard > now) break;
      // Cleared, not only skipped (see #timeline).
      t[this.#timelineHead++] = undefined;
      if (item !== undefined && !item.settled) this.#expire(item);
    }
    if (this.#timelineHead > 1024 && this.#timelineHead * 2 > t.length) {
      this.#timeline = t.slice(this.#timelineHead);
      this.#timelineBase += this.#timelineHead;
      this.#timelineHead = 0;
      t.length = 0;
    }
    if (this.#fromStart.length > 0) this.#tickFromStart(now);
    if (this.#inFlight === 0 && this.#active.size === 0 && this.#ticker !== undefined) {
      clearInterval(this.#ticker);
      this.#ticker = undefined;
      this.#timeline = [];
      this.#timelineHead = 0;
      this.#fromStart = [];
    }
  }

  /** Items without a deadline: the hard deadline starts once a worker claimed one; one never claimed in time never started. */
  #tickFromStart(now: number): void {
    const items = this.#fromStart;
    let kept = 0;
    for (const item of items) {
      if (item.settled) continue;
      items[kept++] = item;
      if (item.hard === Number.POSITIVE_INFINITY) {
        const batch = item.batch;
        if (batch !== undefined && this.#runningIndex(batch) >= item.index) item.hard = now + this.#config.timeoutMs + this.#config.graceMs;
        else if (item.startBy <= now) this.#expire(item);
      } else if (item.hard <= now) this.#expire(item);
    }
    items.length = kept;
  }

  /** An item past its hard deadline: its worker is terminated if it is running it, else it never started in time. */
  #expire(item: Item): void {
    const batch = item.batch;
    if (batch !== undefined && this.#runningIndex(batch) === item.index) {
      batch.abort.abort();
      return;
    }
    if (batch !== undefined) this.#reclaim(batch);
    this.#settle(item, { ok: false, running: undefined });
  }
}
