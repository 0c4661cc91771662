/**
 * An Event per denied object, when `--denial-events` is on (issue 33 item 3;
 * the chart's `denials.events`): `kubectl get events -n team-a
 * --field-selector reason=PortalDenied` answers "what did Portal deny here
 * today, and which rule".
 *
 * Off the admission path: {@link DenialEvents.denied} only counts in memory
 * (denial-aggregator.ts) and wakes this Runnable, which writes on its own
 * time; the webhook's answer never waits on the API server.
 *
 * Aggregated as client-go's EventRecorder: a denial of the same object with
 * the same message (rules, operation, user) is one Event, created once and
 * then patched with its growing `count` and `lastTimestamp`; repeats between
 * two writes cost nothing but a counter.
 *
 * Bounded: every write (create or patch) takes a token of its namespace
 * (namespace-buckets.ts, the same per-namespace buckets as the audit's
 * Events: a burst of 25, then one per 10 s) and one of this replica's own
 * budget (`writes`, not the audit's --kube-api-qps). A namespace out of
 * tokens waits with its counts in memory (they are written later, summed):
 * one tenant's flood of denials never spends another namespace's tokens, and
 * never grows the memory past the aggregator's bounds.
 *
 * Every replica answers admission, so every replica writes the Events of
 * the denials it answered (not leader-only): two replicas denying the same
 * object make two Events, each with its own count (`reportingInstance` says
 * which replica).
 *
 * At shutdown (the signal aborts) the counts still pending are written in
 * one last pass, bounded by `flushMs` and the replica's budget; what is left
 * then is counted as dropped (`portal_denial_events_total`).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import { apiStatusCode, callOptions, mergePatchOptions, type KubeClient } from '../kube/client.ts';
import { TokenBucket, type RateLimiterOptions } from '../kube/rate-limiter.ts';
import { toError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';
import { clipText } from '../policy/decision.ts';
import type { Outcome } from '../policy/review/answer.ts';
import type { Runnable } from '../util/runnable.ts';
import { sleep } from '../util/backoff.ts';
import { DenialAggregator, type AggregatorOptions, type DenialEntry, type DenialFact } from './denial-aggregator.ts';
import type { DenialEventOutcome } from './metrics.ts';
import { eventBody } from './leader-events.ts';
import { EVENT_BUCKETS, NamespaceBuckets, type BucketOptions } from './namespace-buckets.ts';
import { CLUSTER_SCOPED_EVENT_NAMESPACE } from './problem-events.ts';

/** The Event's reason: `kubectl get events --field-selector reason=PortalDenied`. */
export const DENIAL_REASON = 'PortalDenied';
/** `reportingComponent` of the denial Events. */
export const DENIAL_EVENT_CONTROLLER = 'portal.dev/admission';
/** Event messages are capped at 1 KiB by the API server; cut at a word (as warnings are). */
const MAX_MESSAGE = 1024;
/** User names are the API server's; bounded anyway, as in the denial's log line. */
const MAX_USER = 256;
/** How long a namespace out of tokens (or a failed write) waits before the next pass. */
const RETRY_MS = 1000;
/** Failed writes are logged at most this often (with how many failed since). */
const WARN_MS = 10_000;
/** The last pass at shutdown: short, well inside the replica's graceful shutdown (--shutdown-grace-period, 20 s by default). */
const FLUSH_MS = 2000;

export interface DenialEventsDeps {
  client: Pick<KubeClient, 'core'>;
  logger: Logger;
  /** This replica's identity (`reportingInstance`). */
  identity: string;
  /** Writes per namespace. @default EVENT_BUCKETS (25 at once, then one per 10 s) */
  perNamespace?: BucketOptions;
  /** This replica's budget of denial Event writes, all namespaces. @default 5 per second, bursts of 25 */
  writes?: Omit<RateLimiterOptions, 'now'>;
  aggregation?: AggregatorOptions;
  /** @default 1 s */
  retryMs?: number;
  /** How long the last pass at shutdown may take. @default 2 s */
  flushMs?: number;
  /** `portal_denial_events_total` (metrics.ts denialEventMetrics). */
  metrics?: Counter<'outcome'>;
}

/** The Event a denied request is recorded as (pure). `undefined` when the review named no object, or for a dry run. */
export function denialFact(out: Outcome): DenialFact | undefined {
  const r = out.request;
  // A dry run changes nothing, and the webhook declares sideEffects None: no Event for it.
  if (r === undefined || out.decision !== 'deny' || r.dryRun === true) return undefined;
  const rules = out.deniedBy ?? [];
  const who = rules.length === 0 ? 'Portal' : `${rules.length === 1 ? 'rule' : 'rules'} ${rules.join(', ')}`;
  const user = r.user !== undefined && r.user !== '' ? ` by ${r.user.slice(0, MAX_USER)}` : '';
  return {
    namespace: r.namespace !== '' ? r.namespace : CLUSTER_SCOPED_EVENT_NAMESPACE,
    involvedObject: {
      apiVersion: r.kind.group !== '' ? `${r.kind.group}/${r.kind.version}` : r.kind.version,
      kind: r.kind.kind,
      name: r.name,
      ...(r.namespace !== '' ? { namespace: r.namespace } : {}),
    },
    reason: DENIAL_REASON,
    message: clipText(`${who} denied ${r.operation}${user}`, MAX_MESSAGE),
  };
}

/** `<object>.<hex time><random>` as client-go names Events; an object name that is no DNS subdomain (`system:x`) is made one. */
function eventName(f: DenialFact): string {
  const base = (f.involvedObject.name || f.involvedObject.kind).toLowerCase().replace(/[^a-z0-9.-]+/g, '-').replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '').slice(0, 200) || 'object';
  return `${base}.${Date.now().toString(16)}${randomBytes(4).toString('hex')}`;
}

export class DenialEvents implements Runnable {
  readonly name = 'denial-events';
  readonly #deps: DenialEventsDeps;
  readonly #aggregator: DenialAggregator;
  readonly #buckets: NamespaceBuckets;
  readonly #writes: TokenBucket;
  #wake: (() => void) | undefined;
  #counts = { denied: 0, created: 0, patched: 0, failed: 0, deferred: 0 };
  #failedSinceWarn = 0;
  #warnedAt = -Infinity;

  constructor(deps: DenialEventsDeps) {
    this.#deps = deps;
    this.#aggregator = new DenialAggregator(deps.aggregation);
    this.#buckets = new NamespaceBuckets(deps.perNamespace ?? EVENT_BUCKETS);
    this.#writes = new TokenBucket(deps.writes ?? { qps: 5, burst: 25 });
  }

  /** A denied request (on the admission path): counted in memory, written later. Never throws, never waits. */
  denied(out: Outcome): void {
    try {
      const fact = denialFact(out);
      if (fact === undefined) return;
      const evicted = this.#aggregator.evictedUnwritten;
      this.#aggregator.note(fact);
      if (this.#aggregator.evictedUnwritten !== evicted) this.#count('dropped_evicted');
      this.#counts.denied++;
      this.#wake?.();
    } catch {
      // The denial goes out whatever the Events do.
    }
  }

  async start(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.#pass(signal);
      this.#aggregator.sweep();
      await this.#idle(signal, this.#aggregator.dirty ? (this.#deps.retryMs ?? RETRY_MS) : undefined);
    }
    await this.#flush();
  }

  /**
   * The last pass, once the signal aborted: the counts still pending would
   * be lost with the process. Past the namespaces' buckets (a namespace that
   * waited for its tokens is the usual reason a count is pending) but one
   * Event of each namespace in turn, so a flood in one namespace cannot take
   * the others' share; within the replica's write budget and `flushMs`.
   */
  async #flush(): Promise<void> {
    const deadline = AbortSignal.timeout(this.#deps.flushMs ?? FLUSH_MS);
    const pending = [...this.#aggregator.unwritten()].map(({ entries }) => entries);
    const turns = Math.max(0, ...pending.map((entries) => entries.length));
    for (let i = 0; i < turns && !deadline.aborted; i++) {
      for (const entry of pending.flatMap((entries) => entries[i] ?? [])) {
        if (!(await this.#writes.take(deadline).then(() => true, () => false))) break;
        await this.#write(entry, deadline);
      }
    }
    let left = 0;
    for (const { entries } of this.#aggregator.unwritten()) left += entries.length;
    if (left === 0) return;
    this.#deps.metrics?.inc({ outcome: 'dropped_shutdown' }, left);
    this.#deps.logger.warn({ [LogKey.count]: left }, 'denial events not written at shutdown');
  }

  /** Writes what each namespace's tokens allow; the rest waits for the next pass. */
  async #pass(signal: AbortSignal): Promise<void> {
    for (const { namespace, entries } of this.#aggregator.unwritten()) {
      for (const entry of entries) {
        if (signal.aborted) return;
        if (!this.#buckets.take(namespace)) {
          this.#counts.deferred++;
          break;
        }
        if (!(await this.#writes.take(signal).then(() => true, () => false))) return;
        await this.#write(entry, signal);
      }
    }
  }

  /** Until woken by a denial, or `ms` (undefined: only a denial), or the end. */
  async #idle(signal: AbortSignal, ms: number | undefined): Promise<void> {
    const woken = new AbortController();
    this.#wake = () => woken.abort();
    try {
      if (ms !== undefined) await sleep(ms, signal);
      else await sleep(2 ** 31 - 1, signal, woken.signal);
    } finally {
      this.#wake = undefined;
    }
  }

  async #write(entry: DenialEntry, signal: AbortSignal): Promise<void> {
    const count = entry.count;
    const namespace = entry.fact.namespace;
    const now = new Date(entry.lastAt);
    try {
      if (entry.eventName === undefined) {
        const name = eventName(entry.fact);
        const body = eventBody({ ...entry.fact, name, type: 'Warning', reportingComponent: DENIAL_EVENT_CONTROLLER, reportingInstance: this.#deps.identity });
        await this.#deps.client.core.createNamespacedEvent({ namespace, body: { ...body, count, firstTimestamp: new Date(entry.firstAt), lastTimestamp: now } }, callOptions({ signal, timeoutMs: 10_000 }));
        entry.eventName = name;
        this.#counts.created++;
        this.#count('created');
      } else {
        await this.#deps.client.core.patchNamespacedEvent({ name: entry.eventName, namespace, body: { count, lastTimestamp: now } }, mergePatchOptions({ signal, timeoutMs: 10_000 }));
        this.#counts.patched++;
        this.#count('patched');
      }
      entry.written = count;
    } catch (err) {
      this.#failed(entry, err);
    }
  }

  #failed(entry: DenialEntry, err: unknown): void {
    const code = apiStatusCode(err);
    if (entry.eventName !== undefined && code === 404) {
      // The Event expired (--event-ttl) or was deleted: the next pass creates it again, with the whole count (as client-go does).
      delete entry.eventName;
      entry.written = 0;
      return;
    }
    this.#counts.failed++;
    // No retry would write it (a namespace gone, or closed to us): give it up.
    const refused = code === 403 || code === 404 || code === 422;
    if (refused) entry.written = entry.count;
    this.#count(refused ? 'dropped_refused' : 'failed');
    this.#failedSinceWarn++;
    const now = Date.now();
    if (now - this.#warnedAt < WARN_MS) return;
    this.#deps.logger.warn({ [LogKey.error]: toError(err), [LogKey.namespace]: entry.fact.namespace, [LogKey.count]: this.#failedSinceWarn }, 'could not write denial events');
    this.#failedSinceWarn = 0;
    this.#warnedAt = now;
  }

  #count(outcome: DenialEventOutcome): void {
    this.#deps.metrics?.inc({ outcome });
  }

  /** For /debug/vars and tests: denials noted, Events created and patched, writes failed or deferred (namespace out of tokens). */
  stats(): Record<string, number> {
    return { ...this.#counts, held: this.#aggregator.size, namespaces: this.#aggregator.namespaces, evictedUnwritten: this.#aggregator.evictedUnwritten };
  }
}
