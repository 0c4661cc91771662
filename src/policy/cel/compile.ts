/**
 * compile(): parses and type-checks a CEL expression once per policy
 * generation, never per request, and refuses what the API server refuses
 * (unknown variables, type errors, `authorizer`, wrong result type, too
 * deep nesting) with the position of the fault. What compiles becomes a
 * generated JavaScript function (codegen.ts), or, for an AST shape the
 * generator does not know, cel-js's own evaluation (a fallback, charged per
 * node of the expression before it runs).
 *
 * Pure: no I/O.
 */
import type { ParseResult } from '@marcbachmann/cel-js';
import { ACTIVATION_VARIABLES, env } from './environment.ts';
import { generate, Unsupported, type Exec } from './codegen.ts';
import { builtDeep, cel } from './values-marks.ts';
import { charge } from './meter.ts';
import { estimateCost } from './estimate.ts';
import { lineColumn, offsetOf, rewriteNamespacedCalls, unescapeFieldName, walk } from './source.ts';
import { toCel } from './values.ts';
import { constantRegexProblem } from './lib/regex.ts';

/** Longest expression accepted (the API server caps validation expressions at 5 KiB... we allow 10 KiB). */
export const MAX_EXPRESSION_LENGTH = 10 * 1024;

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
  /**
   * The expression runs in a composition whose contexts carry a frame
   * (variable-frame.ts), `variables` holding unique names in the frame's
   * order: a variable is read from the frame by index.
   * @default false
   */
  slots?: boolean;
}

/** A compiled expression. Opaque; reusable across requests; immutable. */
export interface Program {
  readonly ok: true;
  readonly expression: string;
  readonly resultType: ResultType;
  /** @internal the cel-js program (its public evaluation: the fallback, and the reference of the differential tests). */
  readonly run: ParseResult;
  /** @internal what evaluate() runs: the generated function (codegen.ts), or `run` under the active meter. */
  readonly exec: Exec;
  /**
   * Why the expression runs on cel-js's evaluation instead of generated
   * code (undefined: it is compiled). Its cost is then only what library
   * functions charge, and the evaluation deadline bounds it.
   */
  readonly fallback: string | undefined;
  /** @internal the generated JavaScript (undefined for a fallback), for tests. */
  readonly source: string | undefined;
  /**
   * @internal it reads the composition's `variables` object (a fallback, or
   * `variables` not as `variables.NAME` of a frame slot): its composition
   * must keep the object's frame current (variables.ts).
   */
  readonly readsVariablesObject: boolean;
  /** Estimated worst-case cost (estimate.ts), shown in /debug/vars. */
  readonly estimatedCost: number;
}

export type CompileResult = Program | CompileError;

/**
 * The same program evaluated by cel-js's public evaluation instead of the
 * generated code. For the differential tests and benchmarks.
 * @internal
 */
export function interpreted(program: Program): Program {
  return Object.freeze({ ...program, exec: (context: Record<string, unknown>) => builtDeep(program.run(celValues(context))) });
}

/** The number of nodes of a parsed expression (a fallback's charge per evaluation). */
function nodeCount(root: unknown): number {
  let n = 0;
  walk(root, () => void n++);
  return n;
}

function executable(run: ParseResult, slots: ReadonlyMap<string, number> | undefined): Pick<Program, 'exec' | 'fallback' | 'source' | 'readsVariablesObject'> {
  try {
    const g = generate(run.ast, { variables: ACTIVATION_VARIABLES, ...(slots ? { slots } : {}) });
    return { exec: g.exec, fallback: undefined, source: g.source, readsVariablesObject: g.readsVariablesObject };
  } catch (e) {
    if (!(e instanceof Unsupported)) throw e;
    // cel-js's evaluation has no public meter: each evaluation is charged
    // every node of the expression once, before it runs (what a run
    // without loops costs in cel-go's units), not a flat amount; loops are
    // bounded by the evaluation deadline. Library functions charge nothing
    // more here.
    return { exec: fallbackExec(run), fallback: e.message, source: undefined, readsVariablesObject: true };
  }
}

/**
 * cel-js's evaluation of `run`, charged every node of the expression once
 * per evaluation, before it runs (cel-js has no public meter).
 * @internal exported for the tests
 */
export function fallbackExec(run: ParseResult): Exec {
  const nodes = nodeCount(run.ast);
  return (context, m) => {
    charge(m, nodes);
    return builtDeep(run(celValues(context)));
  };
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
 * A context as cel-js's own evaluation needs it (the fallback): JSON → CEL
 * values, and `variables` read through getters that convert what the
 * lazily evaluated variables give.
 */
function celValues(context: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ACTIVATION_VARIABLES) {
    if (k !== 'variables') out[k] = toCel(context[k]);
  }
  const vars = context['variables'] as Record<string, unknown> | undefined;
  const converted: Record<string, unknown> = {};
  if (vars !== undefined && vars !== null) {
    for (const name of Object.keys(vars)) Object.defineProperty(converted, name, { enumerable: true, get: () => cel(vars[name]) });
  }
  out['variables'] = converted;
  return out;
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
  const { exec, fallback, source, readsVariablesObject } = executable(run, options.slots ? new Map((options.variables ?? []).map((name, i) => [name, i])) : undefined);
  return Object.freeze({ ok: true as const, expression, resultType, run, exec, fallback, source, readsVariablesObject, estimatedCost: estimateCost(run.ast) });
}

