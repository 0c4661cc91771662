/**
 * The CEL engine: Kubernetes' CEL environment on top of cel-js
 * (adr/0010-cel-engine-cel-js.md says why cel-js).
 *
 * - compile() parses and type-checks once per policy generation, never per
 *   request, and refuses what the API server refuses (unknown variables, type
 *   errors, `authorizer`, wrong result type) with the position of the fault.
 * - evaluate() runs a compiled Program against an Activation under a cost
 *   meter: a per-call limit like the API server's (1,000,000) and a shared
 *   per-request Budget (10,000,000). Exceeding either is an `EvalError` of
 *   kind `cost`, never a stall.
 *
 * Pure: no I/O.
 */
import { Environment, type ParseResult } from '@marcbachmann/cel-js';
import { captureEvaluator, CostLimitExceeded, enterMeter, exitMeter, installMeter, type Meter } from './meter.ts';
import { compileNode, type CelCtx, type Ev, type Node } from './compiler.ts';
import { lineColumn, offsetOf, rewriteNamespacedCalls, unescapeFieldName, walk } from './source.ts';
import { toCel } from './values.ts';
import { installFastOptionals } from './fast-optional.ts';
import { installCharges } from './charges.ts';
import { registerLibraries } from './lib/index.ts';
import { constantRegexProblem } from './lib/regex.ts';

/** celconfig.PerCallLimit: the most one expression evaluation may cost. */
export const PER_CALL_COST_LIMIT = 1_000_000;
/** celconfig.RuntimeCELCostBudget: the most all evaluations for one request may cost. */
export const PER_REQUEST_COST_BUDGET = 10_000_000;
/** Longest expression accepted (the API server caps validation expressions at 5 KiB... we allow 10 KiB). */
export const MAX_EXPRESSION_LENGTH = 10 * 1024;

/** The variables an expression may name (plus `authorizer`, which Portal refuses). */
export const ACTIVATION_VARIABLES = ['object', 'oldObject', 'request', 'params', 'namespaceObject', 'variables'] as const;
export type ActivationVariable = (typeof ACTIVATION_VARIABLES)[number];

/** Where in the expression a compile error is. Offsets are 0-based, line and column 1-based. */
export interface SourcePosition {
  offset: number;
  line: number;
  column: number;
}

/** Why an expression does not compile. */
export interface CompileError {
  ok: false;
  /** One line, without the position (see `position`). */
  message: string;
  position: SourcePosition;
  expression: string;
}

/** The type an expression must produce. */
export type ResultType = 'bool' | 'string' | 'any';

export interface CompileOptions {
  /**
   * Names of the composition variables (`variables.NAME`) this expression may
   * read; naming any other is a compile error.
   * @default []
   */
  variables?: readonly string[];
  /** @default "bool" */
  resultType?: ResultType;
}

/** A compiled expression. Opaque; reusable across requests; immutable. */
export interface Program {
  readonly ok: true;
  readonly expression: string;
  readonly resultType: ResultType;
  /** @internal the cel-js program (the interpreter). */
  readonly run: ParseResult;
  /** @internal what evaluate() runs: the compiled closures (compiler.ts), or `run`. */
  readonly exec: (context: Record<string, unknown>) => unknown;
}

export type CompileResult = Program | CompileError;

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

/** The per-request cost budget, shared by every evaluation of one request. */
export interface Budget {
  remaining: number;
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

installMeter();

const env = new Environment({
  unlistedVariablesAreDyn: false,
  enableOptionalTypes: true,
  // Kubernetes' CEL accepts mixed literals such as [1, 'a'] as list(dyn).
  homogeneousAggregateLiterals: false,
  limits: { maxAstNodes: 10_000, maxDepth: 100, maxListElements: 1_000, maxMapEntries: 1_000, maxCallArguments: 32 },
});
// All dyn: a typed declaration makes cel-js check the value's type on every
// read, which for `variables` (a map of lazily computed values) meant a deep
// type walk of every variable at each reference.
for (const v of ACTIVATION_VARIABLES) env.registerVariable(v, 'dyn');
registerLibraries(env);

// The evaluator instance and root-context class the compiled closures share
// with the interpreter (fallback nodes run on cel-js's own evaluator).
const probe = captureEvaluator(() => env.parse('[true]')({}));
const evaluator = probe.evaluator as Ev & { registry: unknown };
const RootContext = (probe.context as object).constructor as new (registry: unknown, context: unknown) => CelCtx;

/** Compiles a checked AST to closures; the root node is not charged (cel-js evaluates it without `run`). */
function compileExec(ast: unknown): (context: Record<string, unknown>) => unknown {
  const root = compileNode(ast as Node, evaluator, false);
  const registry = evaluator.registry;
  return (context) => root(new RootContext(registry, context));
}

/**
 * The same program evaluated by the cel-js interpreter instead of the
 * compiled closures. For the differential tests and benchmarks.
 * @internal
 */
export function interpreted(program: Program): Program {
  return Object.freeze({ ...program, exec: (context: Record<string, unknown>) => program.run(context) });
}

function compileError(expression: string, message: string, offset: number): CompileError {
  const o = Math.max(0, Math.min(offset, expression.length));
  return { ok: false, message, position: { offset: o, ...lineColumn(expression, o) }, expression };
}

interface CelErrorLike {
  summary?: string;
  message?: string;
  node?: { pos?: number; start?: number };
  range?: { start?: number };
}

function errorOffset(e: CelErrorLike): number {
  return e.range?.start ?? e.node?.start ?? e.node?.pos ?? 0;
}

/**
 * The message of an evaluation failure. A stack overflow (a value nested
 * deeper than the evaluator's recursion can follow) says so, since its own
 * message names no input.
 */
export function failureMessage(e: unknown): string {
  if (e instanceof RangeError && /call stack/i.test(e.message)) return `the input is nested too deeply to evaluate (${e.message})`;
  return summary(e).replace(/portalMatches/g, 'matches');
}

function summary(e: unknown): string {
  if (e !== null && typeof e === 'object') {
    const c = e as CelErrorLike;
    if (typeof c.summary === 'string') return c.summary;
    if (typeof c.message === 'string') return c.message.split('\n')[0] ?? c.message;
  }
  return String(e);
}

/**
 * How deep an expression may nest: cel-go's parser refuses more
 * (maxRecursionDepth, 250 by default, as the API server uses it), and every
 * later pass over the tree (checks, cost charges, evaluation) recurses once
 * per level, so a deeper one (`a + a + … + a` within 10 KiB is ~2,500
 * levels) would exhaust the stack instead of being refused. A chain of one
 * logical operator (`a || b || …`) counts as one level, as cel-go balances
 * those.
 */
export const MAX_NESTING_DEPTH = 250;

/** The nesting depth of a parsed expression, without recursion (the tree may be too deep for it). */
function nestingDepth(root: unknown): number {
  const isNode = (v: unknown): v is { op: string; args: unknown } => v !== null && typeof v === 'object' && !Array.isArray(v) && typeof (v as { op?: unknown }).op === 'string';
  let max = 0;
  // [value, depth of the node that holds it, that node's op]
  const stack: Array<[unknown, number, string]> = [[root, 0, '']];
  while (stack.length > 0) {
    const [v, parentDepth, parentOp] = stack.pop() as [unknown, number, string];
    if (Array.isArray(v)) {
      for (const x of v) stack.push([x, parentDepth, parentOp]);
      continue;
    }
    if (!isNode(v)) continue;
    const chained = (v.op === '&&' || v.op === '||') && v.op === parentOp;
    const depth = chained ? parentDepth : parentDepth + 1;
    if (depth > max) max = depth;
    if (depth > MAX_NESTING_DEPTH) return depth;
    stack.push([v.args, depth, v.op]);
  }
  return max;
}

/**
 * Compiles an expression. Never throws. The position of a CompileError points
 * into `expression` as given.
 */
export function compile(expression: string, options: CompileOptions = {}): CompileResult {
  const resultType = options.resultType ?? 'bool';
  if (typeof expression !== 'string' || expression.trim() === '') {
    return compileError(String(expression ?? ''), 'the expression is empty', 0);
  }
  if (expression.length > MAX_EXPRESSION_LENGTH) {
    return compileError(expression, `the expression is ${expression.length} characters long, more than the ${MAX_EXPRESSION_LENGTH} allowed`, MAX_EXPRESSION_LENGTH);
  }
  let run: ParseResult;
  try {
    run = env.parse(rewriteNamespacedCalls(expression));
  } catch (e) {
    return compileError(expression, summary(e), errorOffset(e as CelErrorLike));
  }
  const depth = nestingDepth(run.ast);
  if (depth > MAX_NESTING_DEPTH) {
    return compileError(expression, `the expression nests ${depth} levels deep, more than the ${MAX_NESTING_DEPTH} allowed (the API server's CEL parser has the same limit); split it with variables`, 0);
  }
  const declared = new Set(options.variables ?? []);
  let refusal: CompileError | undefined;
  walk(run.ast, (n) => {
    if (refusal) return;
    if (n.op === 'id' && n.args === 'authorizer') {
      refusal = compileError(expression, '`authorizer` is not supported by Portal (it evaluates without the API server\'s authorizer); remove the authorization check', offsetOf(n));
      return;
    }
    if ((n.op === '.' || n.op === '.?') && Array.isArray(n.args)) {
      const [target, field] = n.args as [{ op?: string; args?: unknown }, string];
      if (target.op === 'id' && target.args === 'variables' && !declared.has(field)) {
        refusal = compileError(expression, `undefined variable "variables.${field}"${declared.size ? ` (declared: ${[...declared].join(', ')})` : ' (no variables are declared before this expression)'}`, offsetOf(n));
        return;
      }
      // Kubernetes escapes property names that are not CEL identifiers.
      const unescaped = unescapeFieldName(field);
      if (unescaped !== field) (n.args as unknown[])[1] = unescaped;
    }
    if ((n.op === 'rcall' || n.op === 'call') && Array.isArray(n.args)) {
      const name = n.args[0];
      if (name === 'matches' || name === 'find' || name === 'findAll') {
        // A constant pattern that cannot run (invalid, or a program over
        // re2.ts's size limit) is refused now, as the API server does.
        const literal = (n.op === 'rcall' ? (n.args[2] as unknown[] | undefined)?.[0] : (n.args[1] as unknown[] | undefined)?.[1]) as
          | { op?: string; args?: unknown; pos?: number; start?: number }
          | undefined;
        if (literal?.op === 'value' && typeof literal.args === 'string') {
          const problem = constantRegexProblem(literal.args);
          if (problem !== undefined) {
            refusal = compileError(expression, problem, offsetOf(literal as { op: string; args: unknown }));
            return;
          }
        }
      }
      // cel-js's `matches` is a backtracking JS RegExp: use the RE2 one.
      if (name === 'matches') (n.args as unknown[])[0] = 'portalMatches';
    }
  });
  if (refusal) return refusal;
  const checked = run.check();
  if (!checked.valid) {
    const e = checked.error as CelErrorLike | undefined;
    return compileError(expression, summary(e).replace(/portalMatches/g, 'matches'), e ? errorOffset(e) : 0);
  }
  const t = checked.type ?? 'dyn';
  if (resultType !== 'any' && t !== resultType && t !== 'dyn') {
    return compileError(expression, `the expression must evaluate to ${resultType}, but it evaluates to ${t}`, 0);
  }
  installFastOptionals(run.ast);
  installCharges(run.ast);
  return Object.freeze({ ok: true as const, expression, resultType, run, exec: compileExec(run.ast) });
}

const contexts = new WeakMap<Activation, Readonly<Record<string, unknown>>>();

/**
 * The cel-js context for an activation: JSON → CEL values, missing → null.
 * Cached per activation object (callers share one activation across the rules
 * of a request); callers that add `variables` must copy it.
 */
export function celContext(a: Activation): Readonly<Record<string, unknown>> {
  const hit = contexts.get(a);
  if (hit) return hit;
  const c = buildContext(a);
  contexts.set(a, c);
  return c;
}

function buildContext(a: Activation): Record<string, unknown> {
  return {
    object: toCel(a.object),
    oldObject: toCel(a.oldObject),
    request: toCel(a.request),
    params: toCel(a.params),
    namespaceObject: toCel(a.namespaceObject),
    variables: a.variables ?? EMPTY,
  };
}
const EMPTY: Readonly<Record<string, unknown>> = Object.freeze(Object.create(null) as Record<string, unknown>);

/**
 * Runs a program with an already-converted context under the active meter.
 * Internal: composition.ts evaluates lazy variables with it.
 */
export function runUnmetered(program: Program, context: Record<string, unknown>): unknown {
  return program.exec(context);
}

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
): EvalResult {
  const limit = Math.min(perCallLimit, budget.remaining);
  const meter: Meter = { used: 0, limit };
  let value: unknown;
  let failure: unknown;
  const outer = enterMeter(meter);
  try {
    // Converting the activation walks the objects: inside the try, so a
    // hostile object (nested 100,000 deep) is an evaluation error too.
    const context = converted ? (activation as Record<string, unknown>) : celContext(activation as Activation);
    value = program.exec(context);
  } catch (e) {
    failure = e;
  } finally {
    exitMeter(outer);
  }
  const cost = Math.min(meter.used, limit + 1);
  budget.remaining = Math.max(0, budget.remaining - cost);
  if (meter.used > limit) {
    const which = limit < perCallLimit ? `the request's CEL cost budget (${PER_REQUEST_COST_BUDGET} units in all)` : `the per-expression cost limit (${perCallLimit} units)`;
    return { ok: false, kind: 'cost', message: `evaluation exceeded ${which}; simplify the expression or bound its loops`, cost };
  }
  if (failure !== undefined) {
    if (failure instanceof CostLimitExceeded) {
      return { ok: false, kind: 'cost', message: `evaluation exceeded the cost limit (${limit} units)`, cost };
    }
    return { ok: false, kind: 'runtime', message: failureMessage(failure), cost };
  }
  const wrong = checkType(program, value);
  if (wrong) return { ok: false, kind: 'runtime', message: wrong, cost };
  return { ok: true, value, cost };
}
