/**
 * The cost meter of one CEL evaluation, the counterpart of cel-go's
 * `ActualCostTracker` that the API server uses.
 *
 * The generated code (codegen.ts) charges each node it evaluates on the
 * meter it is given, inline; library functions (lib/) charge the work that
 * depends on their inputs through {@link charge}, on the meter of the
 * evaluation running now (cel-js is synchronous, and each worker thread has
 * its own module instance). Exceeding the limit throws
 * {@link CostLimitExceeded}, which engine.ts turns into a `cost` error.
 */
/** A meter for one evaluation. `limit` already accounts for the request budget. */
export interface Meter {
  used: number;
  limit: number;
}

/** Thrown through cel-js when a meter is exhausted. */
export class CostLimitExceeded extends Error {
  constructor(readonly meter: Meter) {
    super(`cost limit ${meter.limit} exceeded`);
    this.name = 'CostLimitExceeded';
  }
}

let active: Meter | undefined;

/** The meter of the evaluation running now (cel-js is synchronous). */
export function activeMeter(): Meter | undefined {
  return active;
}

/** Charge extra units to the running evaluation (library functions). */
export function charge(units: number): void {
  const m = active;
  if (m === undefined) return;
  m.used += units;
  if (m.used > m.limit) throw new CostLimitExceeded(m);
}

/** The size charge of a value: 0.1 per character or element, rounded up. */
export function sizeCost(value: unknown): number {
  if (typeof value === 'string') return value.length > 9 ? Math.ceil(value.length * 0.1) : value.length === 0 ? 0 : 1;
  if (Array.isArray(value) || value instanceof Uint8Array) return Math.ceil(value.length * 0.1);
  if (value instanceof Map || value instanceof Set) return Math.ceil(value.size * 0.1);
  return 0;
}

/** Makes `meter` the active one; returns the previous one for exitMeter (always call it, in a finally). */
export function enterMeter(meter: Meter): Meter | undefined {
  const outer = active;
  active = meter;
  return outer;
}

export function exitMeter(outer: Meter | undefined): void {
  active = outer;
}
