/**
 * The CEL engine: Kubernetes' CEL environment on top of cel-js
 * (adr/0010-cel-engine-cel-js.md says why cel-js, adr/0016 why generated
 * JavaScript).
 *
 * - compile() (compile.ts) parses and type-checks once per policy
 *   generation and generates the JavaScript that evaluates the expression;
 * - evaluate() runs a compiled Program against an Activation under a cost
 *   meter: a per-call limit like the API server's (1,000,000) and a shared
 *   per-request Budget (10,000,000). Exceeding either is an `EvalError` of
 *   kind `cost`, never a stall.
 *
 * The meter is created per evaluation and handed to the generated code:
 * nothing here is process-global (issue 21).
 *
 * Pure: no I/O.
 */
import { CostLimitExceeded, type Meter } from './meter.ts';
import { cel } from './values-marks.ts';
import { failureMessage, type Program } from './compile.ts';

export { ACTIVATION_VARIABLES, type ActivationVariable } from './environment.ts';
export {
  compile,
  failureMessage,
  interpreted,
  MAX_EXPRESSION_LENGTH,
  MAX_NESTING_DEPTH,
  type CompileError,
  type CompileOptions,
  type CompileResult,
  type Program,
  type ResultType,
  type SourcePosition,
} from './compile.ts';

/** celconfig.PerCallLimit: the most one expression evaluation may cost. */
export const PER_CALL_COST_LIMIT = 1_000_000;
/** celconfig.RuntimeCELCostBudget: the most all evaluations for one request may cost. */
export const PER_REQUEST_COST_BUDGET = 10_000_000;

/**
 * The values an expression sees. Plain JSON (as in an AdmissionReview); a
 * missing entry is `null`. `variables` is filled by a Composition
 * (composition.ts) and evaluated lazily.
 */
export interface Activation {
  object?: unknown;
  oldObject?: unknown;
  /** The AdmissionRequest attributes (kind, resource, name, namespace, operation, userInfo, dryRun, options, …). */
  request?: unknown;
  params?: unknown;
  namespaceObject?: unknown;
  variables?: Readonly<Record<string, unknown>>;
}

/**
 * The per-request evaluation context: the cost budget shared by every
 * evaluation of one request, and what the rules of the request share
 * (cel-rule.ts and composition.ts keep their per-request values here, not
 * in module state). Create one per request with newBudget().
 */
export interface Budget {
  remaining: number;
  /** @internal the CEL contexts of the request's activations (cel-rule.ts, composition.ts), by activation or input. */
  contexts?: Map<object, unknown>;
  /** @internal the meter compositions of this request run their expressions on (reset for each one). */
  meter?: Meter;
  /** @internal the last context cel-rule.ts looked up (most rules of a request share it). */
  last?: { key: object; template: string; context: Record<string, unknown> };
  /** @internal the last entry of `values` looked up (variables.ts). */
  lastValues?: { base: object; values: Map<string, { value: unknown; cost: number }> };
  /** @internal values of variables that read no other variable, by context, then expression (variables.ts). */
  values?: Map<object, Map<string, { value: unknown; cost: number }>>;
}

/** A fresh per-request budget. */
export function newBudget(units: number = PER_REQUEST_COST_BUDGET): Budget {
  return { remaining: units };
}

/** Why an evaluation has no value. `cost`: a limit was exceeded; `runtime`: anything else. */
export interface EvalError {
  ok: false;
  kind: 'runtime' | 'cost';
  message: string;
  /** Cost units spent before the failure. */
  cost: number;
}

export interface EvalValue {
  ok: true;
  value: unknown;
  cost: number;
}

export type EvalResult = EvalValue | EvalError;


/** The context of an activation: its objects as given (the generated code reads JSON as parsed), missing → null. */
export function celContext(a: Activation): Record<string, unknown> {
  return {
    object: a.object ?? null,
    oldObject: a.oldObject ?? null,
    request: a.request ?? null,
    params: a.params ?? null,
    namespaceObject: a.namespaceObject ?? null,
    variables: a.variables ?? EMPTY,
    // A composition with variables puts its evaluation's frame here (composition.ts's contextOf).
    frame: null,
  };
}
const EMPTY: Readonly<Record<string, unknown>> = Object.freeze(Object.create(null) as Record<string, unknown>);

function checkType(program: Program, value: unknown): string | undefined {
  if (program.resultType === 'bool' && typeof value !== 'boolean') return `the expression evaluated to ${describe(value)}, not a bool`;
  if (program.resultType === 'string' && typeof value !== 'string') return `the expression evaluated to ${describe(value)}, not a string`;
  return undefined;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'bigint') return 'an int';
  if (Array.isArray(v)) return 'a list';
  return `a ${typeof v}`;
}

/** The cost error of a meter over its limit. */
export function costError(meter: Meter, perCallLimit: number, cost: number): EvalError {
  const which = meter.limit < perCallLimit ? `the request's CEL cost budget (${PER_REQUEST_COST_BUDGET} units in all)` : `the per-expression cost limit (${perCallLimit} units)`;
  return { ok: false, kind: 'cost', message: `evaluation exceeded ${which}; simplify the expression or bound its loops`, cost };
}

/**
 * What an execution of `program` on `meter` gave (`failure`: what it threw,
 * undefined when it returned `value`), as a result; `budget` is debited
 * with what was spent. The one place results are made, for evaluate() and
 * composition.ts.
 */
export function classify(program: Program, meter: Meter, budget: Budget, perCallLimit: number, value: unknown, failure: unknown, raw: boolean): EvalResult {
  const cost = Math.min(meter.used, meter.limit + 1);
  budget.remaining = Math.max(0, budget.remaining - cost);
  if (meter.used > meter.limit) return costError(meter, perCallLimit, cost);
  if (failure !== undefined) {
    if (failure instanceof CostLimitExceeded) return { ok: false, kind: 'cost', message: `evaluation exceeded the cost limit (${meter.limit} units)`, cost };
    return { ok: false, kind: 'runtime', message: failureMessage(failure), cost };
  }
  // Aggregates read from the input leave as CEL values (integral numbers as ints).
  if (!raw && value !== null && typeof value === 'object') value = cel(value);
  const wrong = checkType(program, value);
  if (wrong) return { ok: false, kind: 'runtime', message: wrong, cost };
  return { ok: true, value, cost };
}

/** Runs `program` on `meter` (its `limit` set by the caller); see classify. */
export function run(program: Program, context: Record<string, unknown>, meter: Meter, budget: Budget, perCallLimit: number, raw: boolean): EvalResult {
  let value: unknown;
  let failure: unknown;
  try {
    value = program.exec(context, meter);
  } catch (e) {
    failure = e ?? new Error(String(e));
  }
  return classify(program, meter, budget, perCallLimit, value, failure, raw);
}

/**
 * Evaluates a program. Never throws. `budget` (per request) is debited with
 * the cost spent; the per-call limit is min(perCallLimit, budget.remaining).
 */
export function evaluate(
  program: Program,
  activation: Activation | Record<string, unknown>,
  budget: Budget = newBudget(),
  perCallLimit: number = PER_CALL_COST_LIMIT,
  converted = false,
  /** Leave an aggregate result as the generated code gave it (for values other expressions read, e.g. VAP variables). */
  raw = false,
): EvalResult {
  const meter: Meter = { used: 0, limit: Math.min(perCallLimit, budget.remaining) };
  const context = converted ? (activation as Record<string, unknown>) : celContext(activation as Activation);
  return run(program, context, meter, budget, perCallLimit, raw);
}
