/**
 * Workloads whose pod template a Pod rule also checks (docs/design.md §2), and the
 * Pod that stands in for a template during validation.
 */
import { isObject } from '../util/is-object.ts';
import type { KindMatch, KubeObject } from './types.ts';

/** The rule or exception names core Pods explicitly (its pod-template checks apply). */
export function namesPod(kinds: readonly KindMatch[]): boolean {
  return kinds.some((k) => (k.apiGroups.includes('') || k.apiGroups.includes('*')) && k.kinds.includes('Pod'));
}

export interface PodTemplateKind {
  group: string;
  kind: string;
  /** Where the PodTemplateSpec lives in the workload. */
  path: readonly string[];
}

export const POD_TEMPLATE_KINDS: readonly PodTemplateKind[] = Object.freeze([
  { group: 'apps', kind: 'Deployment', path: ['spec', 'template'] },
  { group: 'apps', kind: 'StatefulSet', path: ['spec', 'template'] },
  { group: 'apps', kind: 'DaemonSet', path: ['spec', 'template'] },
  { group: 'apps', kind: 'ReplicaSet', path: ['spec', 'template'] },
  { group: '', kind: 'ReplicationController', path: ['spec', 'template'] },
  { group: 'batch', kind: 'Job', path: ['spec', 'template'] },
  { group: 'batch', kind: 'CronJob', path: ['spec', 'jobTemplate', 'spec', 'template'] },
]);

const byKind: ReadonlyMap<string, (typeof POD_TEMPLATE_KINDS)[number]> = new Map(POD_TEMPLATE_KINDS.map((k) => [`${k.group}/${k.kind}`, k]));

export function podTemplateKind(group: string, kind: string): PodTemplateKind | undefined {
  return byKind.get(`${group}/${kind}`);
}

/**
 * The Pod a rule's schema sees for a workload: the template's metadata and
 * spec under a Pod's apiVersion/kind. Missing parts become `{}`, so a schema
 * that requires a field still reports it.
 */
export function templatePod(workload: KubeObject, path: readonly string[]): KubeObject {
  let node: unknown = workload;
  for (const segment of path) node = isObject(node) ? node[segment] : undefined;
  const template = isObject(node) ? node : {};
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: isObject(template['metadata']) ? template['metadata'] : {},
    spec: isObject(template['spec']) ? template['spec'] : {},
  };
}
