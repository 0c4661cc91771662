/**
 * The Portal rule API, `portal.dev/v1alpha1` (docs/design.md §2), and the shapes the
 * engine exchanges with its callers (admission, audit, `portal test`).
 *
 * This module is the contract between `src/policy` and everything that uses
 * it: no I/O, no Kubernetes client.
 */

// Kubernetes object shapes live in src/types/kubernetes.ts (shared by kube/ and policy/); re-exported for existing importers.
import type { ObjectMeta } from '../types/kubernetes.ts';
export type { GroupVersionKind, KubeObject, ObjectMeta } from '../types/kubernetes.ts';
import type { GroupVersionKind, KubeObject } from '../types/kubernetes.ts';

export const RULE_GROUP = 'portal.dev';
export const RULE_VERSION = 'v1alpha1';
export const RULE_API_VERSION = `${RULE_GROUP}/${RULE_VERSION}` as const;

export type RuleKind = 'PortalRule' | 'PortalClusterRule';
export const EXCEPTION_KIND = 'PortalException';
export type Enforcement = 'Deny' | 'Warn' | 'Audit';
/** Whether a rule's error is a failure (then its enforcement decides) or is dropped (VAP's failurePolicy). */
export type FailurePolicy = 'Fail' | 'Ignore';
export type Severity = 'critical' | 'high' | 'medium' | 'low' | 'info';
export type Operation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
export type ActionType = 'label' | 'annotate' | 'evict' | 'alert';

/** metav1.LabelSelector */
export interface LabelSelectorRequirement {
  key: string;
  operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
  values?: string[];
}
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export interface KindMatch {
  /** "" = core, "*" = any group. */
  apiGroups: string[];
  /** Kind names, "*" = any kind. */
  kinds: string[];
  /**
   * Subresources this entry also matches (`status`, `scale`, `eviction`, …;
   * "*" = any). A request for a subresource is not matched unless named here.
   */
  subresources?: string[];
}

export interface RuleMatch {
  kinds: KindMatch[];
  /** @default ["CREATE", "UPDATE"] */
  operations?: Operation[];
  /** Only these namespaces; a trailing `*` is a prefix glob. */
  namespaces?: string[];
  /** Never these namespaces (same glob). */
  excludedNamespaces?: string[];
  namespaceSelector?: LabelSelector;
  objectSelector?: LabelSelector;
}

export interface RuleAction {
  type: ActionType;
  /** label/annotate: key to set. */
  key?: string;
  /** label/annotate: value to set. */
  value?: string;
}

/**
 * The Pod Security Standards version a rule checks, as Pod Security Admission
 * pins it. The namespace label `pod-security.kubernetes.io/enforce-version`
 * overrides it, as a namespace label overrides PSA's configured default.
 */
export interface PodSecuritySettings {
  /** `latest` or `v1.N` (e.g. `v1.30`); anything else is rejected at load. @default "latest" */
  version?: string;
}

export interface RuleSpec {
  /** @default "Deny" */
  enforcement?: Enforcement;
  /**
   * What a rule error (never compiled, runtime error, cost or regex budget,
   * deadline) does: `Fail` treats it as a failure that `enforcement` acts on
   * (Deny denies, Warn warns, Audit is silent); `Ignore` admits. The audit
   * reports `error` either way. @default "Fail"
   */
  failurePolicy?: FailurePolicy;
  /** @default "medium" */
  severity?: Severity;
  category?: string;
  match: RuleMatch;
  /** @default true (only meaningful for rules that match Pod) */
  podTemplates?: boolean;
  /** Version pinning for schemas that use `minPodSecurityVersion` (policies/README.md). */
  podSecurity?: PodSecuritySettings;
  validate: {
    message?: string;
    /** JSON Schema (draft 2020-12) that a compliant object satisfies. At least one of schema and cel. */
    schema?: Record<string, unknown> | boolean;
    /** CEL checks in ValidatingAdmissionPolicy syntax; both must pass when both are given. */
    cel?: CelValidation;
  };
  audit?: { actions?: RuleAction[] };
}

/** `validate.cel`: ValidatingAdmissionPolicy's syntax (docs/design.md §8). */
export interface CelValidation {
  /** All must be true for the rule to apply; a false one skips the rule. */
  matchConditions?: { name: string; expression: string }[];
  /** Lazily evaluated, read as `variables.NAME`; each may read earlier ones. */
  variables?: { name: string; expression: string }[];
  expressions: {
    expression: string;
    message?: string;
    messageExpression?: string;
    /** @default "Invalid" */
    reason?: 'Unauthorized' | 'Forbidden' | 'Invalid' | 'RequestEntityTooLarge';
  }[];
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

export interface RuleStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  violations?: number;
  lastAuditTime?: string;
}

export interface PortalRuleObject {
  apiVersion: typeof RULE_API_VERSION;
  kind: RuleKind;
  metadata: ObjectMeta;
  spec: RuleSpec;
  status?: RuleStatus;
}

/**
 * What the evaluator looks at: an admission request, or an existing object
 * seen by the audit (operation "AUDIT" skips the operations filter).
 */
export interface EvaluationInput {
  operation: Operation | 'AUDIT';
  kind: GroupVersionKind;
  /** "" when the request is not for a subresource. */
  subResource?: string;
  /** "" for cluster-scoped objects. */
  namespace: string;
  name: string;
  object: KubeObject | null;
  oldObject: KubeObject | null;
  /**
   * Labels of the object's namespace (for a Namespace: its own labels).
   * `undefined` when unknown: rules with a namespaceSelector then give `error`.
   */
  namespaceLabels: Record<string, string> | undefined;
  /**
   * The AdmissionRequest, for CEL rules' `request` variable (userInfo, dryRun,
   * resource, options, …). Absent for the audit and `portal test`, where CEL
   * sees a request built from the fields above.
   */
  request?: Readonly<Record<string, unknown>>;
  /**
   * When the input is judged (wall clock, ms since the epoch): exceptions
   * whose `expiresAt` is not after it no longer apply. Admission and the
   * audit leave it unset (the clock when evaluated); `portal test --now`
   * and tests set it.
   */
  now?: number;
}

export type Verdict = 'pass' | 'fail' | 'warn' | 'skip' | 'error';

export interface SchemaViolation {
  /** Dotted path into the object, e.g. `spec.template.spec.containers[0].securityContext.privileged`. */
  path: string;
  message: string;
}

/**
 * Why a verdict is `error`, for the metric and the Events on the rule (the
 * verdict's `message` says it to people):
 * - `CompileError`: no version of the rule ever compiled;
 * - `EvaluationError`: an expression or the schema failed on this object;
 * - `CostExceeded`: a CEL cost or regex matching budget ran out;
 * - `Deadline`: the request's evaluation time budget ran out before the rule ran;
 * - `Undecidable`: what the rule needs is unknown (the namespace's labels, the object);
 * - `OutOfMemory`: evaluating the rule on this object exhausted an evaluation thread's memory (adr/0018).
 * `CompileError`, `EvaluationError`, `CostExceeded` and `OutOfMemory` are defects of the rule or of the
 * object (Events name them); `Deadline` and `Undecidable` are not the rule's doing.
 */
export type RuleErrorReason = 'CompileError' | 'EvaluationError' | 'CostExceeded' | 'Deadline' | 'Undecidable' | 'OutOfMemory';

export interface RuleError {
  reason: RuleErrorReason;
  /** The field of the rule that failed, e.g. `spec.validate.cel.expressions[0].expression`, when known. */
  field?: string;
}

export interface RuleVerdict {
  /** `name` for cluster rules, `namespace/name` for namespaced rules; a VAP's name. */
  rule: string;
  ruleKind: RuleKind | 'ValidatingAdmissionPolicy';
  /** The report result's `rule` when it is not `rule`: a VAP's binding name (docs/design.md §8). */
  reportRule?: string;
  enforcement: Enforcement;
  /** How an `error` result is treated at admission. @default "Fail" */
  failurePolicy?: FailurePolicy;
  severity: Severity;
  category: string;
  result: Verdict;
  /** Human message naming the rule, its message and the first schema errors. */
  message: string;
  violations: SchemaViolation[];
  /** The PortalException (`namespace/name`) that exempted the object from this rule; the result is then `skip`. */
  exception?: string;
  /** Set on `error` verdicts of Portal rules: why (see RuleError). */
  error?: RuleError;
}

/** `spec.match` of a PortalException: a rule's match, plus names. */
export interface ExceptionMatch extends Omit<RuleMatch, 'operations'> {
  /** @default every operation */
  operations?: Operation[];
  /** Only objects with these names; a trailing `*` is a prefix glob. */
  names?: string[];
}

/** `portal.dev/v1alpha1` PortalException spec (docs/exceptions.md). */
export interface ExceptionSpec {
  /**
   * The rules exempted: `NAME` (a PortalClusterRule, a PortalRule in the
   * exception's namespace, or a VAP with any binding) or `NAMESPACE/NAME`
   * (a PortalRule in NAMESPACE, or a VAP `POLICY/BINDING`).
   */
  rules: string[];
  match: ExceptionMatch;
  /** @default true (only meaningful when match names Pod) */
  podTemplates?: boolean;
  /** CEL, VAP syntax; all must be true for the exception to apply. */
  matchConditions?: { name: string; expression: string }[];
  /** RFC 3339; absent: never expires (unless --max-exception-lifetime refuses it). */
  expiresAt?: string;
  /** Why (free text, e.g. a ticket). */
  reason: string;
}

export interface ExceptionStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  /** Objects the exception exempts now (from the audit). */
  exempted?: number;
}

export interface PortalExceptionObject {
  apiVersion: typeof RULE_API_VERSION;
  kind: typeof EXCEPTION_KIND;
  metadata: ObjectMeta;
  spec: ExceptionSpec;
  status?: ExceptionStatus;
}
