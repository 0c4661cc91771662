/**
 * The timers the in-process benchmarks share. CPU time (process.cpuUsage),
 * not wall time, wherever the figure is a cost: on this shared machine wall
 * time mostly measures how long the scheduler kept us waiting. (GC threads'
 * time counts: it is part of the cost.)
 */

/** CPU seconds this process has used (user + system). */
export function cpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/** Wall-clock seconds, for the figures that are a rate a caller sees. */
export const wallSeconds = (): number => performance.now() / 1000;

export interface CpuMicrosOptions {
  /** Calls per measured batch. */
  batch: number;
  /** Batches run first and not measured (JIT warm-up). */
  warmupBatches: number;
}

/**
 * CPU microseconds per call: the best of 10 batches, so time spent waiting
 * for a busy CPU (other jobs on the machine) is not counted.
 */
export function cpuMicrosPerCall(fn: () => unknown, { batch, warmupBatches }: CpuMicrosOptions): number {
  for (let i = 0; i < batch * warmupBatches; i++) fn();
  let best = Infinity;
  for (let r = 0; r < 10; r++) {
    const c0 = process.cpuUsage();
    for (let i = 0; i < batch; i++) fn();
    const c = process.cpuUsage(c0);
    best = Math.min(best, (c.user + c.system) / batch);
  }
  return best;
}

export interface OpsPerSecondOptions {
  /** Calls between two clock reads (so the reads stay cheap); 5 batches warm up first. */
  batch: number;
  /** The clock, in seconds: CPU time unless the caller wants wall time. */
  clock?: () => number;
}

/** Runs fn (given the call's index) repeatedly for `seconds` on `clock`; returns calls per second. */
export function opsPerSecond(fn: (i: number) => unknown, seconds: number, { batch, clock = cpuSeconds }: OpsPerSecondOptions): number {
  for (let i = 0; i < batch * 5; i++) fn(i);
  let ops = 0;
  const start = clock();
  const deadline = start + seconds;
  let now = start;
  while (now < deadline) {
    for (let i = 0; i < batch; i++) fn(ops + i);
    ops += batch;
    now = clock();
  }
  return ops / (now - start);
}
