/**
 * Runs a controller's sync over the product's keyed work queue
 * (src/audit/work-queue.ts: a key queued several times before its turn is
 * synced once, one sync per key at a time, a key re-added during its sync
 * runs again afterwards, exponential backoff, delayed adds). What a
 * controller adds on top, as client-go's controllers do:
 * - the burst of store events of one write is coalesced into one add per key;
 * - a fixed number of workers (5, kube-controller-manager's default
 *   concurrent syncs per controller);
 * - retries never give up (5 ms doubling to 10 s, client-go's default
 *   controller rate limiter), and the queue has no size bound (the store is
 *   the bound);
 * - `idle()` for tests and benches.
 * Nothing polls: keys arrive from store events, or from `addAfter` for
 * time-driven work (a CronJob's next run).
 */
import { WorkQueue } from 'portal/dev-api';
import { objKey } from '../apiserver/store.ts';
import { meta } from '../apiserver/types.ts';
import { OwnedIndex, type Gvr, type Host } from './host.ts';

export type Sync = (key: string) => Promise<void>;

const WORKERS = 5;
/** setTimeout's largest delay; a longer one would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class ControllerQueue {
  readonly #queue: WorkQueue;
  readonly #signal: AbortSignal;
  /** Keys of the current burst of store events, added to the queue on the next turn. */
  readonly #burst = new Set<string>();
  #scheduled = false;
  #idleWaiters: (() => void)[] = [];

  constructor(name: string, sync: Sync, signal: AbortSignal, onError: (key: string, err: unknown) => void) {
    this.#queue = new WorkQueue({ name, maxSize: Number.MAX_SAFE_INTEGER, maxRetries: Number.POSITIVE_INFINITY, baseDelayMs: 5, maxDelayMs: 10_000 });
    this.#signal = signal;
    signal.addEventListener('abort', () => {
      this.#queue.destroy();
      this.#burst.clear();
      this.#wakeIdle();
    }, { once: true });
    for (let i = 0; i < WORKERS; i++) void this.#work(sync, onError);
  }

  add(key: string): void {
    if (this.#signal.aborted) return;
    this.#burst.add(key);
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.#flush());
    }
  }

  /** Adds `key` after `ms` (an earlier pending delayed add of the key wins; the sync re-schedules). */
  addAfter(key: string, ms: number): void {
    if (this.#signal.aborted) return;
    this.#queue.addAfter(key, undefined, Math.max(0, Math.min(ms, MAX_TIMER_MS)));
  }

  /** Resolves when no key is waiting or being synced (delayed adds do not count). */
  idle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((r) => this.#idleWaiters.push(r));
  }

  #flush(): void {
    this.#scheduled = false;
    if (!this.#queue.closed) for (const key of this.#burst) this.#queue.add(key);
    this.#burst.clear();
    this.#checkIdle();
  }

  async #work(sync: Sync, onError: (key: string, err: unknown) => void): Promise<void> {
    for (;;) {
      const next = await this.#queue.get();
      if (!next) return;
      try {
        await sync(next.key);
        this.#queue.forget(next.key);
      } catch (err) {
        if (!this.#signal.aborted) {
          onError(next.key, err);
          this.#queue.retry(next.key, undefined, err);
        }
      } finally {
        this.#queue.done(next.key);
        this.#checkIdle();
      }
    }
  }

  #isIdle(): boolean {
    return this.#signal.aborted || (this.#burst.size === 0 && this.#queue.length === 0 && this.#queue.processing === 0);
  }

  #checkIdle(): void {
    if (this.#isIdle()) this.#wakeIdle();
  }

  #wakeIdle(): void {
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const w of waiters) w();
  }
}

/**
 * The event wiring of a controller of `kind` objects (`resource`) that
 * controls `owns` objects: an owner is synced on its own events and on those
 * of the objects it owns, and every existing owner once at the start. The
 * sync reads the owned objects from `owned`.
 */
export function runOwnerController(
  host: Host,
  spec: { name: string; kind: string; resource: Gvr; owns: Gvr },
  sync: Sync,
  onError: (err: unknown) => void,
  signal: AbortSignal,
): { queue: ControllerQueue; owned: OwnedIndex; idle(): Promise<void> } {
  const queue = new ControllerQueue(spec.name, sync, signal, (_k, err) => onError(err));
  const owned = new OwnedIndex(host, spec.owns, (ownerUid, ev) => {
    const m = meta(ev.object);
    const owner = (m.ownerReferences ?? []).find((r) => r.uid === ownerUid);
    if (owner?.kind === spec.kind) queue.add(objKey(m.namespace ?? '', owner.name));
  });
  const stop = host.watch(spec.resource, (ev) => queue.add(objKey(meta(ev.object).namespace ?? '', meta(ev.object).name ?? '')));
  signal.addEventListener('abort', () => { stop(); owned.stop(); }, { once: true });
  for (const o of host.list(spec.resource)) queue.add(objKey(meta(o).namespace ?? '', meta(o).name ?? ''));
  return { queue, owned, idle: () => queue.idle() };
}

/** A "namespace/name" key (store.ts objKey) as its two parts. */
export function splitKey(k: string): [string, string] {
  const i = k.indexOf('/');
  return [k.slice(0, i), k.slice(i + 1)];
}
