/**
 * Audit metrics, defined in one place and registered on an injected
 * prom-client Registry (STYLE.md, habit 5). Each getter is idempotent per
 * registry, so several components of one replica share the same series.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

function counter<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Counter<L> {
  const existing = registry.getSingleMetric(name);
  if (existing) return existing as Counter<L>;
  return new Counter({ name, help, labelNames, registers: [registry] });
}

function gauge<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Gauge<L> {
  const existing = registry.getSingleMetric(name);
  if (existing) return existing as Gauge<L>;
  return new Gauge({ name, help, labelNames, registers: [registry] });
}

export interface QueueMetrics {
  depth: Gauge<'queue'>;
  /**
   * Registers the queue's lag (seconds since its oldest unprocessed change,
   * 0 when none) for `portal_audit_lag_seconds{queue}`, computed at each
   * scrape (a lag grows while nothing happens). Returns the unregister.
   */
  lag(queue: string, seconds: () => number): () => void;
  adds: Counter<'queue'>;
  retries: Counter<'queue'>;
  drops: Counter<'queue' | 'reason'>;
}

/** Each registry's queues with a lag, read when `portal_audit_lag_seconds` is collected. */
const lagSources = new WeakMap<Registry, { sources: Map<string, () => number>; gauge: Gauge<'queue'> }>();

function lagGauge(registry: Registry): { sources: Map<string, () => number>; gauge: Gauge<'queue'> } {
  const known = lagSources.get(registry);
  if (known) return known;
  const live = new Map<string, () => number>();
  const gauge =
    (registry.getSingleMetric('portal_audit_lag_seconds') as Gauge<'queue'> | undefined) ??
    new Gauge({
      name: 'portal_audit_lag_seconds',
      help: 'Age of the oldest change the audit work queue has not finished processing (waiting or in flight), 0 when none.',
      labelNames: ['queue'],
      registers: [registry],
      collect(this: Gauge<'queue'>) {
        for (const [queue, seconds] of live) this.set({ queue }, seconds());
      },
    });
  const entry = { sources: live, gauge };
  lagSources.set(registry, entry);
  return entry;
}

export function queueMetrics(registry: Registry): QueueMetrics {
  return {
    lag: (queue, seconds) => {
      const { sources, gauge } = lagGauge(registry);
      sources.set(queue, seconds);
      return () => {
        if (sources.get(queue) !== seconds) return;
        sources.delete(queue);
        // A queue that is gone (the reports queue at a term's end) has nothing waiting.
        gauge.set({ queue }, 0);
      };
    },
    depth: gauge(registry, 'portal_audit_queue_depth', 'Keys waiting in the audit work queue (not counting delayed retries).', ['queue']),
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

export interface ActionMetrics {
  actions: Counter<'action' | 'outcome'>;
}

export function actionMetrics(registry: Registry): ActionMetrics {
  return {
    actions: counter(registry, 'portal_audit_actions_total', 'Audit side effects by action type and outcome (done, skipped, retry, error).', ['action', 'outcome']),
  };
}
