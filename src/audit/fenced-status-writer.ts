/**
 * The one way the audit writes a custom object's `.status` (leader-only):
 * rules (status-writer.ts) and exceptions (exception-status.ts) differ only
 * in what the status says and which resource it is patched on.
 *
 * Writes are debounced (`debounceMs`, ~1 s): a burst of changes costs one
 * status write per object, and what it says is still current within a
 * second. A write is skipped when the stored status already says the same
 * thing, so a new leader does not rewrite every status after a failover.
 * Each write is a JSON merge patch of the status subresource, fenced again at
 * the socket and conditional on the resourceVersion as observed: a write
 * delayed across a pause fails with 409 if the object changed since. A stale
 * status is low-harm anyway (it is derived state: the current leader
 * recomputes it and overwrites a stored status that differs), but a stale
 * write would go unnoticed until the next change of that object.
 */
import type { Logger } from 'pino';
import { apiStatusCode, type KubeClient } from '../kube/client.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import type { LeaderTerm } from '../util/leader-term.ts';
import { isPortalError, toError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';
import type { KubeObject } from '../policy/types.ts';

/** What differs between the kinds whose status the audit writes. */
/** The options a status patch is sent with (fenced, merge patch, bounded). */
export type MergePatchOptions = ReturnType<FencedWriter['mergePatchOptions']>;

export interface StatusKind<T, S> {
  /** What the object is called in log messages (`rule`, `exception`), the log field naming it, and the subcomponent. */
  readonly noun: string;
  logFields(key: string): Record<string, string>;
  readonly subcomponent: string;
  /** The objects that exist now, by the key markDirty uses. */
  current(): Map<string, T>;
  /** The stored object (informer cache); undefined skips the write when `needsObject`. */
  object(item: T): KubeObject | undefined;
  /** Whether an object not in the cache (yet) is skipped: there is nothing to patch against. */
  readonly needsObject: boolean;
  desired(item: T, object: KubeObject | undefined, now: Date): S;
  same(a: S | undefined, b: S): boolean;
  /** Sends the merge patch `body` on the status subresource; returns the stored object. */
  patch(item: T, body: object, options: MergePatchOptions): Promise<unknown>;
}

/** resourceVersions are opaque, but every real server uses integers: `a` is newer than `b` when both are and a > b. */
export function newerRv(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || b === undefined || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return false;
  return BigInt(a) > BigInt(b);
}

/** Conditions compared on what they say (not on lastTransitionTime), order-free. */
export function sameConditions(a: readonly { type: string; status: string; reason: string; message: string; observedGeneration?: number }[] | undefined, b: typeof a): boolean {
  const c = (s: typeof a) => (s ?? []).map((x) => `${x.type}|${x.status}|${x.reason}|${x.message}|${x.observedGeneration ?? ''}`).sort().join('\n');
  return c(a) === c(b);
}

/** A condition that keeps its lastTransitionTime while its status is unchanged. */
export function withTransition<C extends { type: string; status: string }>(
  c: C,
  previous: readonly { type: string; status: string; lastTransitionTime?: string }[],
  now: Date,
  observedGeneration: number,
): C & { lastTransitionTime: string; observedGeneration: number } {
  const prev = previous.find((p) => p.type === c.type);
  const lastTransitionTime = prev && prev.status === c.status && prev.lastTransitionTime ? prev.lastTransitionTime : now.toISOString();
  return { ...c, lastTransitionTime, observedGeneration };
}

export class FencedStatusWriter<T, S> {
  readonly #client: KubeClient;
  readonly #writer: FencedWriter;
  readonly #kind: StatusKind<T, S>;
  readonly #logger: Logger;
  readonly #debounceMs: number;
  readonly #dirty = new Set<string>();
  /** What this replica last wrote and the resourceVersion that write produced, by key (the informer may lag behind it). */
  readonly #written = new Map<string, { status: S; resourceVersion: string | undefined }>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  writes = 0;
  /** Completed flushes, also those that found nothing to write (tests wait on it instead of sleeping past the debounce). */
  flushes = 0;

  /** `writer`: the replica's leader-only writer, which sends the status patches. */
  constructor(client: KubeClient, writer: FencedWriter, kind: StatusKind<T, S>, logger: Logger, options: { debounceMs?: number } = {}) {
    this.#client = client;
    this.#writer = writer;
    this.#kind = kind;
    this.#logger = logger.child({ [LogKey.subcomponent]: kind.subcomponent });
    // ~1 s: counts stay current within a second, and a burst of changes costs one write per object.
    this.#debounceMs = options.debounceMs ?? 1000;
  }

  /** Marks objects (by key) for a status write; all when omitted. */
  markDirty(keys?: Iterable<string>): void {
    for (const k of keys ?? this.#kind.current().keys()) this.#dirty.add(k);
  }

  /** Starts the debounce timer if there is work; flush runs only with a valid term. */
  schedule(termOf: () => LeaderTerm | undefined, signal: AbortSignal): void {
    if (this.#timer || this.#dirty.size === 0 || signal.aborted) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      const term = termOf();
      if (!term || !term.isValid()) return; // followers keep the dirty set: a new leader writes it at once
      this.#flushing = this.flush(term, signal).finally(() => {
        this.flushes++;
        this.#flushing = undefined;
        this.schedule(termOf, signal);
      });
    }, this.#debounceMs);
  }

  async flush(term: LeaderTerm, signal: AbortSignal): Promise<void> {
    const keys = [...this.#dirty];
    this.#dirty.clear();
    const items = this.#kind.current();
    const now = new Date();
    for (const key of keys) {
      const item = items.get(key);
      if (item === undefined) {
        this.#written.delete(key);
        continue;
      }
      const object = this.#kind.object(item);
      if (!object && this.#kind.needsObject) continue;
      const desired = this.#kind.desired(item, object, now);
      const stored = (object as { status?: S } | undefined)?.status;
      const storedRv = object?.metadata?.resourceVersion;
      // Our own write counts only while the cache has not caught up with it: once the stored object is newer
      // (someone else wrote, e.g. a late request of a paused predecessor), what is stored decides.
      const written = this.#written.get(key);
      const ownIsCurrent = written !== undefined && !newerRv(storedRv, written.resourceVersion);
      if (this.#kind.same(stored, desired) || (ownIsCurrent && this.#kind.same(written.status, desired))) continue;
      const precondition = ownIsCurrent ? written.resourceVersion : storedRv;
      const outcome = await this.#write(key, item, desired, precondition, term, signal);
      if (outcome === 'stop') return;
    }
  }

  async #write(key: string, item: T, desired: S, resourceVersion: string | undefined, term: LeaderTerm, signal: AbortSignal): Promise<'next' | 'stop'> {
    try {
      await this.#client.writeLimiter.take(signal);
      term.assertValid();
      const body = resourceVersion !== undefined ? { metadata: { resourceVersion }, status: desired } : { status: desired };
      const result = (await this.#kind.patch(item, body, this.#writer.mergePatchOptions(term, { signal, timeoutMs: 10_000 }))) as KubeObject | undefined;
      this.#written.set(key, { status: desired, resourceVersion: result?.metadata?.resourceVersion });
      this.writes++;
      return 'next';
    } catch (err) {
      const noun = this.#kind.noun;
      if (signal.aborted || isPortalError(err)) {
        this.#dirty.add(key);
        if (!signal.aborted) this.#logger.info({ ...this.#kind.logFields(key), [LogKey.error]: toError(err) }, 'status write fenced');
        return 'stop';
      }
      if (apiStatusCode(err) === 404) return 'next'; // deleted meanwhile
      this.#dirty.add(key);
      if (apiStatusCode(err) === 409) {
        // Changed since observed (a spec edit, another writer): decide again on the next flush, on the newer object.
        this.#written.delete(key);
        this.#logger.debug({ ...this.#kind.logFields(key) }, `${noun} changed since observed; status write retried`);
        return 'next';
      }
      this.#logger.warn({ ...this.#kind.logFields(key), [LogKey.error]: toError(err) }, `${noun} status write failed, will retry`);
      return 'next';
    }
  }

  /** Cancels the timer and waits for a running flush. */
  async close(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#flushing;
  }
}
