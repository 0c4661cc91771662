/**
 * A ValidatingAdmissionPolicy compiled once per generation (every
 * expression through the ExpressionEngine, compile errors kept: they become
 * evaluation errors), and the shape of one evaluation's result.
 *
 * Pure: no I/O.
 */
import type { CompileEnv, ExpressionEngine, PassCheck } from './engine.ts';
import type { FailurePolicy, ValidatingAdmissionPolicy, ValidationAction, ValidationReason } from './types.ts';

export type Compiled<P> = { ok: true; program: P } | { ok: false; error: string };

export interface CompiledExpression<P> {
  /** Where it sits in the policy, e.g. `spec.validations[0].expression`. */
  field: string;
  expression: string;
  compiled: Compiled<P>;
}

export interface CompiledPolicy<P = unknown> {
  policy: ValidatingAdmissionPolicy;
  failurePolicy: FailurePolicy;
  matchConditions: (CompiledExpression<P> & { name: string })[];
  variables: (CompiledExpression<P> & { name: string })[];
  /**
   * Per variable, the key of its value when it is the same in every policy
   * evaluated on one request (with params null): the expression text and
   * the keys of the variables it reads, so two policies declaring the same
   * variables share their values; undefined when it reads `params` or
   * `variables` other than as `variables.NAME`.
   */
  variableKeys: readonly (string | undefined)[];
  /** The variables' names in order, and each name's index (the first of a name wins). */
  variableNames: readonly string[];
  variableIndex: ReadonlyMap<string, number>;
  validations: {
    expression: CompiledExpression<P>;
    message: string | undefined;
    messageExpression: CompiledExpression<P> | undefined;
    reason: ValidationReason | undefined;
  }[];
  auditAnnotations: { key: string; value: CompiledExpression<P> }[];
  /**
   * Whether an evaluation admits with nothing to report, faster than the
   * general evaluation (engine.ts's PassCheck); undefined when the engine
   * makes none, an expression did not compile, or the policy has
   * auditAnnotations (their values are reported).
   */
  passCheck: PassCheck | undefined;
}

/** A compile error of one expression, with its place in the policy. */
export interface PolicyCompileError {
  policy: string;
  field: string;
  expression: string;
  error: string;
}

/** Compiles every expression of a policy once. Compile errors are kept, not thrown: they become evaluation errors. */
export function compilePolicy<P>(policy: ValidatingAdmissionPolicy, engine: ExpressionEngine<P>): CompiledPolicy<P> {
  const spec = policy.spec;
  const hasParams = spec.paramKind !== undefined;
  const declared: string[] = [];
  const compile = (field: string, expression: string, resultType: CompileEnv['resultType'], variables = declared): CompiledExpression<P> => {
    const out = engine.compile(expression, { variables: [...variables], hasParams, resultType });
    return { field, expression, compiled: out.ok ? { ok: true, program: out.program } : { ok: false, error: out.error } };
  };
  const variables = (spec.variables ?? []).map((v, i) => {
    const c = { ...compile(`spec.variables[${i}].expression`, v.expression, 'any'), name: v.name };
    declared.push(v.name);
    return c;
  });
  const variableIndex = new Map<string, number>();
  variables.forEach((v, i) => {
    if (!variableIndex.has(v.name)) variableIndex.set(v.name, i);
  });
  const matchConditions = (spec.matchConditions ?? []).map((m, i) => ({ ...compile(`spec.matchConditions[${i}].expression`, m.expression, 'bool'), name: m.name }));
  const validations = (spec.validations ?? []).map((v, i) => ({
    expression: compile(`spec.validations[${i}].expression`, v.expression, 'bool'),
    message: v.message,
    messageExpression: v.messageExpression === undefined ? undefined : compile(`spec.validations[${i}].messageExpression`, v.messageExpression, 'string'),
    reason: v.reason,
  }));
  const auditAnnotations = (spec.auditAnnotations ?? []).map((a, i) => ({
    key: a.key,
    value: compile(`spec.auditAnnotations[${i}].valueExpression`, a.valueExpression, 'string-or-null'),
  }));
  return {
    policy,
    failurePolicy: spec.failurePolicy ?? 'Fail',
    variables,
    variableKeys: variableKeys(variables),
    variableNames: Object.freeze(variables.map((v) => v.name)),
    variableIndex,
    matchConditions,
    validations,
    auditAnnotations,
    passCheck: auditAnnotations.length === 0 ? passCheckOf(engine, variables, [...matchConditions, ...validations.map((v) => v.expression)]) : undefined,
  };
}

/** The engine's pass check of these expressions, when every one compiled (see CompiledPolicy.passCheck). */
function passCheckOf<P>(engine: ExpressionEngine<P>, variables: (CompiledExpression<P> & { name: string })[], conditions: CompiledExpression<P>[]): PassCheck | undefined {
  if (engine.passCheck === undefined) return undefined;
  const programs: P[] = [];
  for (const e of [...variables, ...conditions]) {
    if (!e.compiled.ok) return undefined;
    programs.push(e.compiled.program);
  }
  return engine.passCheck({ variables: variables.map((v, i) => ({ name: v.name, program: programs[i] as P })), conditions: programs.slice(variables.length) });
}

/** See CompiledPolicy.variableKeys. */
function variableKeys(variables: readonly { name: string; expression: string }[]): (string | undefined)[] {
  const keys: (string | undefined)[] = [];
  const byName = new Map<string, string | undefined>();
  for (const v of variables) {
    let key: string | undefined;
    const e = v.expression;
    const named = [...e.matchAll(/\bvariables\.([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1] as string);
    const bare = (e.match(/\bvariables\b/g) ?? []).length;
    if (!/\bparams\b/.test(e) && bare === named.length && named.every((n) => byName.get(n) !== undefined)) {
      key = `${e}\u0000${named.map((n) => byName.get(n)).join('\u0000')}`;
    }
    keys.push(key);
    if (!byName.has(v.name)) byName.set(v.name, key);
  }
  return keys;
}

/** Every compile error of a compiled policy (what `portal test` reports as bad input). */
export function compileErrors(c: CompiledPolicy): PolicyCompileError[] {
  const all: CompiledExpression<unknown>[] = [
    ...c.matchConditions,
    ...c.variables,
    ...c.validations.flatMap((v) => (v.messageExpression ? [v.expression, v.messageExpression] : [v.expression])),
    ...c.auditAnnotations.map((a) => a.value),
  ];
  return all.flatMap((e) => (e.compiled.ok ? [] : [{ policy: c.policy.metadata.name, field: e.field, expression: e.expression, error: e.compiled.error }]));
}

/** One failed validation (or an error handled as one). */
export interface ValidationFailure {
  message: string;
  reason: ValidationReason | undefined;
  /** Index in spec.validations; undefined for matchCondition errors. */
  expressionIndex: number | undefined;
  /** True when this is an evaluation error under failurePolicy Fail, not a false validation. */
  error: boolean;
}

/** The result of one (policy, binding, param) evaluation. */
export interface BindingEvaluation {
  policy: string;
  binding: string;
  /** `namespace/name` or `name` of the param object, when the binding uses params. */
  param: string | undefined;
  actions: readonly ValidationAction[];
  /**
   * skip: not selected (binding.matchResources) or a matchCondition false;
   * pass: every validation admitted; fail: a validation failed; error: an
   * evaluation or configuration error (under Fail it is also in `failures`
   * or `configError`; under Ignore only in `ignoredErrors`).
   */
  result: 'skip' | 'pass' | 'fail' | 'error';
  failures: ValidationFailure[];
  /** Denies under failurePolicy Fail whatever the validationActions (params, namespace lookups, audit annotations). */
  denyErrors: string[];
  /** Errors dropped by failurePolicy Ignore. */
  ignoredErrors: string[];
  /** `<policy>/<key>` → value. */
  auditAnnotations: Record<string, string>;
  /** Why it was skipped. */
  skipReason?: string;
  /**
   * Errors that are the policy author's or the setup's fault rather than the
   * object's: a cost limit exceeded (with the expression's field), missing
   * params, an unknown paramKind. `portal test` treats them as bad input.
   */
  problems: { kind: 'cost' | 'params'; field?: string; message: string }[];
}


/** One compiled expression of a policy, as /debug/vars shows it. */
export interface ExpressionCost {
  /** e.g. `spec.validations[0].expression`. */
  field: string;
  /** Estimated worst-case cost (src/policy/cel/estimate.ts), against the 1,000,000 per-expression limit. */
  estimatedCost: number;
  /** Present when the expression runs on cel-js's evaluation instead of generated JavaScript: why. */
  fallback?: string;
}

/** The estimated costs of a compiled policy's expressions (those that compiled). */
export function expressionCosts<P>(c: CompiledPolicy<P>, engine: ExpressionEngine<P>): ExpressionCost[] {
  const describe = engine.describe;
  if (describe === undefined) return [];
  const all: CompiledExpression<P>[] = [
    ...c.matchConditions,
    ...c.variables,
    ...c.validations.flatMap((v) => (v.messageExpression ? [v.expression, v.messageExpression] : [v.expression])),
    ...c.auditAnnotations.map((a) => a.value),
  ];
  return all.flatMap((e) => (e.compiled.ok ? [{ field: e.field, ...describe.call(engine, e.compiled.program) }] : []));
}
