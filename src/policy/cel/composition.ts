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
import { compile, type CompileError, type Program } from './compile.ts';
import { celContext, classify, newBudget, PER_CALL_COST_LIMIT, type Activation, type Budget, type EvalResult } from './engine.ts';
import type { Meter } from './meter.ts';
import { bindVariables, variablesObject, type VariablesObject } from './variables.ts';

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
  /** @internal the lazily evaluated `variables` object (variables.ts), when there are variables. */
  readonly vars: VariablesObject | undefined;
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
  const vars = variables.length > 0 ? variablesObject(variables) : undefined;
  return Object.freeze({ ok: true as const, matchConditions, variables, validations, vars });
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

/**
 * The CEL context of an activation for this request: built once per
 * activation object and request (in the request's Budget), so compositions
 * evaluated on the same activation share it, and the variable values that
 * depend on it only.
 */
export function contextFor(activation: object, budget: Budget, build: () => Record<string, unknown>): Record<string, unknown> {
  budget.contexts ??= new Map();
  let context = budget.contexts.get(activation) as Record<string, unknown> | undefined;
  if (context === undefined) budget.contexts.set(activation, (context = build()));
  return context;
}

/** One expression on the composition's meter: a boolean as is (the common case, no result object), anything else classified. */
function test(program: Program, context: Record<string, unknown>, meter: Meter, budget: Budget): boolean | EvalResult {
  meter.used = 0;
  meter.limit = Math.min(PER_CALL_COST_LIMIT, budget.remaining);
  let value: unknown;
  let failure: unknown;
  try {
    value = program.exec(context, meter);
  } catch (e) {
    failure = e ?? new Error(String(e));
  }
  if (failure === undefined && typeof value === 'boolean' && meter.used <= meter.limit) {
    budget.remaining = Math.max(0, budget.remaining - meter.used);
    return value;
  }
  return classify(program, meter, budget, PER_CALL_COST_LIMIT, value, failure, false);
}

const NO_OUTCOMES: readonly ValidationOutcome[] = Object.freeze([]);

/**
 * Evaluates a composition on a context (see contextFor). With `passes`
 * false, the outcome lists only failed and erroring validations (the
 * rule path: nothing is allocated for a validation that passes).
 */
export function runComposition(c: Composition, shared: Record<string, unknown>, budget: Budget, passes = true): CompositionOutcome {
  // One meter per request, reset for each expression (evaluation is synchronous).
  const meter: Meter = (budget.meter ??= { used: 0, limit: 0 });
  let context = shared;
  if (c.vars !== undefined) {
    // A literal, not a spread: one object shape for every composition.
    context = {
      object: shared['object'],
      oldObject: shared['oldObject'],
      request: shared['request'],
      params: shared['params'],
      namespaceObject: shared['namespaceObject'],
      variables: c.vars,
    };
    bindVariables(c.vars, context, shared, meter, budget);
  }
  let cost = 0;
  let conditionError: { condition: string; message: string; kind: 'runtime' | 'cost' } | undefined;
  for (const mc of c.matchConditions) {
    const r = test(mc.program, context, meter, budget);
    cost += Math.min(meter.used, meter.limit + 1);
    if (r === false) return { matched: false, condition: mc.name, cost };
    if (r === true) continue;
    if (!r.ok) {
      conditionError ??= { condition: mc.name, message: r.message, kind: r.kind };
      if (r.kind === 'cost') break;
    }
  }
  if (conditionError) return { matched: 'error', ...conditionError, cost };
  let validations: ValidationOutcome[] | undefined;
  for (let index = 0; index < c.validations.length; index++) {
    const v = c.validations[index] as CompiledValidation;
    const r = test(v.program, context, meter, budget);
    cost += Math.min(meter.used, meter.limit + 1);
    if (r === true) {
      if (passes) (validations ??= []).push({ index, result: 'pass' });
      continue;
    }
    if (r !== false && !r.ok) {
      (validations ??= []).push({ index, result: 'error', message: r.message, kind: r.kind });
      continue;
    }
    let message = v.spec.message ?? '';
    if (v.messageProgram) {
      meter.used = 0;
      meter.limit = Math.min(PER_CALL_COST_LIMIT, budget.remaining);
      let value: unknown;
      let failure: unknown;
      try {
        value = v.messageProgram.exec(context, meter);
      } catch (e) {
        failure = e ?? new Error(String(e));
      }
      const m = classify(v.messageProgram, meter, budget, PER_CALL_COST_LIMIT, value, failure, false);
      cost += m.cost;
      // The API server falls back to `message` when messageExpression fails
      // or gives an empty string (it logs the failure).
      if (m.ok && typeof m.value === 'string' && m.value.trim() !== '') message = m.value.replace(/\s*\n\s*/g, ' ');
    }
    if (message === '') message = `failed expression: ${v.spec.expression.trim()}`;
    (validations ??= []).push({ index, result: 'fail', message, reason: v.spec.reason ?? 'Invalid' });
  }
  return { matched: true, validations: validations ?? (NO_OUTCOMES as ValidationOutcome[]), cost };
}

/**
 * Evaluates a composition against one activation. `budget` is the request's
 * budget (shared across every policy evaluated for the request); compositions
 * evaluated on the same activation object and budget share their contexts.
 */
export function evaluateComposition(c: Composition, activation: Activation, budget: Budget = newBudget()): CompositionOutcome {
  return runComposition(c, contextFor(activation, budget, () => celContext(activation)), budget);
}
