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
import { compileVariables, startFrame, type Variables } from './variables.ts';
import { compositionCheck, PASSED, type CheckStop, type CompositionCheck } from './composition-check.ts';

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
  /** @internal the lazily evaluated `variables` (variables.ts), when there are variables. */
  readonly vars: Variables | undefined;
  /** @internal the rule path's pass check (composition-check.ts); undefined: the general loop only (the tests compare with it). */
  readonly check: CompositionCheck | undefined;
  /** @internal where the check stopped (one per composition, reused by each evaluation: evaluation is synchronous and never re-enters a composition). */
  readonly stop: CheckStop;
}

export type CompositionResult = Composition | { ok: false; errors: FieldCompileError[] };

/** At most 64 matchConditions, as the API server allows. */
export const MAX_MATCH_CONDITIONS = 64;

/** Compiles every expression; all errors are returned, each with its field path. */
export function compileComposition(spec: CompositionSpec): CompositionResult {
  const errors: FieldCompileError[] = [];
  const fail = (field: string, e: CompileError): void => void errors.push({ ...e, field });
  const names = (spec.variables ?? []).map((v) => v.name);
  const variables: { name: string; program: Program }[] = [];
  // With unique names, the generated code reads a variable from its frame by
  // index (variable-frame.ts); a name declared twice reads through the
  // `variables` object, as cel-js's evaluation does.
  const slots = new Set(names).size === names.length;
  (spec.variables ?? []).forEach((v, i) => {
    const p = compile(v.expression, { variables: names.slice(0, i), resultType: 'any', slots });
    if (p.ok) variables.push({ name: v.name, program: p });
    else fail(`variables[${i}].expression`, p);
  });
  const mcs = spec.matchConditions ?? [];
  if (mcs.length > MAX_MATCH_CONDITIONS) {
    errors.push({ ok: false, field: 'matchConditions', message: `at most ${MAX_MATCH_CONDITIONS} matchConditions are allowed, found ${mcs.length}`, position: { offset: 0, line: 1, column: 1 }, expression: '' });
  }
  const matchConditions: { name: string; program: Program }[] = [];
  mcs.forEach((m, i) => {
    const p = compile(m.expression, { variables: names, resultType: 'bool', slots });
    if (p.ok) matchConditions.push({ name: m.name, program: p });
    else fail(`matchConditions[${i}].expression`, p);
  });
  const validations: CompiledValidation[] = [];
  spec.validations.forEach((v, i) => {
    const p = compile(v.expression, { variables: names, resultType: 'bool', slots });
    let mp: Program | undefined;
    if (v.messageExpression !== undefined && v.messageExpression !== '') {
      const m = compile(v.messageExpression, { variables: names, resultType: 'string', slots });
      if (m.ok) mp = m;
      else fail(`validations[${i}].messageExpression`, m);
    }
    if (p.ok) validations.push({ spec: v, program: p, messageProgram: mp });
    else fail(`validations[${i}].expression`, p);
  });
  if (errors.length > 0) return { ok: false, errors };
  const checked = [...matchConditions, ...validations].map((e) => e.program);
  const messages = validations.flatMap((v) => (v.messageProgram ? [v.messageProgram] : []));
  const readByObject = [...variables.map((v) => v.program), ...checked, ...messages].some((p) => p.readsVariablesObject);
  const vars = variables.length > 0 ? compileVariables(variables, readByObject) : undefined;
  const check = compositionCheck(
    checked.map((p) => p.exec),
    checked.map((p) => p.expression),
    PER_CALL_COST_LIMIT,
  );
  const stop: CheckStop = { thrown: false, value: undefined };
  return Object.freeze({ ok: true as const, matchConditions, variables, validations, vars, check, stop });
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

/**
 * One expression on the composition's meter: a boolean as is (the common
 * case, no result object), anything else classified. Small enough to be
 * inlined where it is called.
 */
function test(program: Program, context: Record<string, unknown>, meter: Meter, budget: Budget): boolean | EvalResult {
  meter.used = 0;
  meter.limit = budget.remaining < PER_CALL_COST_LIMIT ? budget.remaining : PER_CALL_COST_LIMIT;
  let value: unknown;
  try {
    value = program.exec(context, meter);
  } catch (e) {
    return thrown(program, meter, budget, e);
  }
  return gave(program, value, meter, budget);
}

/** `test`'s result of an expression that gave `value` on `meter`. */
function gave(program: Program, value: unknown, meter: Meter, budget: Budget): boolean | EvalResult {
  if (typeof value === 'boolean' && meter.used <= meter.limit) {
    budget.remaining -= meter.used;
    return value;
  }
  return classify(program, meter, budget, PER_CALL_COST_LIMIT, value, undefined, false);
}

/** `test`'s result of an expression that threw `e` on `meter`. */
function thrown(program: Program, meter: Meter, budget: Budget, e: unknown): EvalResult {
  return classify(program, meter, budget, PER_CALL_COST_LIMIT, undefined, e ?? new Error(String(e)), false);
}

/** `test`'s result of the expression the check stopped at (its meter as the check left it). */
function stoppedAt(c: Composition, index: number, meter: Meter, budget: Budget): boolean | EvalResult {
  const mcs = c.matchConditions;
  const program = (index < mcs.length ? (mcs[index] as { program: Program }) : (c.validations[index - mcs.length] as CompiledValidation)).program;
  const { stop } = c;
  const value = stop.value;
  // Not kept past this evaluation.
  stop.value = undefined;
  return stop.thrown ? thrown(program, meter, budget, value) : gave(program, value, meter, budget);
}

const NO_OUTCOMES: readonly ValidationOutcome[] = Object.freeze([]);

/**
 * The context a composition's expressions run on: the request's shared
 * context, or, when the composition has variables, a context of its own
 * with the frame of this evaluation (young objects: see variable-frame.ts).
 */
function contextOf(c: Composition, shared: Record<string, unknown>, meter: Meter, budget: Budget): Record<string, unknown> {
  const vars = c.vars;
  if (vars === undefined) return shared;
  // A literal in celContext's order: one object shape for every context the generated code reads.
  const context: Record<string, unknown> = {
    object: shared['object'],
    oldObject: shared['oldObject'],
    request: shared['request'],
    params: shared['params'],
    namespaceObject: shared['namespaceObject'],
    variables: vars.object,
    frame: null,
  };
  startFrame(vars, context, shared, meter, budget);
  return context;
}

/** The message of a failed validation: messageExpression's value, else `message`, else the expression. */
function failedMessage(v: CompiledValidation, context: Record<string, unknown>, meter: Meter, budget: Budget): string {
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
    // Its cost is the meter's (classify charges the budget; the caller adds it to the outcome).
    const m = classify(v.messageProgram, meter, budget, PER_CALL_COST_LIMIT, value, failure, false);
    // The API server falls back to `message` when messageExpression fails
    // or gives an empty string (it logs the failure).
    if (m.ok && typeof m.value === 'string' && m.value.trim() !== '') message = m.value.replace(/\s*\n\s*/g, ' ');
  }
  return message === '' ? `failed expression: ${v.spec.expression.trim()}` : message;
}

/**
 * Evaluates a composition on a context (see contextFor). With `passes`
 * false, the outcome lists only failed and erroring validations, and a
 * composition whose conditions all hold and whose validations all pass
 * gives undefined: nothing is allocated for it (the rule path).
 */
function run(c: Composition, shared: Record<string, unknown>, budget: Budget, passes: boolean): CompositionOutcome | undefined {
  // One meter per request, reset for each expression (evaluation is synchronous).
  const meter: Meter = (budget.meter ??= { used: 0, limit: 0 });
  const context = contextOf(c, shared, meter, budget);
  let cost = 0;
  // The expression to start from (the matchConditions, then the validations), and its result when the check gave it.
  let from = 0;
  let first: boolean | EvalResult | undefined;
  if (!passes && c.check !== undefined) {
    // Most rules pass: the composition's check says so with no general loop
    // (composition-check.ts); otherwise the general loop goes on from the
    // expression the check stopped at, with its result: the expressions
    // before it gave true, and their cost is debited.
    const before = budget.remaining;
    from = c.check(context, meter, budget, c.stop);
    if (from === PASSED) return undefined;
    cost = before - budget.remaining;
    first = stoppedAt(c, from, meter, budget);
  }
  const mcs = c.matchConditions;
  if (from < mcs.length) {
    let conditionError: { condition: string; message: string; kind: 'runtime' | 'cost' } | undefined;
    for (let i = from; i < mcs.length; i++) {
      const mc = mcs[i] as { name: string; program: Program };
      const r = first ?? test(mc.program, context, meter, budget);
      first = undefined;
      cost += Math.min(meter.used, meter.limit + 1);
      if (r === false) return { matched: false, condition: mc.name, cost };
      if (r === true) continue;
      if (!r.ok) {
        conditionError ??= { condition: mc.name, message: r.message, kind: r.kind };
        if (r.kind === 'cost') break;
      }
    }
    if (conditionError) return { matched: 'error', ...conditionError, cost };
  }
  let validations: ValidationOutcome[] | undefined;
  const vs = c.validations;
  for (let index = from < mcs.length ? 0 : from - mcs.length; index < vs.length; index++) {
    const v = vs[index] as CompiledValidation;
    const r = first ?? test(v.program, context, meter, budget);
    first = undefined;
    cost += meter.used <= meter.limit ? meter.used : meter.limit + 1;
    if (r === true) {
      if (passes) (validations ??= []).push({ index, result: 'pass' });
      continue;
    }
    if (r !== false && !r.ok) {
      (validations ??= []).push({ index, result: 'error', message: r.message, kind: r.kind });
      continue;
    }
    const message = failedMessage(v, context, meter, budget);
    // What the message cost: classify's figure, from the meter it ran on (no holder object to fill).
    if (v.messageProgram) cost += meter.used <= meter.limit ? meter.used : meter.limit + 1;
    (validations ??= []).push({ index, result: 'fail', message, reason: v.spec.reason ?? 'Invalid' });
  }
  if (validations === undefined && !passes) return undefined;
  return { matched: true, validations: validations ?? (NO_OUTCOMES as ValidationOutcome[]), cost };
}

/** Evaluates a composition on a context (see contextFor): every validation's outcome. */
export function runComposition(c: Composition, shared: Record<string, unknown>, budget: Budget): CompositionOutcome {
  return run(c, shared, budget, true) as CompositionOutcome;
}

/**
 * The rule path of {@link runComposition}: undefined when every
 * matchCondition holds and every validation passes (nothing allocated),
 * else the outcome, which lists only the failed and erroring validations.
 */
export function checkComposition(c: Composition, shared: Record<string, unknown>, budget: Budget): CompositionOutcome | undefined {
  return run(c, shared, budget, false);
}

/**
 * Evaluates a composition against one activation. `budget` is the request's
 * budget (shared across every policy evaluated for the request); compositions
 * evaluated on the same activation object and budget share their contexts.
 */
export function evaluateComposition(c: Composition, activation: Activation, budget: Budget = newBudget()): CompositionOutcome {
  return runComposition(c, contextFor(activation, budget, () => celContext(activation)), budget);
}
