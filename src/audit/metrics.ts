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
  adds: Counter<'queue'>;
  retries: Counter<'queue'>;
  drops: Counter<'queue' | 'reason'>;
}

export function queueMetrics(registry: Registry): QueueMetrics {
  return {
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
