/**
 * The cost meter of one CEL evaluation, the counterpart of cel-go's
 * `ActualCostTracker` that the API server uses.
 *
 * The meter travels with the evaluation: the generated code (codegen.ts)
 * receives it as a parameter and charges each node inline, and hands it to
 * every runtime helper whose cost depends on its inputs (charges.ts, the
 * regex functions). Nothing here is process-global (issue 21): two
 * evaluations never share a meter, and a meter lives only as long as its
 * evaluation. Exceeding the limit throws {@link CostLimitExceeded}, which
 * engine.ts turns into a `cost` error.
 */
/** A meter for one evaluation. `limit` already accounts for the request budget. */
export interface Meter {
  used: number;
  limit: number;
}

/** Thrown when a meter is exhausted. */
export class CostLimitExceeded extends Error {
  constructor(readonly meter: Meter) {
    super(`cost limit ${meter.limit} exceeded`);
    this.name = 'CostLimitExceeded';
  }
}

/** Charges `units` to `m`; throws CostLimitExceeded past its limit. */
export function charge(m: Meter, units: number): void {
  m.used += units;
  if (m.used > m.limit) throw new CostLimitExceeded(m);
}

/** Units left before `m`'s limit: the cap of every size measurement. */
export function remaining(m: Meter): number {
  return Math.max(0, m.limit - m.used);
}

/** The size charge of a value: 0.1 per character or element, rounded up. */
export function sizeCost(value: unknown): number {
  if (typeof value === 'string') return value.length > 9 ? Math.ceil(value.length * 0.1) : value.length === 0 ? 0 : 1;
  if (value === null || typeof value !== 'object') return 0;
  if (Array.isArray(value)) return Math.ceil(value.length * 0.1);
  // A map read from the input (the common case here) is none of the classes below: no prototype walks.
  if ((value as { constructor?: unknown }).constructor === Object) return 0;
  if (value instanceof Uint8Array) return Math.ceil(value.length * 0.1);
  if (value instanceof Map || value instanceof Set) return Math.ceil(value.size * 0.1);
  return 0;
}
