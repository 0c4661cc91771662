/**
 * One offline evaluation of a resource against Portal rules and
 * ValidatingAdmissionPolicies, as the webhook (evaluate()) and the API server
 * (VapSet) would give it, with the namespace labels and params that manifests
 * supply instead of a cluster. Shared by `portal test`'s ad-hoc mode and its
 * suites, so both give the same verdicts for the same object.
 */
import type { VapDocuments } from '../../sources/vap-files.ts';
import {
  evaluate,
  exemptVerdicts,
  isCostOverrun,
  POD_SECURITY_VERSION_LABEL,
  RuleSet,
  type EvaluationBudget,
  type EvaluationInput,
  type KubeObject,
  type Operation,
  type ExceptionOptions,
  type PortalExceptionObject,
  type PortalRuleObject,
  type RuleVerdict,
} from '../../policy/index.ts';
import { selectorMatches } from '../../policy/label-selector.ts';
import type { ResourceRef } from '../../policy/report-format.ts';
import {
  guessResource,
  VapSet,
  vapVerdicts,
  type ParamProvider,
  type ValidatingAdmissionPolicy,
  type VapAttributes,
} from '../../policy/vap/index.ts';
import { CLUSTER_SCOPED_KINDS, NAMESPACE_NAME_LABEL, namespaceOf, type Resource } from './resources.ts';

/** The user a request comes from (authentication.k8s.io/v1 UserInfo). */
export interface UserInfo {
  username: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

/**
 * The request an object is evaluated in. `AUDIT` is an existing object as the
 * audit sees it (every rule matching the kind applies; a VAP applies where its
 * rules admit CREATE) and is what the ad-hoc mode uses; the others are
 * admission requests. DELETE validates the resource as the old object.
 */
export interface OfflineRequest {
  operation: 'AUDIT' | Extract<Operation, 'CREATE' | 'UPDATE' | 'DELETE'>;
  /** UPDATE: the object before the change. */
  oldObject?: KubeObject | null;
  /** Absent: an anonymous request (username "", no groups), as the ad-hoc mode has always used. */
  userInfo?: UserInfo;
}

export interface OfflineEvaluation {
  /** Sorted by rule, like the audit's reports (stable: a VAP's bindings stay in order). */
  verdicts: RuleVerdict[];
  /**
   * Portal rules whose CEL exceeded its cost limit: a defect of the rule (an
   * unbounded loop), not of the object. `portal test` reports them as bad input.
   */
  overruns: string[];
  /**
   * VAP results that mean nothing because of the policy or the test setup:
   * a cost overrun, a missing param. Bad input too.
   */
  problems: string[];
}

export interface OfflinePolicySet {
  rules: readonly PortalRuleObject[];
  /** Rule key (`Kind/name`) → where it came from, for problems. */
  ruleSources: ReadonlyMap<string, string>;
  /** PortalExceptions, judged exactly as `portal serve` judges them (the RuleSet holds them). */
  exceptions?: readonly PortalExceptionObject[];
  vap: VapDocuments;
}

/** The chart's install namespace: what `portal serve --exception-namespaces` defaults to there. */
export const DEFAULT_EXCEPTION_NAMESPACE = 'portal-system';

/** How exceptions are judged offline: `portal serve`'s options, and the instant expiry is judged at. */
export interface OfflineJudging {
  /** @default { exceptionNamespaces: [DEFAULT_EXCEPTION_NAMESPACE] } */
  exceptions?: ExceptionOptions;
  /** Milliseconds since the epoch. @default the clock, read once when the evaluator is built */
  now?: number;
}

export interface NamespaceContext {
  /** Labels of the namespaces the inputs define (Namespace manifests). */
  labels: ReadonlyMap<string, Record<string, string>>;
  /** The enforce-version label of namespaces that do not set one (`--pod-security-version`). */
  podSecurityVersion?: string | undefined;
}

/**
 * What the evaluation thread of `portal test` (offline/thread.ts) is told
 * and asks while a resource is evaluated: which rule is about to run, so that
 * when the thread's memory runs out the main thread knows the pair; and
 * whether a rule already exhausted it on this resource, so that it gives
 * `error` without running again.
 */
export interface OfflineWatch {
  /** Told a Portal rule's RuleSet key, or VAP_KEY + a policy's name, before it runs. */
  onRule: (key: string) => void;
  /** The `error` message of a rule that exhausted the thread's memory on this resource, else undefined. */
  poisoned: (key: string) => string | undefined;
}

/** What OfflineWatch.onRule is told before a ValidatingAdmissionPolicy runs: this, then its name. */
export const VAP_KEY = 'ValidatingAdmissionPolicy/';

export class OfflineEvaluator {
  private readonly rules: RuleSet;
  private readonly ruleList: readonly PortalRuleObject[];
  private readonly exceptionList: readonly PortalExceptionObject[];
  /** One instant for every verdict of the run, as the audit fixes one per object. */
  private readonly now: number;
  private readonly ruleSources: ReadonlyMap<string, string>;
  private readonly vaps = new VapSet();
  private readonly vapByName: ReadonlyMap<string, ValidatingAdmissionPolicy>;
  private readonly vapSource: ReadonlyMap<string, string>;
  private readonly params: ParamProvider;
  private readonly namespaces: NamespaceContext;

  /** `params`: the param objects besides those among the policies (objects of a paramKind among the resources). */
  constructor(policies: OfflinePolicySet, namespaces: NamespaceContext, params: readonly { source: string; object: KubeObject }[] = [], judging: OfflineJudging = {}) {
    this.rules = new RuleSet(judging.exceptions ?? { exceptionNamespaces: [DEFAULT_EXCEPTION_NAMESPACE] });
    this.now = judging.now ?? Date.now();
    this.ruleList = policies.rules;
    this.exceptionList = policies.exceptions ?? [];
    this.ruleSources = policies.ruleSources;
    for (const rule of policies.rules) this.rules.upsert(rule);
    for (const ex of this.exceptionList) this.rules.upsertException(ex);
    for (const { policy } of policies.vap.policies) this.vaps.upsertPolicy(policy);
    for (const { binding } of policies.vap.bindings) this.vaps.upsertBinding(binding);
    this.vapByName = new Map(policies.vap.policies.map((p) => [p.policy.metadata.name, p.policy]));
    this.vapSource = new Map(policies.vap.policies.map((p) => [p.policy.metadata.name, p.source]));
    this.params = fileParams([...policies.vap.params, ...params].map((p) => p.object));
    this.namespaces = namespaces;
  }

  /** Whether some policy takes params of this apiVersion/kind (so such an object among the resources is a param too). */
  isParamKind(apiVersion: string, kind: string): boolean {
    for (const p of this.vapByName.values()) if (p.spec.paramKind?.apiVersion === apiVersion && p.spec.paramKind.kind === kind) return true;
    return false;
  }

  /** The labels of namespace `ns` as the API server would have them, or undefined for "" (cluster scope). */
  labelsOf(ns: string): Record<string, string> | undefined {
    if (ns === '') return undefined;
    const own = this.namespaces.labels.get(ns) ?? {};
    const v = this.namespaces.podSecurityVersion;
    const version = v !== undefined && own[POD_SECURITY_VERSION_LABEL] === undefined ? { [POD_SECURITY_VERSION_LABEL]: v } : {};
    // The name label is immutable and always set by the API server, whatever the manifest says.
    return { ...own, ...version, [NAMESPACE_NAME_LABEL]: ns };
  }

  evaluate({ ref, input }: Resource, request: OfflineRequest = { operation: 'AUDIT' }, watch?: OfflineWatch): OfflineEvaluation {
    const overruns: string[] = [];
    const problems: string[] = [];
    const deleting = request.operation === 'DELETE';
    const object = deleting ? null : input.object;
    const oldObject = deleting ? input.object : (request.oldObject ?? null);
    // A Namespace is matched on its own labels (docs/design.md §10.1).
    const nsName = ref.kind === 'Namespace' ? ref.name : ref.namespace;
    const resource = { group: input.kind.group, version: input.kind.version, resource: guessResource(input.kind.kind) };
    const admission = request.operation === 'AUDIT' && request.userInfo === undefined ? undefined : admissionRequest(ref, input, resource, request, object, oldObject);
    const portalInput: EvaluationInput = { ...input, operation: request.operation, object, oldObject, namespaceLabels: this.labelsOf(nsName), now: this.now };
    if (admission) portalInput.request = admission;
    // No deadline offline (the CEL cost limits bound the time); the budget carries the watch.
    const budget: EvaluationBudget | undefined = watch && { deadline: Number.POSITIVE_INFINITY, now: () => 0, ms: 0, onRule: watch.onRule, poisoned: (key) => watch.poisoned(key) };
    const verdicts = safeEvaluate(this.rules, this.ruleList, this.exceptionList, portalInput, budget);
    for (const v of verdicts) {
      if (v.result === 'error' && isCostOverrun(v.message)) {
        overruns.push(`${this.ruleSources.get(`${v.ruleKind}/${v.rule}`) ?? '?'}: ${v.ruleKind} "${v.rule}" on ${describe(ref)}: ${v.message}`);
      }
    }
    if (this.vapByName.size > 0) {
      const namespaceObject = ref.namespace === '' ? null : { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ref.namespace, labels: this.labelsOf(ref.namespace) ?? {} } };
      const attrs: VapAttributes = {
        operation: request.operation,
        kind: input.kind,
        resource,
        subResource: '',
        namespace: ref.namespace,
        name: ref.name,
        namespaced: ref.namespace !== '',
        object,
        oldObject,
      };
      if (request.userInfo) attrs.userInfo = request.userInfo;
      const onPolicy = watch && ((name: string) => watch.onRule(VAP_KEY + name));
      const results = this.vaps.evaluate(attrs, { namespaceObject, params: this.params }, onPolicy && { deadline: { at: Number.POSITIVE_INFINITY, now: () => 0, ms: 0, onPolicy } });
      for (const r of results) {
        for (const p of r.problems) {
          const binding = r.binding ? ` with binding "${r.binding}"` : '';
          problems.push(`${this.vapSource.get(r.policy) ?? '?'}: ValidatingAdmissionPolicy "${r.policy}"${binding} on ${describe(ref)}: ${p.message}`);
        }
      }
      // VAP verdicts go through the same exceptions (the audit does the same).
      verdicts.push(...exemptVerdicts(this.rules, portalInput, vapVerdicts(results, this.vapByName)));
    }
    verdicts.sort((a, b) => (a.rule < b.rule ? -1 : a.rule > b.rule ? 1 : 0));
    return { verdicts, overruns, problems };
  }
}

/** `Kind ns/name` or `Kind name`. */
export function describe(ref: { kind: string; namespace: string; name: string }): string {
  return `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name}`;
}

/** The AdmissionRequest the API server would send, for CEL rules' `request` (the same fields VAP expressions see). */
function admissionRequest(
  ref: ResourceRef,
  input: Resource['input'],
  resource: VapAttributes['resource'],
  request: OfflineRequest,
  object: KubeObject | null,
  oldObject: KubeObject | null,
): Readonly<Record<string, unknown>> {
  return {
    uid: '',
    kind: input.kind,
    resource,
    subResource: '',
    requestKind: input.kind,
    requestResource: resource,
    requestSubResource: '',
    name: ref.name,
    namespace: ref.namespace,
    operation: request.operation === 'AUDIT' ? 'CREATE' : request.operation,
    userInfo: request.userInfo ?? { username: '', groups: [] },
    object,
    oldObject,
    dryRun: false,
    options: null,
  };
}

/**
 * Params from files: objects of a paramKind among the policies and inputs. A
 * namespaced param without metadata.namespace lives in "default", like any
 * manifest; kinds in CLUSTER_SCOPED_KINDS are cluster-scoped.
 */
function fileParams(objects: readonly KubeObject[]): ParamProvider {
  return {
    scope: (kind) => ({ ok: true, namespaced: !CLUSTER_SCOPED_KINDS.has(kind.kind) }),
    find: (kind, namespace, ref) => ({
      ok: true,
      objects: objects
        .filter((o) => o.apiVersion === kind.apiVersion && o.kind === kind.kind && (namespace === '' || namespaceOf(o) === namespace))
        .filter((o) => ('name' in ref ? o.metadata?.name === ref.name : selectorMatches(ref.selector, o.metadata?.labels)))
        .sort((a, b) => `${namespaceOf(a)}/${a.metadata?.name ?? ''}`.localeCompare(`${namespaceOf(b)}/${b.metadata?.name ?? ''}`)),
    }),
  };
}

/**
 * evaluate(), but a rule whose schema throws on this input (e.g. a recursive
 * schema on a very deep object overflowing the stack) becomes an `error`
 * verdict for that rule instead of ending the run. Only after a throw are the
 * rules evaluated one by one, to find which one it was.
 */
function safeEvaluate(set: RuleSet, rules: readonly PortalRuleObject[], exceptions: readonly PortalExceptionObject[], input: EvaluationInput, budget: EvaluationBudget | undefined): RuleVerdict[] {
  try {
    return evaluate(set, input, budget);
  } catch {
    const out: RuleVerdict[] = [];
    for (const rule of rules) {
      const single = new RuleSet(set.options);
      for (const ex of exceptions) single.upsertException(ex);
      const state = single.upsert(rule);
      const display = state.namespace === undefined ? state.name : `${state.namespace}/${state.name}`;
      try {
        out.push(...evaluate(single, input, budget));
      } catch (err) {
        out.push({
          rule: display,
          ruleKind: state.ruleKind,
          enforcement: state.enforcement,
          severity: state.severity,
          category: state.category,
          result: 'error',
          message: `rule ${display} could not be evaluated: ${err instanceof Error ? err.message : String(err)}`,
          violations: [],
        });
      }
    }
    return out;
  }
}
