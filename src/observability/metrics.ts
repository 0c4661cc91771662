/**
 * Admission metrics on an injected prom-client Registry (never the global
 * one), `portal_` prefix and unit suffixes (docs/design.md §11, habit 5).
 *
 * Hot path: {@link AdmissionMetrics.answered} only bumps plain numbers; the
 * request counter and duration histogram take them on each scrape (their
 * `collect()`), so `/metrics` shows exactly what per-request `inc`/`observe`
 * would have. Why: prom-client validates and hashes the label object on
 * every `inc`/`observe` (and `observe` allocates a closure); profiled under
 * load that was ~1.5–2 µs of a ~65 µs admission request, while a scrape
 * comes every few seconds at most.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { AdmissionOutcome as AdmissionDecision } from '../policy/decision.ts';

const DECISIONS: readonly AdmissionDecision[] = ['allow', 'warn', 'deny', 'exempt', 'not_ready', 'overloaded', 'error', 'invalid'];
const DECISION_INDEX: Readonly<Record<AdmissionDecision, number>> = Object.fromEntries(DECISIONS.map((d, i) => [d, i])) as Record<AdmissionDecision, number>;
/** The `operation` label; '' when the review could not be read. */
const OPERATIONS = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT', ''] as const;

/** The `kind` label of a kind that no rule names (and of kinds past {@link MAX_KIND_LABELS}). */
export const OTHER_KIND = 'other';

/**
 * Distinct `kind` label values kept at most, whatever the caller's mapping
 * says: a backstop so that even a mapping that passed request strings
 * through could not grow /metrics without bound (issue 16: 20,000 invented
 * kinds grew it to 200 MB). The webhook sees a few dozen kinds in practice.
 */
export const MAX_KIND_LABELS = 200;

/** Reasons of `portal_webhook_connections_closed_total` (connection-guard.ts). */
export type ConnectionCloseReason = 'peer_limit' | 'cap_idle_closed' | 'cap_unfinished_closed' | 'cap_all_busy' | 'cap_newcomer_refused' | 'slow_body';

export interface AdmissionMetrics {
  requests: Counter<'operation' | 'kind' | 'decision'>;
  duration: Histogram<'decision'>;
  errors: Counter<'reason'>;
  inFlight: Gauge;
  rulesLoaded: Gauge;
  /** Admission requests in which a PortalException exempted a rule (docs/exceptions.md). */
  exceptionsApplied: Counter<'exception' | 'rule'>;
  /** Open webhook connections. */
  connections: Gauge;
  connectionsClosed: Counter<'reason'>;
  /** Denied requests whose info line the rate limit dropped (admission/denial-log.ts). */
  denialsNotLogged: Counter;
  /** Webhook requests waiting, unread, for their turn (src/admission/peer-queue.ts). */
  requestsWaiting: Gauge;
  /**
   * Counts one answered request (requests_total) and its duration in seconds
   * (the histogram). `kind` must already be a bounded label (the server maps
   * request kinds through its `kindLabel`); past MAX_KIND_LABELS distinct
   * values it is counted as `other` anyway.
   */
  answered(operation: string, kind: string, decision: AdmissionDecision, seconds: number): void;
}

/**
 * Buckets from 0.5 ms to 10 s: an admission decision is normally well under
 * a millisecond, and the apiserver's default webhook timeout is 10 s, so
 * anything beyond that is a failure whatever its exact value.
 */
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * prom-client 15's per-label-set histogram state, the fields its own
 * `observe` updates. Pinned version (package.json); test/admission/metrics
 * compares our exposition with plain `observe` calls, so a change of layout
 * fails a test rather than going unnoticed.
 */
interface HistogramState {
  labels: Record<string, string>;
  bucketValues: Record<number, number>;
  sum: number;
  count: number;
}

/** Observations not yet folded into the prom-client histogram, per decision. */
class PendingDurations {
  /** [decision][bucket]; bucket DURATION_BUCKETS.length = above the last bound (only in +Inf). */
  readonly buckets = DECISIONS.map(() => new Float64Array(DURATION_BUCKETS.length + 1));
  readonly sum = new Float64Array(DECISIONS.length);
  readonly count = new Float64Array(DECISIONS.length);

  observe(decision: number, seconds: number): void {
    let b = 0;
    // Same rule as prom-client's findBound: the first bound >= the value.
    while (b < DURATION_BUCKETS.length && seconds > (DURATION_BUCKETS[b] as number)) b++;
    (this.buckets[decision] as Float64Array)[b]! += 1;
    this.sum[decision]! += seconds;
    this.count[decision]! += 1;
  }

  flushInto(histogram: Histogram<'decision'>): void {
    const state = (histogram as unknown as { hashMap: Record<string, HistogramState> }).hashMap;
    for (let d = 0; d < DECISIONS.length; d++) {
      const n = this.count[d] as number;
      if (n === 0) continue;
      const decision = DECISIONS[d] as AdmissionDecision;
      let entry = Object.values(state).find((e) => e.labels.decision === decision);
      if (entry === undefined) {
        histogram.zero({ decision });
        entry = Object.values(state).find((e) => e.labels.decision === decision);
        if (entry === undefined) throw new Error('prom-client histogram layout changed: zero() created no state');
      }
      const buckets = this.buckets[d] as Float64Array;
      for (let b = 0; b < DURATION_BUCKETS.length; b++) {
        const bound = DURATION_BUCKETS[b] as number;
        entry.bucketValues[bound] = (entry.bucketValues[bound] as number) + (buckets[b] as number);
      }
      entry.sum += this.sum[d] as number;
      entry.count += n;
      buckets.fill(0);
      this.sum[d] = 0;
      this.count[d] = 0;
    }
  }
}

/** Request counts not yet added to the counter: per kind, [operation × decision]. */
class PendingRequests {
  readonly #byKind = new Map<string, Float64Array>();

  add(operation: string, kind: string, decision: number): void {
    let op = OPERATIONS.indexOf(operation as (typeof OPERATIONS)[number]);
    if (op < 0) op = OPERATIONS.length - 1; // never happens: decodeReview admits only these
    let counts = this.#byKind.get(kind);
    if (counts === undefined) {
      if (this.#byKind.size >= MAX_KIND_LABELS && kind !== OTHER_KIND) return this.add(operation, OTHER_KIND, decision);
      counts = new Float64Array(OPERATIONS.length * DECISIONS.length);
      this.#byKind.set(kind, counts);
    }
    counts[op * DECISIONS.length + decision]! += 1;
  }

  flushInto(counter: Counter<'operation' | 'kind' | 'decision'>): void {
    for (const [kind, counts] of this.#byKind) {
      for (let i = 0; i < counts.length; i++) {
        const n = counts[i] as number;
        if (n === 0) continue;
        const operation = OPERATIONS[Math.floor(i / DECISIONS.length)] as string;
        counter.inc({ operation, kind, decision: DECISIONS[i % DECISIONS.length] as AdmissionDecision }, n);
        counts[i] = 0;
      }
    }
  }
}

export function createAdmissionMetrics(registry: Registry): AdmissionMetrics {
  const pendingRequests = new PendingRequests();
  const pendingDurations = new PendingDurations();
  const requests = new Counter({
    name: 'portal_admission_requests_total',
    help: 'Admission requests answered, by operation, kind and decision.',
    labelNames: ['operation', 'kind', 'decision'] as const,
    registers: [registry],
    collect() {
      pendingRequests.flushInto(this);
    },
  });
  const duration = new Histogram({
    name: 'portal_admission_request_duration_seconds',
    help: 'Time from receiving an admission request to answering it.',
    labelNames: ['decision'] as const,
    buckets: DURATION_BUCKETS,
    registers: [registry],
    collect() {
      pendingDurations.flushInto(this);
    },
  });
  return {
    requests,
    duration,
    errors: new Counter({
      name: 'portal_admission_errors_total',
      help: 'Admission requests that ended in an internal error (answered as a denial with code 500) or were malformed.',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    inFlight: new Gauge({
      name: 'portal_admission_in_flight',
      help: 'Admission requests being processed now.',
      registers: [registry],
    }),
    rulesLoaded: new Gauge({
      name: 'portal_rules_loaded',
      help: 'Rules currently loaded into the engine.',
      registers: [registry],
    }),
    // Bounded: one series per (exception, rule) pair that ever applied; both are objects an administrator created.
    exceptionsApplied: new Counter({
      name: 'portal_exceptions_applied_total',
      help: 'Admission requests in which a PortalException (namespace/name) exempted a rule, by exception and rule.',
      labelNames: ['exception', 'rule'] as const,
      registers: [registry],
    }),
    connections: new Gauge({
      name: 'portal_webhook_connections',
      help: 'Open connections to the webhook port (TLS handshake included).',
      registers: [registry],
    }),
    connectionsClosed: new Counter({
      name: 'portal_webhook_connections_closed_total',
      help: 'Webhook connections closed by the connection guard: reason=peer_limit (a remote address over --webhook-max-connections-per-peer), cap_idle_closed (an idle connection closed to make room at --webhook-max-connections), cap_unfinished_closed (a request whose body was still arriving, or waiting its turn, closed to make room), cap_all_busy (a new connection refused: every open one had a request being answered), cap_newcomer_refused (a new connection refused: its address already held more connections than the one that would have lost one), slow_body (a body arriving slower than the rate floor).',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    denialsNotLogged: new Counter({
      name: 'portal_admission_denials_not_logged_total',
      help: 'Denied admission requests whose info log line was dropped by the rate limit (20 lines/s, bursts of 100); a warn line says how many.',
      registers: [registry],
    }),
    requestsWaiting: new Gauge({
      name: 'portal_webhook_requests_waiting',
      help: 'Webhook requests waiting, unread, for their turn: their remote address already has its share of requests being read and answered, or all have (fair turns per remote address).',
      registers: [registry],
    }),
    answered(operation, kind, decision, seconds) {
      const d = DECISION_INDEX[decision];
      pendingRequests.add(operation, kind, d);
      pendingDurations.observe(d, seconds);
    },
  };
}

/**
 * `portal_rules_not_ready`: rules whose latest version failed to validate or
 * compile (status Ready=False, reason CompileError), e.g. a CEL expression
 * that does not type-check. Read from the rule set at scrape time, so it can
 * never drift from it.
 */
/**
 * CEL expressions that run on cel-js's evaluation instead of generated
 * JavaScript (issue 19), per rule: a construct the compiler does not
 * handle. Their cost is then only what library functions charge (the
 * evaluation deadline still bounds them). The label is a rule key, bounded
 * by the rules loaded.
 */
export function registerCelFallbacks(registry: Registry, fallbacks: () => { rule: string; expressions: number }[]): Gauge<'rule'> {
  return new Gauge({
    name: 'portal_cel_fallback_expressions',
    help: 'CEL expressions of a rule that run on the cel-js interpreter instead of compiled JavaScript (not cost-metered node by node); /debug/vars "cel" says which and why.',
    labelNames: ['rule'],
    registers: [registry],
    collect() {
      this.reset();
      for (const f of fallbacks()) if (f.expressions > 0) this.set({ rule: f.rule }, f.expressions);
    },
  });
}

/**
 * `portal_ready` (1 while /readyz answers 200) and
 * `portal_readiness_error_gate_tripped` (1 while internal errors alone take
 * the replica out): what the chart's alerts read, since a scraper does not
 * see a replica's /readyz.
 */
export function registerReadiness(registry: Registry, ready: () => boolean, errorGateTripped: () => boolean): void {
  new Gauge({
    name: 'portal_ready',
    help: '1 while the replica is ready (/readyz 200): rules loaded, evaluation workers started, internal errors under the gate.',
    registers: [registry],
    collect() {
      this.set(ready() ? 1 : 0);
    },
  });
  new Gauge({
    name: 'portal_readiness_error_gate_tripped',
    help: '1 while more than half of the recent admission requests ended in an internal error, so /readyz answers 503 (docs/operations.md, Endpoints).',
    registers: [registry],
    collect() {
      this.set(errorGateTripped() ? 1 : 0);
    },
  });
}

export function registerRulesNotReady(registry: Registry, notReady: () => number): Gauge {
  return new Gauge({
    name: 'portal_rules_not_ready',
    help: 'Rules whose latest version failed to validate or compile (Ready=False, reason CompileError); see the rule status for the error and its position.',
    registers: [registry],
    collect() {
      this.set(notReady());
    },
  });
}

/**
 * Keeps only the label sets `keep` accepts: the series of a deleted rule or
 * exception leave /metrics (issue 31: tenant-chosen names must not live for
 * ever). Runs now, and again before each scrape (chained before the
 * counter's own `collect`), so a late increment for a rule deleted in the
 * meantime is dropped too. prom-client keeps one entry per label set in
 * `hashMap` (pinned version; test/observability/rule-series.test.ts checks
 * the series really go).
 */
export function pruneSeries<T extends string>(counter: Counter<T>, keep: (labels: Readonly<Partial<Record<T, string | number>>>) => boolean): () => void {
  const target = counter as unknown as { hashMap: Record<string, { labels: Partial<Record<T, string | number>> }>; collect?: () => unknown };
  const prune = (): void => {
    for (const entry of Object.values(target.hashMap)) if (!keep(entry.labels)) counter.remove(entry.labels);
  };
  const own = target.collect;
  target.collect = function collect(this: unknown) {
    prune();
    return own?.call(this);
  };
  prune();
  return prune;
}
