/**
 * Admission metrics on an injected prom-client Registry (never the global
 * one), `portal_` prefix and unit suffixes (STYLE.md, habit 5).
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** How an admission request ended, the `decision` label. Bounded set. */
export type AdmissionDecision = 'allow' | 'warn' | 'deny' | 'exempt' | 'not_ready' | 'error' | 'invalid';

export interface AdmissionMetrics {
  requests: Counter<'operation' | 'kind' | 'decision'>;
  duration: Histogram<'decision'>;
  errors: Counter<'reason'>;
  inFlight: Gauge;
  rulesLoaded: Gauge;
}

/**
 * Buckets from 0.5 ms to 10 s: an admission decision is normally well under
 * a millisecond, and the apiserver's default webhook timeout is 10 s, so
 * anything beyond that is a failure whatever its exact value.
 */
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export function createAdmissionMetrics(registry: Registry): AdmissionMetrics {
  return {
    requests: new Counter({
      name: 'portal_admission_requests_total',
      help: 'Admission requests answered, by operation, kind and decision.',
      labelNames: ['operation', 'kind', 'decision'] as const,
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'portal_admission_request_duration_seconds',
      help: 'Time from receiving an admission request to answering it.',
      labelNames: ['decision'] as const,
      buckets: DURATION_BUCKETS,
      registers: [registry],
    }),
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
  };
}
