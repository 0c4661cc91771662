/**
 * One evaluation's variables (composition.ts): a frame allocated for each
 * evaluation of a composition that declares variables, holding each
 * variable's value (or error) once computed.
 *
 * Why a fresh frame and not state reset in place: the composition is
 * compiled once and lives in the old generation, while the request's
 * objects, meter and values are young. Every store of a young object into an
 * old one goes through V8's write barrier (a remembered-set insertion);
 * resetting state kept on the composition cost one per field per rule per
 * request. A young frame and a young context take none.
 *
 * The generated code reads a computed variable from `frame.values` inline and
 * calls {@link readVariable} for the first read (codegen-select.ts); the
 * composition's `variables` object (variables.ts) reads through the same
 * function, so there is one implementation of a read.
 *
 * Pure: no I/O.
 */
import { CostLimitExceeded, charge, type Meter } from './meter.ts';

/** Not computed yet (a slot's initial value). Never a CEL value. */
export const UNSET: unique symbol = Symbol('unset');

/** A declared variable as its frame computes it. */
export interface VariableDef {
  readonly name: string;
  readonly expression: string;
  readonly exec: (context: Record<string, unknown>, meter: Meter) => unknown;
  /**
   * Reads no other variable: its value and cost are the same in every
   * composition evaluated on the request (CEL is deterministic), so it is
   * computed once per request and shared (`shared`).
   */
  readonly shareable: boolean;
}

/** Values of shareable variables for one request and context, by expression. */
export type SharedValues = Map<string, { value: unknown; cost: number }>;

export interface VariableFrame {
  readonly defs: readonly VariableDef[];
  /** The context the variables' expressions run on (the evaluation's). */
  readonly context: Record<string, unknown>;
  /** The meter of the expression running now: a variable is charged to its reader. */
  readonly meter: Meter;
  readonly shared: SharedValues | undefined;
  /** Per variable: its value, or UNSET. */
  readonly values: unknown[];
  /** Per variable: what its evaluation threw, or UNSET (allocated at the first error). */
  errors: unknown[] | undefined;
}

/** A frame with nothing computed yet. */
export function newFrame(defs: readonly VariableDef[], context: Record<string, unknown>, meter: Meter, shared: SharedValues | undefined): VariableFrame {
  return { defs, context, meter, shared, values: unsetValues(defs.length), errors: undefined };
}

/**
 * `n` UNSETs in a packed array (a holey one costs a check per read): small
 * ones as literals, which optimised code allocates inline (a builtin such as
 * slice() or map() is a call per evaluation).
 */
function unsetValues(n: number): unknown[] {
  switch (n) {
    case 1:
      return [UNSET];
    case 2:
      return [UNSET, UNSET];
    case 3:
      return [UNSET, UNSET, UNSET];
    default:
      return Array.from({ length: n }, () => UNSET);
  }
}

/** Marker so a variable that failed rethrows the same error each time it is read. */
class VariableFailed extends Error {}

/** Variable `index` of the frame: computed on its first read, then the same value (or error) on every read. */
export function readVariable(frame: VariableFrame, index: number): unknown {
  const v = frame.values[index];
  if (v !== UNSET) return v;
  if (frame.errors === undefined || frame.errors[index] === UNSET) {
    const w = compute(frame, index);
    if (w !== UNSET) return w;
  }
  return failed((frame.defs[index] as VariableDef).name, (frame.errors as unknown[])[index]);
}

/** Computes variable `index` into the frame: its value, or UNSET with its error recorded. */
function compute(frame: VariableFrame, index: number): unknown {
  const def = frame.defs[index] as VariableDef;
  const hit = def.shareable ? frame.shared?.get(def.expression) : undefined;
  try {
    let value: unknown;
    if (hit !== undefined) {
      // Computed by another composition for this request: charge what computing it costs.
      charge(frame.meter, hit.cost);
      value = hit.value;
    } else {
      const before = frame.meter.used;
      value = def.exec(frame.context, frame.meter);
      if (def.shareable) frame.shared?.set(def.expression, { value, cost: frame.meter.used - before });
    }
    frame.values[index] = value;
    return value;
  } catch (e) {
    (frame.errors ??= frame.defs.map(() => UNSET))[index] = e;
    return UNSET;
  }
}

function failed(name: string, e: unknown): never {
  if (e instanceof CostLimitExceeded) throw e;
  throw new VariableFailed(`variable "${name}" failed: ${e instanceof Error ? ((e as { summary?: string }).summary ?? e.message.split('\n')[0]) : String(e)}`);
}
