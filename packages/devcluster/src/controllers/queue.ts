/**
 * A work queue like client-go's: a key queued several times before its turn
 * is synced once, one sync per key at a time, failures retried with
 * exponential backoff (5 ms doubling to 10 s), and delayed adds for
 * time-driven work (a CronJob's next run). Nothing polls: keys arrive from
 * store events.
 */
import { backoffDelay } from '../../../../src/kube/backoff.ts';

export type Sync = (key: string) => Promise<void>;

export class WorkQueue {
  private readonly pending = new Set<string>();
  private readonly running = new Set<string>();
  /** Keys re-added while being synced run again afterwards. */
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private scheduled = false;
  /** Resolves when the queue is idle (for benches and tests). */
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly sync: Sync,
    private readonly signal: AbortSignal,
    private readonly onError: (key: string, err: unknown) => void,
  ) {
    signal.addEventListener('abort', () => {
      for (const t of this.timers.values()) clearTimeout(t);
      this.timers.clear();
    }, { once: true });
  }

  add(key: string): void {
    if (this.signal.aborted) return;
    if (this.running.has(key)) {
      this.dirty.add(key);
      return;
    }
    this.pending.add(key);
    if (!this.scheduled) {
      this.scheduled = true;
      // setImmediate batches the burst of store events of one write.
      setImmediate(() => this.drain());
    }
  }

  /** Adds `key` after `ms` (replacing an earlier delayed add of the same key). */
  addAfter(key: string, ms: number): void {
    if (this.signal.aborted) return;
    const old = this.timers.get(key);
    if (old) clearTimeout(old);
    const t = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, Math.max(0, Math.min(ms, 2 ** 31 - 1)));
    t.unref();
    this.timers.set(key, t);
  }

  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  private isIdle(): boolean {
    return this.pending.size === 0 && this.running.size === 0;
  }

  private drain(): void {
    this.scheduled = false;
    const keys = [...this.pending];
    this.pending.clear();
    for (const key of keys) {
      this.running.add(key);
      void this.sync(key).then(
        () => this.failures.delete(key),
        (err: unknown) => {
          if (this.signal.aborted) return;
          const n = (this.failures.get(key) ?? 0) + 1;
          this.failures.set(key, n);
          this.onError(key, err);
          this.addAfter(key, backoffDelay(n - 1, { initialMs: 5, maxMs: 10_000 }));
        },
      ).finally(() => {
        this.running.delete(key);
        if (this.dirty.delete(key)) this.add(key);
        if (this.isIdle()) {
          const w = this.idleWaiters;
          this.idleWaiters = [];
          for (const f of w) f();
        }
      });
    }
  }
}

/** "namespace/name" keys. */
export function key(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

export function splitKey(k: string): [string, string] {
  const i = k.indexOf('/');
  return [k.slice(0, i), k.slice(i + 1)];
}
