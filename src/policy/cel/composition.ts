/**
 * A validation block with ValidatingAdmissionPolicy's shape — matchConditions,
 * variables, validations (expression, message, messageExpression, reason) —
 * compiled once and evaluated per request. Used by Portal's `validate.cel`
 * and by the VAP evaluator.
 *
 * Semantics follow the API server:
 * - matchConditions are evaluated in order; any `false` means "not matched";
 *   an error in one is an error (unless another is false: false wins).
 * - variables are evaluated lazily, at most once per evaluation, and may read
 *   earlier variables only.
 * - a validation fails when its expression is false; its message is
 *   messageExpression's value (if it evaluates to a non-empty string without
 *   error), else `message`, else `failed expression: EXPR`.
 */
import {
  compile,
  celContext,
  evaluate,
  newBudget,
  runUnmetered,
  type Activation,
  type Budget,
  type CompileError,
  type Program,
} from './engine.ts';
import { activeMeter, charge } from './meter.ts';
import { celValuesOnly } from './runtime.ts';

export interface NamedExpression {
  name: string;
  expression: string;
}

export interface ValidationSpec {
  expression: string;
  message?: string;
  messageExpression?: string;
  /** Unauthorized | Forbidden | Invalid | RequestEntityTooLarge; the API server defaults to Invalid. */
  reason?: string;
}

export interface CompositionSpec {
  matchConditions?: readonly NamedExpression[];
  variables?: readonly NamedExpression[];
  validations: readonly ValidationSpec[];
}

/** A compile error with the field it came from, e.g. `validations[1].expression`. */
export interface FieldCompileError extends CompileError {
  field: string;
}

interface CompiledValidation {
  spec: ValidationSpec;
  program: Program;
  messageProgram: Program | undefined;
}

export interface Composition {
  readonly ok: true;
  readonly matchConditions: readonly { name: string; program: Program }[];
  readonly variables: readonly { name: string; program: Program }[];
  readonly validations: readonly CompiledValidation[];
}

export type CompositionResult = Composition | { ok: false; errors: FieldCompileError[] };

/** At most 64 matchConditions, as the API server allows. */
export const MAX_MATCH_CONDITIONS = 64;

/** Compiles every expression; all errors are returned, each with its field path. */
export function compileComposition(spec: CompositionSpec): CompositionResult {
  const errors: FieldCompileError[] = [];
  const fail = (field: string, e: CompileError): void => void errors.push({ ...e, field });
  const names: string[] = [];
  const variables: { name: string; program: Program }[] = [];
  (spec.variables ?? []).forEach((v, i) => {
    const p = compile(v.expression, { variables: [...names], resultType: 'any' });
    if (p.ok) variables.push({ name: v.name, program: p });
    else fail(`variables[${i}].expression`, p);
    names.push(v.name);
  });
  const mcs = spec.matchConditions ?? [];
  if (mcs.length > MAX_MATCH_CONDITIONS) {
    errors.push({ ok: false, field: 'matchConditions', message: `at most ${MAX_MATCH_CONDITIONS} matchConditions are allowed, found ${mcs.length}`, position: { offset: 0, line: 1, column: 1 }, expression: '' });
  }
  const matchConditions: { name: string; program: Program }[] = [];
  mcs.forEach((m, i) => {
    const p = compile(m.expression, { variables: names, resultType: 'bool' });
    if (p.ok) matchConditions.push({ name: m.name, program: p });
    else fail(`matchConditions[${i}].expression`, p);
  });
  const validations: CompiledValidation[] = [];
  spec.validations.forEach((v, i) => {
    const p = compile(v.expression, { variables: names, resultType: 'bool' });
    let mp: Program | undefined;
    if (v.messageExpression !== undefined && v.messageExpression !== '') {
      const m = compile(v.messageExpression, { variables: names, resultType: 'string' });
      if (m.ok) mp = m;
      else fail(`validations[${i}].messageExpression`, m);
    }
    if (p.ok) validations.push({ spec: v, program: p, messageProgram: mp });
    else fail(`validations[${i}].expression`, p);
  });
  if (errors.length > 0) return { ok: false, errors };
  return Object.freeze({ ok: true as const, matchConditions, variables, validations });
}

/** One validation's outcome. */
export type ValidationOutcome =
  | { index: number; result: 'pass' }
  | { index: number; result: 'fail'; message: string; reason: string }
  | { index: number; result: 'error'; message: string; kind: 'runtime' | 'cost' };

export type CompositionOutcome =
  /** A matchCondition was false. */
  | { matched: false; condition: string; cost: number }
  /** A matchCondition could not be evaluated. */
  | { matched: 'error'; condition: string; message: string; kind: 'runtime' | 'cost'; cost: number }
  | { matched: true; validations: ValidationOutcome[]; cost: number };

/** Marker so a variable that failed rethrows the same error each time it is read. */
class VariableFailed extends Error {}

/** Where a `variables` object keeps its per-evaluation state (a symbol: invisible to CEL's key iteration). */
const STATE = Symbol('variables');

interface VariablesState {
  context: Record<string, unknown>;
  /** The request's shared context (celContext), key of the shared values. */
  base: object;
  /** Per variable: undefined (not yet read), { value } or { error }. */
  slots: ({ value: unknown } | { error: unknown } | undefined)[];
}

/**
 * Per composition, once: the property descriptors of its `variables` object.
 * Each getter evaluates its expression on first read (under the reading
 * expression's meter) and caches the value or the error in the object's
 * state. Shared getters (they find the state through `this`) make a
 * `variables` object per evaluation cost one allocation per variable read,
 * not a closure and a descriptor per variable per evaluation.
 */
const descriptorCache = new WeakMap<Composition, PropertyDescriptorMap>();

/**
 * Values of variables that read no other variable, per request context, by
 * expression text, with the cost their computation charged. Only complete
 * computations are stored (an error or an exceeded limit is recomputed, so
 * it is charged and reported like the first time). CEL values are never
 * mutated, so sharing them between compositions is safe.
 */
const sharedValues = new WeakMap<object, Map<string, { value: unknown; cost: number }>>();

function sharedValuesOf(base: object): Map<string, { value: unknown; cost: number }> {
  let m = sharedValues.get(base);
  if (m === undefined) {
    m = new Map();
    sharedValues.set(base, m);
  }
  return m;
}

function variableDescriptors(c: Composition): PropertyDescriptorMap {
  const hit = descriptorCache.get(c);
  if (hit) return hit;
  const descriptors: PropertyDescriptorMap = {};
  c.variables.forEach(({ name, program }, index) => {
    // A variable that reads no other variable has the same value and cost in
    // every composition evaluated on the request (CEL is deterministic): the
    // Pod Security rules each declare `variables.all`, computed once.
    const shareable = !program.expression.includes('variables');
    descriptors[name] = {
      enumerable: true,
      get(this: { [STATE]: VariablesState }) {
        const state = this[STATE];
        let slot = state.slots[index];
        if (slot === undefined) {
          const values = shareable ? sharedValuesOf(state.base) : undefined;
          const hit = values?.get(program.expression);
          try {
            if (hit !== undefined) {
              // Computed by another composition for this request: charge what computing it costs.
              charge(hit.cost);
              slot = { value: hit.value };
            } else {
              const before = activeMeter()?.used;
              const value = runUnmetered(program, state.context);
              const after = activeMeter()?.used;
              if (values !== undefined && before !== undefined && after !== undefined) values.set(program.expression, { value, cost: after - before });
              slot = { value };
            }
          } catch (e) {
            slot = { error: e };
          }
          state.slots[index] = slot;
        }
        if ('error' in slot) {
          const e = slot.error;
          if (e instanceof Error && e.name === 'CostLimitExceeded') throw e;
          throw new VariableFailed(`variable "${name}" failed: ${e instanceof Error ? ((e as { summary?: string }).summary ?? e.message.split('\n')[0]) : String(e)}`);
        }
        return slot.value;
      },
    };
  });
  descriptorCache.set(c, descriptors);
  return descriptors;
}

/**
 * The `variables` object for one evaluation (see variableDescriptors). One
 * object per composition, reused: each evaluation gives it fresh state.
 * Evaluation is synchronous and a composition never evaluates itself, so no
 * two evaluations of one composition overlap, and values never outlive their
 * evaluation (outcomes carry only results and messages).
 */
const variablesObjects = new WeakMap<Composition, { [STATE]: VariablesState }>();

function lazyVariables(c: Composition, context: Record<string, unknown>, base: object): Record<string, unknown> {
  const state: VariablesState = { context, base, slots: [] };
  let vars = variablesObjects.get(c);
  if (vars === undefined) {
    // Built by CEL: a number a variable gives is a CEL value already (runtime.ts).
    vars = celValuesOnly(Object.defineProperties({ [STATE]: state }, variableDescriptors(c)));
    variablesObjects.set(c, vars);
  }
  vars[STATE] = state;
  return vars as unknown as Record<string, unknown>;
}

/**
 * Evaluates a composition against one activation. `budget` is the request's
 * budget (shared across every policy evaluated for the request).
 */
export function evaluateComposition(c: Composition, activation: Activation, budget: Budget = newBudget()): CompositionOutcome {
  const shared = celContext(activation);
  const context: Record<string, unknown> = c.variables.length > 0 ? { ...shared } : (shared as Record<string, unknown>);
  if (c.variables.length > 0) context['variables'] = lazyVariables(c, context, shared);
  let cost = 0;
  let conditionError: { condition: string; message: string; kind: 'runtime' | 'cost' } | undefined;
  for (const mc of c.matchConditions) {
    const r = evaluate(mc.program, context, budget, undefined, true);
    cost += r.cost;
    if (!r.ok) {
      conditionError ??= { condition: mc.name, message: r.message, kind: r.kind };
      if (r.kind === 'cost') break;
      continue;
    }
    if (r.value === false) return { matched: false, condition: mc.name, cost };
  }
  if (conditionError) return { matched: 'error', ...conditionError, cost };
  const validations: ValidationOutcome[] = [];
  c.validations.forEach((v, index) => {
    const r = evaluate(v.program, context, budget, undefined, true);
    cost += r.cost;
    if (!r.ok) {
      validations.push({ index, result: 'error', message: r.message, kind: r.kind });
      return;
    }
    if (r.value === true) {
      validations.push({ index, result: 'pass' });
      return;
    }
    let message = v.spec.message ?? '';
    if (v.messageProgram) {
      const m = evaluate(v.messageProgram, context, budget, undefined, true);
      cost += m.cost;
      // The API server falls back to `message` when messageExpression fails
      // or gives an empty string (it logs the failure).
      if (m.ok && typeof m.value === 'string' && m.value.trim() !== '') message = m.value.replace(/\s*\n\s*/g, ' ');
    }
    if (message === '') message = `failed expression: ${v.spec.expression.trim()}`;
    validations.push({ index, result: 'fail', message, reason: v.spec.reason ?? 'Invalid' });
  });
  return { matched: true, validations, cost };
}
