/**
 * ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding,
 * `admissionregistration.k8s.io/v1` (Kubernetes ≥ 1.30), as plain JSON
 * shapes, plus what the VAP engine exchanges with its callers (the embedded
 * API server, `portal test`, the audit). No I/O.
 */
import type { FailurePolicy, KubeObject, LabelSelector, ObjectMeta } from '../types.ts';

export const VAP_GROUP = 'admissionregistration.k8s.io';
export const VAP_VERSION = 'v1';
export const VAP_API_VERSION = `${VAP_GROUP}/${VAP_VERSION}` as const;
export const VAP_KIND = 'ValidatingAdmissionPolicy';
export const VAP_BINDING_KIND = 'ValidatingAdmissionPolicyBinding';

export type VapOperation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT' | '*';
export type { FailurePolicy } from '../types.ts';
export type MatchPolicy = 'Exact' | 'Equivalent';
export type ValidationAction = 'Deny' | 'Warn' | 'Audit';
export type ParameterNotFoundAction = 'Allow' | 'Deny';
/** The status reasons a validation may give (each maps to an HTTP code). */
export type ValidationReason = 'Unauthorized' | 'Forbidden' | 'Invalid' | 'RequestEntityTooLarge';

export interface NamedRuleWithOperations {
  apiGroups?: string[];
  apiVersions?: string[];
  /** `pods`, `pods/status`, `pods/*`, `*`, `*\/scale`, `*\/*`. */
  resources?: string[];
  resourceNames?: string[];
  operations?: VapOperation[];
  /** @default "*" */
  scope?: 'Cluster' | 'Namespaced' | '*';
}

export interface MatchResources {
  namespaceSelector?: LabelSelector;
  objectSelector?: LabelSelector;
  resourceRules?: NamedRuleWithOperations[];
  excludeResourceRules?: NamedRuleWithOperations[];
  /** @default "Equivalent" */
  matchPolicy?: MatchPolicy;
}

export interface NamedExpression {
  name: string;
  expression: string;
}

export interface Validation {
  expression: string;
  message?: string;
  messageExpression?: string;
  reason?: ValidationReason;
}

export interface AuditAnnotation {
  key: string;
  valueExpression: string;
}

export interface ParamKind {
  apiVersion: string;
  kind: string;
}

export interface ValidatingAdmissionPolicySpec {
  paramKind?: ParamKind;
  matchConstraints: MatchResources;
  validations?: Validation[];
  /** @default "Fail" */
  failurePolicy?: FailurePolicy;
  auditAnnotations?: AuditAnnotation[];
  matchConditions?: NamedExpression[];
  variables?: NamedExpression[];
}

export interface ValidatingAdmissionPolicy {
  apiVersion: typeof VAP_API_VERSION;
  kind: typeof VAP_KIND;
  metadata: ObjectMeta;
  spec: ValidatingAdmissionPolicySpec;
  status?: Record<string, unknown>;
}

export interface ParamRef {
  name?: string;
  namespace?: string;
  selector?: LabelSelector;
  parameterNotFoundAction?: ParameterNotFoundAction;
}

export interface ValidatingAdmissionPolicyBindingSpec {
  policyName: string;
  paramRef?: ParamRef;
  matchResources?: MatchResources;
  validationActions: ValidationAction[];
}

export interface ValidatingAdmissionPolicyBinding {
  apiVersion: typeof VAP_API_VERSION;
  kind: typeof VAP_BINDING_KIND;
  metadata: ObjectMeta;
  spec: ValidatingAdmissionPolicyBindingSpec;
}

export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}

/**
 * The admission attributes a policy sees (`request` in CEL). `operation`
 * `AUDIT` stands for an existing object seen by the audit or `portal test`:
 * it matches rules that admit CREATE, and expressions see it as CREATE.
 */
export interface VapAttributes {
  operation: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT' | 'AUDIT';
  kind: { group: string; version: string; kind: string };
  resource: GroupVersionResource;
  /** "" when the request is not for a subresource. */
  subResource: string;
  /** "" for cluster-scoped objects. */
  namespace: string;
  name: string;
  /** Whether the resource is namespaced (a Namespace itself is not). */
  namespaced: boolean;
  object: KubeObject | null;
  oldObject: KubeObject | null;
  userInfo?: { username: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  dryRun?: boolean;
  options?: Record<string, unknown> | null;
}

/** A param lookup result: the objects, or the reason they cannot be had. */
export type ParamLookup = { ok: true; objects: KubeObject[] } | { ok: false; error: string };

/**
 * Where params come from: files offline (`portal test`), the store in the
 * embedded API server, informers on the cluster. `namespace` is "" for a
 * cluster-scoped paramKind. `name` undefined means "every object matching
 * `selector`" (an empty selector matches all).
 */
export interface ParamProvider {
  find(kind: ParamKind, namespace: string, ref: { name: string } | { selector: LabelSelector }): ParamLookup;
  /** Whether the paramKind names a resource this provider knows (cluster-scoped or not), or an error. */
  scope(kind: ParamKind): { ok: true; namespaced: boolean } | { ok: false; error: string };
}

/** Everything the engine needs from outside for one request. */
export interface VapContext {
  /** The namespace object of a namespaced request (null if absent or cluster-scoped). */
  namespaceObject: KubeObject | null;
  params: ParamProvider;
}
