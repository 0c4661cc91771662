/**
 * The lazily evaluated `variables` of a composition (composition.ts): each
 * variable is computed on its first read in one evaluation, under the
 * meter of the expression reading it, and kept for the rest of that
 * evaluation (the value, or the error, which each later read rethrows).
 * Each evaluation has its own frame (variable-frame.ts).
 *
 * The `variables` object is built once per composition, at compile time:
 * a plain object (CEL sees a map of exactly the declared names) whose
 * getters read the frame of the evaluation running now. The generated
 * code of the composition's expressions reads the frame directly
 * (codegen-select.ts); the object serves whatever reads `variables` as a
 * whole and cel-js's evaluation (the fallback). Evaluation is synchronous
 * and a composition never evaluates itself, so two evaluations of one
 * composition never overlap.
 *
 * Pure: no I/O.
 */
import type { Budget } from './engine.ts';
import type { Meter } from './meter.ts';
import type { Program } from './compile.ts';
import { celValuesOnly } from './values-marks.ts';
import { newFrame, readVariable, type SharedValues, type VariableDef, type VariableFrame } from './variable-frame.ts';

/** A composition's variables: the object CEL reads (`variables`), their definitions, and the frame of the evaluation running now. */
export interface Variables {
  readonly object: Readonly<Record<string, unknown>>;
  readonly defs: readonly VariableDef[];
  /**
   * The frame the object's getters read, kept current only when something
   * reads the object (`readByObject`): setting it stores a young frame into
   * this old object, a write barrier per evaluation (variable-frame.ts).
   */
  readonly current: { frame: VariableFrame | undefined };
  readonly readByObject: boolean;
}

/**
 * The variables of a composition (built once, at compile time).
 * `readByObject`: some expression of the composition reads the `variables`
 * object (Program.readsVariablesObject).
 */
export function compileVariables(variables: readonly { name: string; program: Program }[], readByObject: boolean): Variables {
  // A variable that reads no other variable has the same value and cost in
  // every composition evaluated on the request (CEL is deterministic): the
  // Pod Security rules each declare `variables.all`, computed once.
  const defs: VariableDef[] = variables.map(({ name, program }) => ({ name, expression: program.expression, exec: program.exec, shareable: !program.expression.includes('variables') }));
  const current: Variables['current'] = { frame: undefined };
  const descriptors: PropertyDescriptorMap = {};
  defs.forEach(({ name }, index) => {
    descriptors[name] = { enumerable: true, get: () => readVariable(current.frame as VariableFrame, index) };
  });
  // Built by CEL: a number a variable gives is a CEL value already (values-marks.ts).
  const object = celValuesOnly(Object.defineProperties({}, descriptors) as Record<string, unknown>);
  return Object.freeze({ object, defs, current, readByObject });
}

/**
 * Starts an evaluation on `context` (its own, built by the composition):
 * a new frame, set as the context's `frame` and as the current one.
 * `base` is the request's shared context (key of the shared values).
 */
export function startFrame(vars: Variables, context: Record<string, unknown>, base: object, meter: Meter, budget: Budget): void {
  const frame = newFrame(vars.defs, context, meter, sharedValues(base, budget));
  context['frame'] = frame;
  if (vars.readByObject) vars.current.frame = frame;
}

/** The request's shared values for one context (the last one looked up is kept at hand: most rules of a request share it). */
function sharedValues(base: object, budget: Budget): SharedValues {
  const last = budget.lastValues;
  if (last !== undefined && last.base === base) return last.values;
  budget.values ??= new Map();
  let values = budget.values.get(base);
  if (values === undefined) budget.values.set(base, (values = new Map()));
  budget.lastValues = { base, values };
  return values;
}
