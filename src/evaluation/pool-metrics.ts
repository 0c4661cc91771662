/**
 * The evaluation pools' metrics, shared by every pool of a registry (one
 * series per pool): abandoned and refused evaluations, queue depth and live
 * workers.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

export interface PoolMetrics {
  abandoned: Counter<'pool'>;
  rejected: Counter<'pool'>;
  outOfMemory: Counter<'pool'>;
}

type Reader = () => { threads: number; queued: number };
type PoolGauge = Gauge<'pool'> & { pools?: Map<string, Reader> };

/** Registers (once per registry) the pool metrics and adds `pool` to the gauges, read on scrape. */
export function poolMetrics(r: Registry, pool: string, read: Reader): PoolMetrics {
  const counter = (name: string, help: string): Counter<'pool'> =>
    (r.getSingleMetric(name) as Counter<'pool'> | undefined) ?? new Counter({ name, help, labelNames: ['pool'], registers: [r] });
  const metrics = {
    abandoned: counter('portal_evaluation_abandoned_total', 'Evaluations abandoned at the deadline (their worker, if running, was replaced), by pool.'),
    rejected: counter('portal_evaluation_rejected_total', 'Evaluations refused as overload (the pool queue or the flow share of it full, or not started in time for the request), by pool.'),
    outOfMemory: counter('portal_evaluation_out_of_memory_total', 'Evaluation threads that exhausted their memory (resourceLimits) and were replaced, by pool; each also counts as abandoned.'),
  };
  const existing = r.getSingleMetric('portal_evaluation_queue_depth') as PoolGauge | undefined;
  const pools = existing?.pools ?? new Map<string, Reader>();
  pools.set(pool, read);
  if (existing) return metrics;
  const depth: PoolGauge = new Gauge<'pool'>({
    name: 'portal_evaluation_queue_depth',
    help: 'Evaluations waiting for a worker, by pool.',
    labelNames: ['pool'],
    registers: [r],
    collect(this: Gauge<'pool'>) {
      for (const [name, reader] of pools) this.set({ pool: name }, reader().queued);
    },
  });
  depth.pools = pools;
  new Gauge<'pool'>({
    name: 'portal_evaluation_workers',
    help: 'Evaluation worker threads alive, by pool.',
    labelNames: ['pool'],
    registers: [r],
    collect(this: Gauge<'pool'>) {
      for (const [name, reader] of pools) this.set({ pool: name }, reader().threads);
    },
  });
  return metrics;
}
