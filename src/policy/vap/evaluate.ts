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
import type { ExpressionEngine, SharedValue } from './engine.ts';
import { compileMatch, type CompiledMatch, type EquivalentResources, type MatchResult } from './match.ts';
import type { GroupVersionResource, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, VapAttributes, VapContext } from './types.ts';
import type { BindingEvaluation, CompiledPolicy } from './compiled.ts';
import { erred, Evaluation } from './run.ts';


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

/** A result shared by every request it applies to: frozen, so nothing writes into it. */
function frozen(r: BindingEvaluation): BindingEvaluation {
  for (const list of [r.failures, r.denyErrors, r.ignoredErrors, r.problems, r.auditAnnotations]) Object.freeze(list);
  return Object.freeze(r);
}

const NO_BINDING = { metadata: { name: '' }, spec: { validationActions: [] } } as unknown as ValidatingAdmissionPolicyBinding;

/** A configuration error of a policy (no binding) or of one of its bindings, handled by the policy's failurePolicy. */
function configError(results: BindingEvaluation[], c: CompiledPolicy<unknown>, b: ValidatingAdmissionPolicyBinding | undefined, error: string): BindingEvaluation {
  const r = erred(blank(c.policy.metadata.name, b ?? NO_BINDING, undefined), c, b ? `failed to configure binding: ${error}` : `failed to configure policy: ${error}`);
  results.push(r);
  return r;
}

/**
 * One call of evaluatePolicies: the `request` objects (one per matched
 * resource, shared by every policy), the variable values shared by the
 * policies evaluated on each (run.ts), and the Evaluation they run on.
 */
class Call<P> {
  private last: { resource: GroupVersionResource; request: Record<string, unknown>; shared: (SharedValue | undefined)[] } | undefined;
  private others: Map<GroupVersionResource, NonNullable<Call<P>['last']>> | undefined;
  private run: Evaluation<P> | undefined;

  constructor(
    private readonly a: VapAttributes,
    private readonly ctx: VapContext,
    private readonly engine: ExpressionEngine<P>,
    private readonly deadline: EvaluateOptions['deadline'],
  ) {}

  private requestFor(resource: GroupVersionResource): NonNullable<Call<P>['last']> {
    const last = this.last;
    if (last !== undefined && last.resource === resource) return last;
    let hit = this.others?.get(resource);
    if (hit === undefined) {
      hit = { resource, request: toRequest(this.a, resource), shared: [] };
      // The first resource needs no map (most requests have only one).
      if (last !== undefined) {
        this.others ??= new Map([[last.resource, last]]);
        this.others.set(resource, hit);
      }
    }
    this.last = hit;
    return hit;
  }

  /** One (policy, binding, param) evaluation, unless the deadline stops it. */
  evaluate(pp: PlannedPolicy<P>, pb: PlannedBinding, p: KubeObject | null, resource: GroupVersionResource): BindingEvaluation {
    const { c, name } = pp;
    const template = p === null ? pb.pass : blank(name, pb.b, paramDisplay(p));
    const late = deadlinePassed(this.deadline, name);
    if (late !== undefined) return erred(p === null ? blank(name, pb.b, undefined) : template, c, late);
    this.deadline?.onPolicy?.(name);
    const { request, shared } = this.requestFor(resource);
    // Most evaluations admit: the policy's pass check says so without the general evaluation (pass-check.ts).
    const pass = c.passCheck;
    if (pass !== undefined && pass(this.a.object, this.a.oldObject, request, p, this.ctx.namespaceObject, p === null ? pp.sharedIds : undefined, p === null ? shared : undefined)) return template;
    this.run ??= new Evaluation(this.engine, { object: this.a.object, oldObject: this.a.oldObject, namespaceObject: this.ctx.namespaceObject });
    return this.run.evaluate(c, pp.names, request, p, template, pp.sharedIds, shared);
  }
}

/** The bindings of a policy that uses params: each binding's params looked up, the policy run once per param. */
function evaluateWithParams<P>(call: Call<P>, results: BindingEvaluation[], pp: PlannedPolicy<P>, pb: PlannedBinding, a: VapAttributes, ctx: VapContext, resource: GroupVersionResource): void {
  const { c, name } = pp;
  const params = collectParams(c.policy, pb.b, a, ctx);
  if (!params.ok) {
    configError(results, c, pb.b, params.error).problems.push({ kind: 'params', message: params.error });
    return;
  }
  if (params.params.length === 0) {
    const r = blank(name, pb.b, undefined);
    r.result = 'skip';
    r.skipReason = 'no params found (parameterNotFoundAction Allow)';
    results.push(r);
    return;
  }
  for (const p of params.params) results.push(call.evaluate(pp, pb, p, resource));
}

/**
 * Every (policy, binding[, param]) that applies to the request, in the
 * order of `order` (plan(): policy name, binding name): what the admission chain turns into a
 * response and the audit and `portal test` into rows. A (policy, binding)
 * that admits without params gives its binding's shared (frozen) result.
 */
export function evaluatePolicies<P>(
  order: Plan<P>,
  a: VapAttributes,
  ctx: VapContext,
  engine: ExpressionEngine<P>,
  opts: EvaluateOptions = {},
): BindingEvaluation[] {
  const results: BindingEvaluation[] = [];
  // Each distinct matchConstraints / matchResources is judged once per call.
  const matched: (MatchResult | undefined)[] = [];
  const call = new Call(a, ctx, engine, opts.deadline);
  for (const pp of order.policies) {
    const pm = (matched[pp.match] ??= (order.matchers[pp.match] as CompiledMatch)(a, ctx.namespaceObject, opts.equivalents));
    if (!pm.matches) {
      if (pm.error !== undefined) configError(results, pp.c, undefined, pm.error);
      continue;
    }
    for (const pb of pp.its) {
      const bm = pb.match < 0 ? pm : (matched[pb.match] ??= (order.matchers[pb.match] as CompiledMatch)(a, ctx.namespaceObject, opts.equivalents));
      if (!bm.matches) {
        if (bm.error !== undefined) configError(results, pp.c, pb.b, bm.error);
        else results.push(pb.notSelected);
      } else if (pb.paramless) results.push(call.evaluate(pp, pb, null, pm.resource));
      else evaluateWithParams(call, results, pp, pb, a, ctx, pm.resource);
    }
  }
  return results;
}

/** A policy as the evaluator runs it, with what of it and of its bindings is computed once per change. */
export interface PlannedPolicy<P> {
  c: CompiledPolicy<P>;
  name: string;
  /** c.variableNames, the same array for policies with the same names (the engine switches its variables object less). */
  names: readonly string[];
  /** Index of its matchConstraints in Plan.matchers. */
  match: number;
  /** Its bindings in name order. */
  its: PlannedBinding[];
  /** Per variable, its slot among the values shared by the policies of a request (-1: not shared). */
  sharedIds: readonly number[];
}

export interface PlannedBinding {
  b: ValidatingAdmissionPolicyBinding;
  /** Index of its matchResources in Plan.matchers; -1 without one (the policy's decides). */
  match: number;
  /** Without params (no paramKind, or no paramRef): evaluated once, with params null. */
  paramless: boolean;
  /** Its result when an evaluation without params reports nothing (shared, frozen). */
  pass: BindingEvaluation;
  /** Its result when its matchResources does not select the request (shared, frozen). */
  notSelected: BindingEvaluation;
}

/** Policies in name order, each with its bindings; the distinct match criteria, each compiled once. */
export interface Plan<P> {
  policies: PlannedPolicy<P>[];
  matchers: CompiledMatch[];
}

/** The evaluation order of policies and bindings, and what they need compiled (VapSet computes it once per change). */
export function plan<P>(policies: readonly CompiledPolicy<P>[], bindings: readonly ValidatingAdmissionPolicyBinding[]): Plan<P> {
  const byPolicy = new Map<string, ValidatingAdmissionPolicyBinding[]>();
  for (const b of bindings) {
    const list = byPolicy.get(b.spec.policyName) ?? [];
    list.push(b);
    byPolicy.set(b.spec.policyName, list);
  }
  const matchers: CompiledMatch[] = [];
  const matcherIds = new Map<string, number>();
  const matcher = (m: ValidatingAdmissionPolicy['spec']['matchConstraints']): number => {
    const key = JSON.stringify(m ?? {});
    let id = matcherIds.get(key);
    if (id === undefined) {
      matcherIds.set(key, (id = matchers.length));
      matchers.push(compileMatch(m ?? {}));
    }
    return id;
  };
  const sharedIds = new Map<string, number>();
  const namesLists = new Map<string, readonly string[]>();
  const planned = [...policies]
    .sort((x, y) => cmp(x.policy.metadata.name, y.policy.metadata.name))
    .map((c): PlannedPolicy<P> => {
      const name = c.policy.metadata.name;
      const its = (byPolicy.get(name) ?? []).slice().sort((x, y) => cmp(x.metadata.name, y.metadata.name));
      const namesKey = c.variableNames.join('\u0000');
      const names = namesLists.get(namesKey) ?? c.variableNames;
      namesLists.set(namesKey, names);
      return {
        c,
        name,
        names,
        match: its.length > 0 ? matcher(c.policy.spec.matchConstraints) : -1,
        its: its.map((b) => {
          const notSelected = blank(name, b, undefined);
          notSelected.result = 'skip';
          notSelected.skipReason = `binding '${b.metadata.name}' does not select the object`;
          const paramless = c.policy.spec.paramKind === undefined || b.spec.paramRef === undefined;
          return { b, match: b.spec.matchResources ? matcher(b.spec.matchResources) : -1, paramless, pass: frozen(blank(name, b, undefined)), notSelected: frozen(notSelected) };
        }),
        sharedIds: c.variableKeys.map((key) => {
          if (key === undefined) return -1;
          let id = sharedIds.get(key);
          if (id === undefined) sharedIds.set(key, (id = sharedIds.size));
          return id;
        }),
      };
    })
    .filter((e) => e.its.length > 0);
  return { policies: planned, matchers };
}

function cmp(x: string, y: string): number {
  return x < y ? -1 : x > y ? 1 : 0;
}

