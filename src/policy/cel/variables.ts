/**
 * The lazily evaluated `variables` of a composition (composition.ts): each
 * variable is computed on its first read in one evaluation, under the
 * meter of the expression reading it, and kept for the rest of that
 * evaluation (the value, or the error, which each later read rethrows).
 *
 * The `variables` object is built once per composition, at compile time:
 * a plain object (CEL sees a map of exactly the declared names) whose
 * getters hold the evaluation's state in their closure, so an evaluation
 * allocates nothing, not a closure and a descriptor per variable. The
 * composition keeps the state beside the object and resets it for each
 * evaluation (not through the object: each variables object has its own
 * hidden class, so one lookup site for all of them would be megamorphic).
 * The object belongs to its composition (no module-level table);
 * evaluation is synchronous and a composition never evaluates itself, so
 * two evaluations of one composition never overlap.
 *
 * Pure: no I/O.
 */
import type { Budget } from './engine.ts';
import { CostLimitExceeded, charge, type Meter } from './meter.ts';
import type { Program } from './compile.ts';
import { celValuesOnly } from './values-marks.ts';

/** Not computed yet (a slot's initial value). */
const UNSET: unique symbol = Symbol('unset');

/** One evaluation's state (one per composition, reset by each evaluation: no allocation per read). */
export interface VariablesState {
  /** The context the variables' expressions run on (the composition's, set once, see composition.ts). */
  context: Record<string, unknown>;
  /** The meter of the expression running now (variables are charged to their reader). */
  meter: Meter;
  /** Values of variables that read no other variable, shared by the request's compositions on the same context. */
  shared: Map<string, { value: unknown; cost: number }> | undefined;
  /** Per variable: its value, or UNSET. */
  readonly values: unknown[];
  /** Per variable: what its evaluation threw, or UNSET. */
  readonly errors: unknown[];
}

/** A composition's variables: the object CEL reads (`variables`) and its per-evaluation state. */
export interface Variables {
  readonly object: Readonly<Record<string, unknown>>;
  readonly state: VariablesState;
}

/** Marker so a variable that failed rethrows the same error each time it is read. */
class VariableFailed extends Error {}

/** Computes variable `index` into `state` (its value or its error). */
function compute(program: Program, state: VariablesState, index: number, shareable: boolean): void {
  const hit = shareable ? state.shared?.get(program.expression) : undefined;
  try {
    if (hit !== undefined) {
      // Computed by another composition for this request: charge what computing it costs.
      charge(state.meter, hit.cost);
      state.values[index] = hit.value;
      return;
    }
    const before = state.meter.used;
    const value = program.exec(state.context, state.meter);
    if (shareable) state.shared?.set(program.expression, { value, cost: state.meter.used - before });
    state.values[index] = value;
  } catch (e) {
    state.errors[index] = e;
  }
}

function failed(name: string, e: unknown): never {
  if (e instanceof CostLimitExceeded) throw e;
  throw new VariableFailed(`variable "${name}" failed: ${e instanceof Error ? ((e as { summary?: string }).summary ?? e.message.split('\n')[0]) : String(e)}`);
}

/**
 * The `variables` of a composition's variables (built once, at compile
 * time); the composition sets `state.context` to its own context object.
 */
export function compileVariables(variables: readonly { name: string; program: Program }[]): Variables {
  // Packed arrays (a holey one costs a check per read), reset in place by bindVariables.
  const values: unknown[] = variables.map(() => UNSET);
  const errors: unknown[] = variables.map(() => UNSET);
  const state: VariablesState = { context: {}, meter: { used: 0, limit: 0 }, shared: undefined, values, errors };
  const descriptors: PropertyDescriptorMap = {};
  variables.forEach(({ name, program }, index) => {
    // A variable that reads no other variable has the same value and cost in
    // every composition evaluated on the request (CEL is deterministic): the
    // Pod Security rules each declare `variables.all`, computed once.
    const shareable = !program.expression.includes('variables');
    descriptors[name] = {
      enumerable: true,
      get() {
        const v = values[index];
        // Computed already in this evaluation: the common read, one check.
        if (v !== UNSET) return v;
        if (errors[index] === UNSET) compute(program, state, index, shareable);
        if (errors[index] !== UNSET) failed(name, errors[index]);
        return values[index];
      },
    };
  });
  // Built by CEL: a number a variable gives is a CEL value already (values-marks.ts).
  const object = celValuesOnly(Object.defineProperties({}, descriptors) as Record<string, unknown>);
  return Object.freeze({ object, state });
}

/** Starts an evaluation: the state is reset; `base` is the request's shared context (key of the shared values). */
export function bindVariables(vars: Variables, base: object, meter: Meter, budget: Budget): void {
  const state = vars.state;
  state.meter = meter;
  state.shared = sharedValues(base, budget);
  const { values, errors } = state;
  for (let i = 0; i < values.length; i++) {
    values[i] = UNSET;
    errors[i] = UNSET;
  }
}

/** The request's shared values for one context (the last one looked up is kept at hand: most rules of a request share it). */
function sharedValues(base: object, budget: Budget): Map<string, { value: unknown; cost: number }> {
  const last = budget.lastValues;
  if (last !== undefined && last.base === base) return last.values;
  budget.values ??= new Map();
  let values = budget.values.get(base);
  if (values === undefined) budget.values.set(base, (values = new Map()));
  budget.lastValues = { base, values };
  return values;
}
