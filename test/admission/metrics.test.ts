import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Counter, Histogram, Registry } from 'prom-client';
import { createAdmissionMetrics } from '../../src/observability/metrics.ts';
import type { AdmissionOutcome } from '../../src/policy/decision.ts';

/** The same series fed the usual way: one prom-client inc/observe per request. */
function reference(registry: Registry) {
  const requests = new Counter({
    name: 'portal_admission_requests_total',
    help: 'Admission requests answered, by operation, kind and decision.',
    labelNames: ['operation', 'kind', 'decision'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'portal_admission_request_duration_seconds',
    help: 'Time from receiving an admission request to answering it.',
    labelNames: ['decision'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  return (operation: string, kind: string, decision: AdmissionOutcome, seconds: number) => {
    requests.inc({ operation, kind, decision });
    duration.observe({ decision }, seconds);
  };
}

/** Sample lines of the two series, with _sum rounded (the batched sum adds in another order). */
async function series(registry: Registry): Promise<string[]> {
  const text = await registry.metrics();
  return text
    .split('\n')
    .filter((l) => l.startsWith('portal_admission_requests_total') || l.startsWith('portal_admission_request_duration_seconds'))
    .map((l) => (l.includes('_sum{') ? l.replace(/ ([\d.e+-]+)$/, (_m, v: string) => ` ${Number(v).toFixed(9)}`) : l))
    .sort();
}

describe('admission metrics', () => {
  it('answered() shows on /metrics exactly as per-request inc/observe would, across scrapes', async () => {
    const fast = new Registry();
    const slow = new Registry();
    const metrics = createAdmissionMetrics(fast);
    const record = reference(slow);
    const kinds = ['Pod', 'Deployment', ''];
    const operations = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT', ''];
    const decisions: AdmissionOutcome[] = ['allow', 'warn', 'deny', 'exempt', 'not_ready', 'error', 'invalid'];
    // Durations on, just below and just above bucket bounds, and past the last one.
    const durations = [0.0001, 0.0005, 0.00050001, 0.001, 0.003, 0.01, 0.7, 10, 12.5];
    let i = 0;
    for (let scrape = 0; scrape < 3; scrape++) {
      for (let n = 0; n < 400; n++, i++) {
        // not_ready only from the last round on: a series first seen after earlier scrapes.
        const d = decisions[i % 7]!;
        const args = [operations[i % 5], kinds[i % 3], d === 'not_ready' && scrape < 2 ? 'allow' : d, durations[i % durations.length]] as const;
        metrics.answered(args[0]!, args[1]!, args[2]!, args[3]!);
        record(args[0]!, args[1]!, args[2]!, args[3]!);
      }
      assert.deepEqual(await series(fast), await series(slow), `after scrape ${scrape}`);
    }
    const lines = await series(fast);
    for (const d of decisions) assert.ok(lines.some((l) => l.includes(`decision="${d}"`)), d);
  });

  it('a scrape with nothing new changes nothing', async () => {
    const registry = new Registry();
    const metrics = createAdmissionMetrics(registry);
    metrics.answered('CREATE', 'Pod', 'allow', 0.002);
    const first = await registry.metrics();
    assert.equal(await registry.metrics(), first);
    assert.match(first, /portal_admission_requests_total\{operation="CREATE",kind="Pod",decision="allow"\} 1\n/);
    assert.match(first, /portal_admission_request_duration_seconds_bucket\{le="0.0025",decision="allow"\} 1\n/);
    assert.match(first, /portal_admission_request_duration_seconds_bucket\{le="0.001",decision="allow"\} 0\n/);
  });
});
