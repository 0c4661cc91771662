/** Small builders for the engine tests: inline rules and evaluation inputs. */
import type { EvaluationInput, KubeObject, PortalExceptionObject, PortalRuleObject, RuleSpec } from '../../src/policy/index.ts';

type SpecOverrides = Partial<Omit<RuleSpec, 'match'>> & { match?: Partial<RuleSpec['match']> };

export const NO_PRIVILEGED_SCHEMA = {
  type: 'object',
  properties: {
    spec: {
      type: 'object',
      properties: {
        containers: {
          type: 'array',
          items: { type: 'object', properties: { securityContext: { type: 'object', properties: { privileged: { const: false } } } } },
        },
      },
    },
  },
};

export function clusterRule(name: string, spec: SpecOverrides = {}, generation = 1): PortalRuleObject {
  const { match, validate, ...rest } = spec;
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalClusterRule',
    metadata: { name, generation },
    spec: {
      ...rest,
      match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], ...match },
      validate: validate ?? { message: 'Privileged containers are not allowed.', schema: NO_PRIVILEGED_SCHEMA },
    },
  };
}

export function namespacedRule(namespace: string, name: string, spec: SpecOverrides = {}): PortalRuleObject {
  return { ...clusterRule(name, spec), kind: 'PortalRule', metadata: { name, namespace, generation: 1 } };
}

export function pod(opts: { name?: string; namespace?: string; privileged?: boolean; labels?: Record<string, string> } = {}): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: opts.name ?? 'web', namespace: opts.namespace ?? 'default', ...(opts.labels ? { labels: opts.labels } : {}) },
    spec: { containers: [{ name: 'app', image: 'nginx:1.27', securityContext: { privileged: opts.privileged ?? false } }] },
  };
}

const GROUPS: Record<string, string> = {
  Pod: '',
  Namespace: '',
  ReplicationController: '',
  ConfigMap: '',
  Deployment: 'apps',
  StatefulSet: 'apps',
  DaemonSet: 'apps',
  ReplicaSet: 'apps',
  Job: 'batch',
  CronJob: 'batch',
};

export function input(object: KubeObject | null, overrides: Partial<EvaluationInput> = {}): EvaluationInput {
  const kind = (object?.kind as string | undefined) ?? 'Pod';
  return {
    operation: 'CREATE',
    kind: { group: GROUPS[kind] ?? '', version: 'v1', kind },
    subResource: '',
    namespace: (object?.metadata?.namespace as string | undefined) ?? '',
    name: (object?.metadata?.name as string | undefined) ?? '',
    object,
    oldObject: null,
    namespaceLabels: {},
    ...overrides,
  };
}

/** A PortalException exempting Pods from `no-priv` (override anything). */
export function exception(namespace: string, name: string, spec: Partial<PortalExceptionObject['spec']> = {}, meta: Record<string, unknown> = {}): PortalExceptionObject {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalException',
    metadata: { name, namespace, generation: 1, ...meta },
    spec: { rules: ['no-priv'], match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, reason: 'node agent; ticket OPS-123', ...spec },
  };
}

