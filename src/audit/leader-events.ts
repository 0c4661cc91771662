/**
 * Kubernetes Events written by the leader only, fenced and deduplicated: the
 * one implementation behind the Events on ValidatingAdmissionPolicies
 * (vap-events.ts) and on PortalExceptions (exception-events.ts).
 *
 * Every replica queues what it would record ({@link LeaderEvents.enqueue});
 * only a replica running {@link LeaderEvents.run} with a leader term writes,
 * through the replica's one FencedWriter (each create checked against the
 * term at the socket). Deduplication is by name: the caller derives the
 * Event's name from a deterministic key, so a second create of the same
 * Event — by this leader after a restart, or by the next leader, whose
 * follower time queued the same Events — answers 409 and writes nothing.
 *
 * Bounded: at most `maxPending` Events wait (beyond, the oldest are dropped,
 * or the new one with `whenFull: 'drop-new'`, and counted); a namespace
 * queues a burst of Events and then one per refill interval
 * (namespace-buckets.ts: a tenant's flood of failing rules or exceptions
 * cannot crowd out the others' Events), the rest dropped, counted in
 * `rateLimited` and logged once a minute per namespace; entries queued more than `maxAgeMs` before this replica starts
 * leading are dropped then (a live leader has written them; Events are a
 * record for people, not side effects owed exactly once). An Event whose
 * namespace is gone or forbidden (404, 403) is dropped with a warning: no
 * retry would ever write it.
 */
import type { CoreV1Event } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { apiStatusCode } from '../kube/client.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import type { LeaderTerm } from '../util/leader-term.ts';
import { ErrorCode, isPortalError, toError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';
import { EVENT_BUCKETS, NamespaceBuckets, type BucketOptions } from './namespace-buckets.ts';

export interface QueuedEvent {
  /** Deterministic: the same fact always gives the same key (and Event name). */
  key: string;
  namespace: string;
  /** The Event; its metadata.name must derive from `key`. */
  body: CoreV1Event;
}

export interface LeaderEventsOptions {
  writer: FencedWriter;
  logger: Logger;
  /** Paces the creates with the other leader writes. */
  writeLimiter?: { take(signal?: AbortSignal): Promise<void> };
  /** @default 10000 */
  maxPending?: number;
  /** Which Event a full queue drops. @default 'drop-oldest' */
  whenFull?: 'drop-oldest' | 'drop-new';
  /** Queued longer than this before the term starts: dropped then (undefined: kept). */
  maxAgeMs?: number;
  /** Called once an Event exists (created, or found created by an earlier leader). */
  onRecorded?: (key: string) => void;
  /** Events per namespace. @default EVENT_BUCKETS (25 at once, then one per 10 s) */
  perNamespace?: BucketOptions;
}

const RETRY_MS = 5000;
/** Event messages are capped by the API server at 1 KiB (as client-go truncates them). */
const MAX_MESSAGE = 1024;

function clipEventMessage(text: string): string {
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE - 3)}...` : text;
}

/** A core/v1 Event Portal writes now (count 1, its message clipped), reported by `portal.dev/audit` on this replica. */
export function eventBody(e: {
  name: string;
  namespace: string;
  involvedObject: NonNullable<CoreV1Event['involvedObject']>;
  related?: CoreV1Event['related'];
  reason: string;
  message: string;
  type: 'Normal' | 'Warning';
  reportingComponent: string;
  reportingInstance: string;
}): CoreV1Event {
  const now = new Date();
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: e.name, namespace: e.namespace },
    involvedObject: e.involvedObject,
    ...(e.related ? { related: e.related } : {}),
    reason: e.reason,
    message: clipEventMessage(e.message),
    type: e.type,
    count: 1,
    firstTimestamp: now,
    lastTimestamp: now,
    source: { component: 'portal' },
    reportingComponent: e.reportingComponent,
    reportingInstance: e.reportingInstance,
  };
}

export class LeaderEvents {
  readonly #o: LeaderEventsOptions;
  readonly #log: Logger;
  readonly #pending = new Map<string, QueuedEvent & { at: number }>();
  #wake: (() => void) | undefined;
  /** Events created by this replica. */
  written = 0;
  /** Events dropped because the queue was full or they were too old when leadership began. */
  dropped = 0;
  readonly #buckets: NamespaceBuckets;

  constructor(o: LeaderEventsOptions) {
    this.#o = o;
    this.#log = o.logger;
    this.#buckets = new NamespaceBuckets(o.perNamespace ?? EVENT_BUCKETS);
  }

  /** Events not queued because their namespace was over its rate. */
  get rateLimited(): number {
    return this.#buckets.dropped;
  }

  has(key: string): boolean {
    return this.#pending.has(key);
  }

  get pending(): number {
    return this.#pending.size;
  }

  /** Queues an Event (every replica); a key already queued is kept as it is. */
  enqueue(e: QueuedEvent): void {
    if (this.#pending.has(e.key)) return;
    const report = (dropped: number): void =>
      this.#log.warn({ [LogKey.namespace]: e.namespace, [LogKey.count]: dropped, [LogKey.reason]: e.body.reason }, 'namespace over its event rate; dropping its events');
    if (!this.#buckets.take(e.namespace, report)) return;
    const max = this.#o.maxPending ?? 10_000;
    if (this.#pending.size >= max) {
      if (this.#o.whenFull === 'drop-new') {
        this.dropped++;
        return;
      }
      const oldest = this.#pending.keys().next();
      if (!oldest.done) this.#pending.delete(oldest.value);
      this.dropped++;
    }
    this.#pending.set(e.key, { ...e, at: Date.now() });
    this.#wake?.();
  }

  /** Writes the queue under `term` until the term (or `signal`) ends. */
  async run(signal: AbortSignal, term: LeaderTerm): Promise<void> {
    const termSignal = AbortSignal.any([signal, term.signal]);
    if (this.#o.maxAgeMs !== undefined) {
      const oldest = Date.now() - this.#o.maxAgeMs;
      for (const [k, p] of this.#pending) {
        if (p.at < oldest) {
          this.#pending.delete(k);
          this.dropped++;
        }
      }
    }
    while (!termSignal.aborted) {
      let retry = false;
      for (const p of [...this.#pending.values()]) {
        if (termSignal.aborted) return;
        if (await this.#write(p, term, termSignal)) {
          // Only if not re-queued meanwhile (same key: same Event, so delete either way).
          this.#pending.delete(p.key);
          this.#o.onRecorded?.(p.key);
        } else retry = true;
      }
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          termSignal.removeEventListener('abort', done);
          this.#wake = undefined;
          resolve();
        };
        const timer = retry ? setTimeout(done, RETRY_MS) : undefined;
        termSignal.addEventListener('abort', done, { once: true });
        this.#wake = done;
        if (this.#pending.size > 0 && !retry) done();
      });
    }
  }

  /** true when the Event exists now (created, or already created by an earlier leader). */
  async #write(p: QueuedEvent, term: LeaderTerm, signal: AbortSignal): Promise<boolean> {
    try {
      await this.#o.writeLimiter?.take(signal);
      await this.#o.writer.core.createNamespacedEvent({ namespace: p.namespace, body: p.body }, this.#o.writer.options(term, { signal, timeoutMs: 10_000 }));
      this.written++;
      return true;
    } catch (err) {
      if (apiStatusCode(err) === 409) return true;
      if (isPortalError(err, ErrorCode.TermExpired) || signal.aborted) return false;
      // The namespace is gone (e.g. a PortalRule deleted with its namespace) or closed to us: nothing to report on.
      if (apiStatusCode(err) === 404 || apiStatusCode(err) === 403) {
        this.#log.warn({ [LogKey.error]: toError(err), [LogKey.event]: p.body.metadata?.name, [LogKey.namespace]: p.namespace, [LogKey.reason]: p.body.reason }, 'cannot record an event; dropping it');
        return true;
      }
      this.#log.warn({ [LogKey.error]: toError(err), [LogKey.event]: p.body.metadata?.name, [LogKey.reason]: p.body.reason }, 'could not record an event; retrying');
      return false;
    }
  }
}
