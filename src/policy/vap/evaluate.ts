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
import { PER_CALL_COST_LIMIT, RUNTIME_COST_BUDGET, type ExpressionEngine } from './engine.ts';
import { matchResources, type EquivalentResources } from './match.ts';
import type { ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, VapAttributes, VapContext } from './types.ts';
import type { BindingEvaluation, CompiledPolicy } from './compiled.ts';
import { evaluateWithParam } from './run.ts';

export { compileErrors, compilePolicy, expressionCosts, type ExpressionCost, type BindingEvaluation, type CompiledPolicy, type PolicyCompileError, type ValidationFailure } from './compiled.ts';
export { COST_BUDGET_MESSAGE } from './run.ts';

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
  // Variable values shared by the policies evaluated on one `request` object (run.ts).
  let sharedValues: Map<object, Map<string, { value: unknown; cost: number }>> | undefined;
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
          sharedValues ??= new Map();
          let shared = sharedValues.get(request);
          if (shared === undefined) sharedValues.set(request, (shared = new Map()));
          evaluateWithParam(c, engine, shared, { object: a.object, oldObject: a.oldObject, request, params: p, namespaceObject: ctx.namespaceObject }, r);
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
