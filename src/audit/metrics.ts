/**
 * Audit metrics, defined in one place and registered on an injected
 * prom-client Registry (docs/design.md §11, habit 5). Each getter is idempotent per
 * registry, so several components of one replica share the same series.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

function counter<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Counter<L> {
  const existing = registry.getSingleMetric(name);
  if (existing) return existing as Counter<L>;
  return new Counter({ name, help, labelNames, registers: [registry] });
}

/** What a live queue reports at each scrape. */
export interface QueueGauges {
  /** Keys waiting for a worker. */
  depth(): number;
  /** Seconds since its oldest unprocessed change (waiting or in flight), 0 when none. */
  lagSeconds(): number;
}

export interface QueueMetrics {
  /**
   * Registers a queue's gauges (`portal_audit_queue_depth{queue}`,
   * `portal_audit_lag_seconds{queue}`), read at each scrape: a lag grows
   * while nothing happens, and the queue's own operations stay free of
   * metric updates. Returns the unregister, which sets both to 0.
   */
  observe(queue: string, gauges: QueueGauges): () => void;
  adds: Counter<'queue'>;
  retries: Counter<'queue'>;
  drops: Counter<'queue' | 'reason'>;
}

/** Each registry's live queues, read when their gauges are collected. */
const liveQueues = new WeakMap<Registry, { queues: Map<string, QueueGauges>; depth: Gauge<'queue'>; lag: Gauge<'queue'> }>();

function queueGauges(registry: Registry): { queues: Map<string, QueueGauges>; depth: Gauge<'queue'>; lag: Gauge<'queue'> } {
  const known = liveQueues.get(registry);
  if (known) return known;
  const queues = new Map<string, QueueGauges>();
  const collected = (name: string, help: string, read: (g: QueueGauges) => number): Gauge<'queue'> =>
    (registry.getSingleMetric(name) as Gauge<'queue'> | undefined) ??
    new Gauge({
      name,
      help,
      labelNames: ['queue'],
      registers: [registry],
      collect(this: Gauge<'queue'>) {
        for (const [queue, g] of queues) this.set({ queue }, read(g));
      },
    });
  const entry = {
    queues,
    depth: collected('portal_audit_queue_depth', 'Keys waiting in the audit work queue (not counting delayed retries or keys in flight).', (g) => g.depth()),
    lag: collected('portal_audit_lag_seconds', 'Age of the oldest change the audit work queue has not finished processing (waiting or in flight), 0 when none.', (g) => g.lagSeconds()),
  };
  liveQueues.set(registry, entry);
  return entry;
}

export function queueMetrics(registry: Registry): QueueMetrics {
  return {
    observe: (queue, gauges) => {
      const live = queueGauges(registry);
      live.queues.set(queue, gauges);
      return () => {
        if (live.queues.get(queue) !== gauges) return;
        live.queues.delete(queue);
        // A queue that is gone (the reports queue at a term's end) has nothing waiting.
        live.depth.set({ queue }, 0);
        live.lag.set({ queue }, 0);
      };
    },
    adds: counter(registry, 'portal_audit_queue_adds_total', 'Keys accepted by the audit work queue (deduplicated adds count once).', ['queue']),
    retries: counter(registry, 'portal_audit_queue_retries_total', 'Keys re-queued with backoff after a failure.', ['queue']),
    drops: counter(registry, 'portal_audit_queue_drops_total', 'Keys dropped: reason=max_retries (gave up) or full (queue at capacity).', ['queue', 'reason']),
  };
}

export interface AlertMetrics {
  sends: Counter<'url' | 'outcome'>;
  alerts: Counter<'kind'>;
}

export function alertMetrics(registry: Registry): AlertMetrics {
  return {
    sends: counter(registry, 'portal_audit_alertmanager_requests_total', 'POST /api/v2/alerts attempts per Alertmanager URL by outcome (ok, error).', ['url', 'outcome']),
    alerts: counter(registry, 'portal_audit_alerts_sent_total', 'Alerts delivered to at least one Alertmanager, kind=firing|resolved.', ['kind']),
  };
}

/**
 * What the denial Event writer (denial-events.ts) did, one series per
 * outcome: `created` and `patched` Events, `failed` writes (retried), and
 * Events whose count was never written: `dropped_evicted` (memory bounds),
 * `dropped_refused` (the API server refused it: 403, 404, 422) and
 * `dropped_shutdown` (still pending when the replica stopped).
 */
export type DenialEventOutcome = 'created' | 'patched' | 'failed' | 'dropped_evicted' | 'dropped_refused' | 'dropped_shutdown';

/** Registered on every cluster-mode replica (no series until `--denial-events` writes). */
export function denialEventMetrics(registry: Registry): Counter<'outcome'> {
  return counter(registry, 'portal_denial_events_total', 'Denial Events by outcome: created, patched, failed (retried), dropped_evicted, dropped_refused, dropped_shutdown (count never written).', ['outcome']);
}

export interface ActionMetrics {
  actions: Counter<'action' | 'outcome'>;
}

export function actionMetrics(registry: Registry): ActionMetrics {
  return {
    actions: counter(registry, 'portal_audit_actions_total', 'Audit side effects by action type and outcome (done, skipped, retry, error).', ['action', 'outcome']),
  };
}
