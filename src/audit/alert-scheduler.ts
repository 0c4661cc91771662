/**
 * When to fire, re-send and resolve violation alerts (pure; time injected).
 *
 * While a violation lasts its alert is re-sent every `resendIntervalMs`
 * (`--alert-resend-interval`, default 1 h) with
 * `endsAt = now + 2 × resendIntervalMs`. Derivation: the next re-send is due
 * one interval later; the second interval is slack that covers everything
 * that can delay it — a leader failover (≤ leaseDuration + retryPeriod,
 * seconds), Alertmanager being down while the client retries (the work
 * queue's capped backoff, ≤ 1 min per attempt), and wall-clock skew between
 * replicas — so a live violation never auto-resolves in Alertmanager, while
 * an alert whose sender vanished for good still resolves by itself within
 * two intervals.
 *
 * The state is the idempotency record of the alert key (shared by all
 * replicas through the ledger): `at` = last send, `startsAt` = first firing,
 * `until` = the `endsAt` that was sent (so the record lives exactly as long
 * as Alertmanager considers the alert active).
 */
import type { EmittedAction } from './idempotency.ts';
import type { AlertmanagerAlert } from './alertmanager.ts';

/** The factor between `endsAt - now` and the re-send interval (see above). */
export const ENDS_AT_INTERVALS = 2;

export interface ViolationAlert {
  rule: string;
  severity: string;
  kind: string;
  /** "" for cluster-scoped objects. */
  namespace: string;
  name: string;
  message: string;
  epoch: string;
}

export type AlertDecision =
  | { type: 'fire'; startsAt: number; endsAt: number }
  | { type: 'wait'; dueAt: number }
  | { type: 'resolve'; startsAt: number }
  | { type: 'none' };

export function decideAlert(record: EmittedAction | undefined, violating: boolean, now: number, resendIntervalMs: number): AlertDecision {
  if (!violating) return record ? { type: 'resolve', startsAt: record.startsAt ?? record.at } : { type: 'none' };
  const endsAt = now + ENDS_AT_INTERVALS * resendIntervalMs;
  if (!record) return { type: 'fire', startsAt: now, endsAt };
  const dueAt = record.at + resendIntervalMs;
  if (now < dueAt) return { type: 'wait', dueAt };
  return { type: 'fire', startsAt: record.startsAt ?? record.at, endsAt };
}

export function alertLabels(v: ViolationAlert): Record<string, string> {
  return { alertname: 'PortalViolation', rule: v.rule, severity: v.severity, kind: v.kind, namespace: v.namespace, name: v.name };
}

function summary(v: ViolationAlert): string {
  const object = v.namespace ? `${v.kind} ${v.namespace}/${v.name}` : `${v.kind} ${v.name}`;
  return `${object} violates ${v.rule}`;
}

export function firingAlert(v: ViolationAlert, startsAt: number, endsAt: number, generatorURL?: string): AlertmanagerAlert {
  const alert: AlertmanagerAlert = {
    labels: alertLabels(v),
    annotations: { summary: summary(v), message: v.message, epoch: v.epoch },
    startsAt: new Date(startsAt).toISOString(),
    endsAt: new Date(endsAt).toISOString(),
  };
  if (generatorURL !== undefined) alert.generatorURL = generatorURL;
  return alert;
}

/** Same labels (Alertmanager matches by label set), `endsAt` now = resolved. */
export function resolvedAlert(v: ViolationAlert, startsAt: number, now: number, generatorURL?: string): AlertmanagerAlert {
  const alert = firingAlert(v, Math.min(startsAt, now), now, generatorURL);
  alert.annotations.summary = `resolved: ${alert.annotations.summary ?? ''}`;
  return alert;
}
