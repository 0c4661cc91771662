/**
 * Evaluating ValidatingAdmissionPolicies with their bindings, as
 * kube-apiserver's `admission/plugin/policy/validating` dispatcher and
 * validator do:
 *
 * - a policy does nothing without a binding; a binding naming a missing
 *   policy is ignored;
 * - policy.matchConstraints, then binding.matchResources select the request;
 * - params: none without paramKind (or without paramRef: params is null);
 *   `paramRef.name` → one object (namespace defaulted to the request's for
 *   a namespaced paramKind), `paramRef.selector` → the policy runs once per
 *   matching object; none found → nothing runs with `Allow`, a configuration
 *   error with `Deny`;
 * - matchConditions: any false → skipped (even if another errored); an error
 *   otherwise → an evaluation error;
 * - each validation: true admits, false fails with message /
 *   messageExpression / `failed expression: EXPR`; an error (compile, run,
 *   cost) is a failure when failurePolicy is Fail and ignored when Ignore;
 * - failures go through the binding's validationActions (Deny, Warn, Audit),
 *   configuration errors and auditAnnotation errors deny under Fail whatever
 *   the actions.
 *
 * Everything is compiled once per policy generation (`compilePolicy`); the
 * per-request work is matching and running programs.
 */
import type { KubeObject } from '../types.ts';
import {
  PER_CALL_COST_LIMIT,
  RUNTIME_COST_BUDGET,
  type Activation,
  type CompileEnv,
  type CostBudget,
  type ExpressionEngine,
  type RunOutcome,
  type VariableResolver,
} from './engine.ts';
import { matchResources, type EquivalentResources } from './match.ts';
import type {
  FailurePolicy,
  ValidatingAdmissionPolicy,
  ValidatingAdmissionPolicyBinding,
  ValidationAction,
  ValidationReason,
  VapAttributes,
  VapContext,
} from './types.ts';

type Compiled<P> = { ok: true; program: P } | { ok: false; error: string };

interface CompiledExpression<P> {
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
  return {
    policy,
    failurePolicy: spec.failurePolicy ?? 'Fail',
    variables,
    variableNames: Object.freeze(variables.map((v) => v.name)),
    variableIndex,
    matchConditions: (spec.matchConditions ?? []).map((m, i) => ({ ...compile(`spec.matchConditions[${i}].expression`, m.expression, 'bool'), name: m.name })),
    validations: (spec.validations ?? []).map((v, i) => ({
      expression: compile(`spec.validations[${i}].expression`, v.expression, 'bool'),
      message: v.message,
      messageExpression: v.messageExpression === undefined ? undefined : compile(`spec.validations[${i}].messageExpression`, v.messageExpression, 'string'),
      reason: v.reason,
    })),
    auditAnnotations: (spec.auditAnnotations ?? []).map((a, i) => ({
      key: a.key,
      value: compile(`spec.auditAnnotations[${i}].valueExpression`, a.valueExpression, 'string-or-null'),
    })),
  };
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

function toRequest(a: VapAttributes, resource: VapAttributes['resource']): Record<string, unknown> {
  const op = a.operation === 'AUDIT' ? 'CREATE' : a.operation;
  return {
    kind: a.kind,
    resource,
    subResource: a.subResource,
    requestKind: a.kind,
    requestResource: a.resource,
    requestSubResource: a.subResource,
    name: a.name,
    namespace: a.namespace,
    operation: op,
    userInfo: a.userInfo ?? { username: '', groups: [] },
    dryRun: a.dryRun ?? false,
    options: a.options ?? null,
  };
}

/** kube's limits on one message and on an audit annotation's value. */
const MAX_MESSAGE_LENGTH = 5 * 1024;
const MAX_AUDIT_VALUE_LENGTH = 10 * 1024;
export const COST_BUDGET_MESSAGE = 'validation failed due to running out of cost budget, no further validation rules will be run';

/**
 * One (policy, binding, param) evaluation: its budget, its activation and
 * its variables, each computed on first read and kept (the Run is the
 * activation's VariableResolver: no closure per evaluation).
 */
class Run<P> implements VariableResolver {
  readonly budget: CostBudget = { remaining: RUNTIME_COST_BUDGET };
  private readonly slots: (RunOutcome | undefined)[] = [];
  readonly activation: Activation;
  budgetExceeded = false;
  /** Fields of the expressions that ran out of cost. */
  costFields: string[] | undefined;

  constructor(
    private readonly c: CompiledPolicy<P>,
    private readonly engine: ExpressionEngine<P>,
    base: Omit<Activation, 'variables' | 'engineState'>,
  ) {
    this.activation = {
      object: base.object,
      oldObject: base.oldObject,
      request: base.request,
      params: base.params,
      namespaceObject: base.namespaceObject,
      variables: this,
      engineState: undefined,
    };
  }

  names(): readonly string[] {
    return this.c.variableNames;
  }

  get(name: string): unknown {
    const index = this.c.variableIndex.get(name);
    if (index === undefined) throw new Error(`no such key: ${name}`);
    let hit = this.slots[index];
    if (hit === undefined) {
      hit = this.exec(this.c.variables[index] as CompiledExpression<P>);
      this.slots[index] = hit;
    }
    if (!hit.ok) throw new Error(hit.error);
    return hit.value;
  }

  exec(e: CompiledExpression<P>): RunOutcome {
    if (!e.compiled.ok) return { ok: false, error: `compilation failed: ${e.compiled.error}`, cost: false };
    if (this.budgetExceeded) return { ok: false, error: COST_BUDGET_MESSAGE, cost: true };
    let out: RunOutcome;
    try {
      out = this.engine.run(e.compiled.program, this.activation, this.budget);
    } catch (err) {
      // Engines report failures as outcomes; a throw (a hostile object that
      // breaks them) is still an error of this expression, never an escape.
      return { ok: false, error: `expression '${e.expression}' resulted in error: ${err instanceof Error ? err.message : String(err)}`, cost: false };
    }
    if (!out.ok) {
      if (out.cost) (this.costFields ??= []).push(e.field);
      if (out.cost && this.budget.remaining <= 0) {
        this.budgetExceeded = true;
        return { ok: false, error: COST_BUDGET_MESSAGE, cost: true };
      }
      return { ok: false, error: `expression '${e.expression}' resulted in error: ${out.error}`, cost: out.cost };
    }
    return out;
  }
}

function paramDisplay(p: KubeObject | null): string | undefined {
  if (p === null) return undefined;
  const ns = p.metadata?.namespace;
  const name = p.metadata?.name ?? '';
  return ns ? `${ns}/${name}` : name;
}

const NO_PARAMS = Object.freeze({ ok: true as const, params: Object.freeze([null]) as unknown as (KubeObject | null)[] });

/** The params each evaluation runs with, or a configuration error (`failed to configure binding: ...`). */
function collectParams(
  policy: ValidatingAdmissionPolicy,
  binding: ValidatingAdmissionPolicyBinding,
  a: VapAttributes,
  ctx: VapContext,
): { ok: true; params: (KubeObject | null)[] } | { ok: false; error: string } {
  const kind = policy.spec.paramKind;
  const ref = binding.spec.paramRef;
  if (kind === undefined || ref === undefined) return NO_PARAMS;
  const scope = ctx.params.scope(kind);
  if (!scope.ok) return { ok: false, error: scope.error };
  if (ref.namespace && !scope.namespaced) return { ok: false, error: 'paramRef.namespace must not be provided for a cluster-scoped `paramKind`' };
  let namespace = '';
  if (scope.namespaced) {
    namespace = ref.namespace || a.namespace;
    if (namespace === '') return { ok: false, error: 'cannot use namespaced paramRef in policy binding that matches cluster-scoped resources' };
  }
  const found =
    ref.name !== undefined && ref.name !== ''
      ? ctx.params.find(kind, namespace, { name: ref.name })
      : ctx.params.find(kind, namespace, { selector: ref.selector ?? {} });
  if (!found.ok) return { ok: false, error: found.error };
  if (found.objects.length === 0 && (ref.parameterNotFoundAction ?? 'Deny') === 'Deny') {
    return { ok: false, error: 'no params found for policy binding with `Deny` parameterNotFoundAction' };
  }
  return { ok: true, params: found.objects };
}

function validationMessage<P>(run: Run<P>, v: CompiledPolicy<P>['validations'][number]): string {
  if (v.messageExpression) {
    const out = run.exec(v.messageExpression);
    if (out.ok && typeof out.value === 'string') {
      const m = out.value.trim();
      // Upstream falls back to the static message for an empty, multi-line or oversized result.
      if (m !== '' && !/[\r\n]/.test(m) && m.length <= MAX_MESSAGE_LENGTH) return m;
    }
  }
  if (v.message !== undefined && v.message !== '') return v.message;
  return `failed expression: ${v.expression.expression.trim()}`;
}

/** One policy × binding × param: matchConditions, validations, auditAnnotations. */
function evaluateWithParam<P>(
  c: CompiledPolicy<P>,
  engine: ExpressionEngine<P>,
  base: Omit<Activation, 'variables' | 'engineState'>,
  out: BindingEvaluation,
): void {
  const run = new Run(c, engine, base);
  try {
    evaluateRun(c, run, out);
  } finally {
    if (run.costFields !== undefined) {
      for (const field of new Set(run.costFields)) out.problems.push({ kind: 'cost', field, message: `${field}: the expression exceeded its CEL cost limit` });
    }
  }
}

/** An evaluation error: a failure under failurePolicy Fail, dropped (and kept in ignoredErrors) under Ignore. */
function onError(c: CompiledPolicy<unknown>, out: BindingEvaluation, message: string, expressionIndex: number | undefined): void {
  out.result = 'error';
  if (c.failurePolicy === 'Ignore') out.ignoredErrors.push(message);
  else out.failures.push({ message, reason: undefined, expressionIndex, error: true });
}

function evaluateRun<P>(c: CompiledPolicy<P>, run: Run<P>, out: BindingEvaluation): void {
  const ignore = c.failurePolicy === 'Ignore';
  // matchConditions: a false one skips the policy even when another errored.
  let errors: string[] | undefined;
  for (const m of c.matchConditions) {
    const r = run.exec(m);
    if (!r.ok) (errors ??= []).push(r.error);
    else if (r.value !== true) {
      if (r.value === false) {
        out.result = out.result === 'pass' ? 'skip' : out.result;
        out.skipReason = `matchCondition '${m.name}' is false`;
        return;
      }
      (errors ??= []).push(`matchCondition '${m.name}' did not evaluate to a bool`);
    }
  }
  if (errors !== undefined) {
    onError(c, out, errors.join(', '), undefined);
    return;
  }

  // A loop, not forEach: this runs for every policy of every request.
  for (let i = 0; i < c.validations.length; i++) {
    const v = c.validations[i] as CompiledPolicy<P>['validations'][number];
    const r = run.exec(v.expression);
    if (!r.ok) {
      onError(c, out, r.error, i);
      continue;
    }
    if (r.value === true) continue;
    if (r.value !== false) {
      onError(c, out, `expression '${v.expression.expression}' resulted in a non-bool value`, i);
      continue;
    }
    if (out.result !== 'error') out.result = 'fail';
    out.failures.push({ message: validationMessage(run, v), reason: v.reason, expressionIndex: i, error: false });
  }

  for (const a of c.auditAnnotations) {
    const r = run.exec(a.value);
    const key = `${c.policy.metadata.name}/${a.key}`;
    let error: string | undefined;
    if (!r.ok) error = r.error;
    else if (r.value === null) continue;
    else if (typeof r.value !== 'string') {
      error = `valueExpression '${a.value.expression}' resulted in unsupported return type. Return type must be either string or null.`;
    } else {
      const value = r.value.trim();
      if (value === '') continue;
      if (value.length > MAX_AUDIT_VALUE_LENGTH) error = `valueExpression '${a.value.expression}' resulted in value that exceeds the maximum length of ${MAX_AUDIT_VALUE_LENGTH}`;
      else out.auditAnnotations[key] = value;
    }
    if (error !== undefined) {
      out.result = 'error';
      if (ignore) out.ignoredErrors.push(error);
      else out.denyErrors.push(error);
    }
  }
}

export interface EvaluateOptions {
  equivalents?: EquivalentResources;
  /**
   * A bound on the time of the whole call, checked before each (policy,
   * binding, param) evaluation, as the rule evaluator does (adr/0013): past
   * it, or for a policy whose evaluation was abandoned once, the
   * evaluation is an `error` naming the deadline, without running CEL.
   */
  deadline?: {
    at: number;
    now: () => number;
    ms: number;
    /** Policies (by name) whose evaluation passed the deadline once and was abandoned. */
    abandoned?: ReadonlySet<string> | undefined;
    /** Told each policy's name just before its expressions run. */
    onPolicy?: ((name: string) => void) | undefined;
  };
}

/** Why a policy must not run now (deadline passed, or abandoned once), or undefined. */
function deadlinePassed(d: EvaluateOptions['deadline'], policy: string): string | undefined {
  if (d === undefined) return undefined;
  if (d.abandoned?.has(policy)) return `the evaluation deadline (${d.ms} ms) passed while it ran; it was abandoned`;
  if (d.now() > d.at) return `the evaluation deadline (${d.ms} ms) passed before it ran`;
  return undefined;
}

function blank(policy: string, b: ValidatingAdmissionPolicyBinding, param: string | undefined): BindingEvaluation {
  return {
    policy,
    binding: b.metadata.name,
    param,
    actions: b.spec.validationActions,
    result: 'pass',
    failures: [],
    denyErrors: [],
    ignoredErrors: [],
    auditAnnotations: {},
    problems: [],
  };
}

const NO_BINDING = { metadata: { name: '' }, spec: { validationActions: [] } } as unknown as ValidatingAdmissionPolicyBinding;

/** A configuration error of a policy (no binding) or of one of its bindings, handled by the policy's failurePolicy. */
function configError(results: BindingEvaluation[], c: CompiledPolicy<unknown>, b: ValidatingAdmissionPolicyBinding | undefined, error: string): void {
  const r = blank(c.policy.metadata.name, b ?? NO_BINDING, undefined);
  r.result = 'error';
  const msg = b ? `failed to configure binding: ${error}` : `failed to configure policy: ${error}`;
  if (c.failurePolicy === 'Ignore') r.ignoredErrors.push(msg);
  else r.denyErrors.push(msg);
  results.push(r);
}

/**
 * Every (policy, binding[, param]) that applies to the request, in the
 * order of `order` (plan(): policy name, binding name): what the admission chain turns into a
 * response and the audit and `portal test` into rows.
 */
export function evaluatePolicies<P>(
  order: Plan<P>,
  a: VapAttributes,
  ctx: VapContext,
  engine: ExpressionEngine<P>,
  opts: EvaluateOptions = {},
): BindingEvaluation[] {
  const results: BindingEvaluation[] = [];
  // One `request` object per matched resource, shared by every policy.
  let requests: Map<VapAttributes['resource'], Record<string, unknown>> | undefined;
  for (const { c, its } of order) {
    const name = c.policy.metadata.name;
    const pm = matchResources(c.policy.spec.matchConstraints, a, ctx.namespaceObject, opts.equivalents);
    if (!pm.matches) {
      if (pm.error !== undefined) configError(results, c, undefined, pm.error);
      continue;
    }
    let request: Record<string, unknown> | undefined;
    for (const b of its) {
      const bm = b.spec.matchResources ? matchResources(b.spec.matchResources, a, ctx.namespaceObject, opts.equivalents) : pm;
      if (!bm.matches) {
        if (bm.error !== undefined) configError(results, c, b, bm.error);
        else {
          const r = blank(name, b, undefined);
          r.result = 'skip';
          r.skipReason = `binding '${b.metadata.name}' does not select the object`;
          results.push(r);
        }
        continue;
      }
      const params = collectParams(c.policy, b, a, ctx);
      if (!params.ok) {
        configError(results, c, b, params.error);
        results[results.length - 1]?.problems.push({ kind: 'params', message: params.error });
        continue;
      }
      if (params.params.length === 0) {
        const r = blank(name, b, undefined);
        r.result = 'skip';
        r.skipReason = 'no params found (parameterNotFoundAction Allow)';
        results.push(r);
        continue;
      }
      if (request === undefined) {
        requests ??= new Map();
        request = requests.get(pm.resource);
        if (request === undefined) requests.set(pm.resource, (request = toRequest(a, pm.resource)));
      }
      for (const p of params.params) {
        const r = blank(name, b, paramDisplay(p));
        const late = deadlinePassed(opts.deadline, name);
        if (late !== undefined) {
          r.result = 'error';
          if (c.failurePolicy === 'Ignore') r.ignoredErrors.push(late);
          else r.denyErrors.push(late);
        } else {
          opts.deadline?.onPolicy?.(name);
          evaluateWithParam(c, engine, { object: a.object, oldObject: a.oldObject, request, params: p, namespaceObject: ctx.namespaceObject }, r);
        }
        results.push(r);
      }
    }
  }
  return results;
}

/** Policies in name order, each with its bindings in name order. */
export type Plan<P> = { c: CompiledPolicy<P>; its: ValidatingAdmissionPolicyBinding[] }[];

/** The evaluation order of policies and bindings (VapSet computes it once per change). */
export function plan<P>(policies: readonly CompiledPolicy<P>[], bindings: readonly ValidatingAdmissionPolicyBinding[]): Plan<P> {
  const byPolicy = new Map<string, ValidatingAdmissionPolicyBinding[]>();
  for (const b of bindings) {
    const list = byPolicy.get(b.spec.policyName) ?? [];
    list.push(b);
    byPolicy.set(b.spec.policyName, list);
  }
  return [...policies]
    .sort((x, y) => cmp(x.policy.metadata.name, y.policy.metadata.name))
    .map((c) => ({ c, its: (byPolicy.get(c.policy.metadata.name) ?? []).slice().sort((x, y) => cmp(x.metadata.name, y.metadata.name)) }))
    .filter((e) => e.its.length > 0);
}

function cmp(x: string, y: string): number {
  return x < y ? -1 : x > y ? 1 : 0;
}

export { PER_CALL_COST_LIMIT, RUNTIME_COST_BUDGET };
