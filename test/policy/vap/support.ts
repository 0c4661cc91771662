/** The VAP engine, and the policies, bindings and requests its tests build. */
import {
  admissionOutcome,
  type NamedRuleWithOperations,
  type ParamProvider,
  type ValidatingAdmissionPolicy,
  type ValidatingAdmissionPolicyBinding,
  type VapAttributes,
  type VapContext,
  type VapSet,
} from '../../../src/policy/vap/index.ts';

export * from '../../../src/policy/vap/index.ts';
export type KubeObjectLike = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> }; [k: string]: unknown };

export const DEPLOY_RULES: NamedRuleWithOperations[] = [{ apiGroups: ['apps'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['deployments'] }];

export function policy(name: string, spec: Partial<ValidatingAdmissionPolicy['spec']>): ValidatingAdmissionPolicy {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name },
    spec: { matchConstraints: { resourceRules: DEPLOY_RULES }, ...spec },
  };
}
export function binding(name: string, spec: Partial<ValidatingAdmissionPolicyBinding['spec']> & { policyName: string }): ValidatingAdmissionPolicyBinding {
  return { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicyBinding', metadata: { name }, spec: { validationActions: ['Deny'], ...spec } };
}
export function deployment(replicas: number, labels: Record<string, string> = {}): VapAttributes {
  const object = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'nginx', namespace: 'default', labels }, spec: { replicas } };
  return {
    operation: 'CREATE',
    kind: { group: 'apps', version: 'v1', kind: 'Deployment' },
    resource: { group: 'apps', version: 'v1', resource: 'deployments' },
    subResource: '',
    namespace: 'default',
    name: 'nginx',
    namespaced: true,
    object,
    oldObject: null,
  };
}
export const NAMESPACE = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'default', labels: { 'kubernetes.io/metadata.name': 'default', env: 'test' } } };

export function paramsFrom(objects: KubeObjectLike[], namespaced = true): ParamProvider {
  return {
    scope: (kind) => (kind.kind === 'ReplicaLimit' ? { ok: true, namespaced } : { ok: false, error: `paramKind kind \`${kind.apiVersion}, Kind=${kind.kind}\` not known` }),
    find: (_kind, namespace, ref) => ({
      ok: true,
      objects: objects.filter((o) => (o.metadata.namespace ?? '') === namespace && ('name' in ref ? o.metadata.name === ref.name : Object.entries(ref.selector.matchLabels ?? {}).every(([k, v]) => o.metadata.labels?.[k] === v))),
    }),
  };
}
export const ctx = (params: ParamProvider = paramsFrom([])): VapContext => ({ namespaceObject: NAMESPACE, params });

export function run(set: VapSet, a: VapAttributes, c: VapContext = ctx()) {
  const results = set.evaluate(a, c);
  return { results, outcome: admissionOutcome(results) };
}

