/**
 * A small RBAC evaluator for the chart's rendered Role/ClusterRole: the same
 * matching rules as the Kubernetes RBAC authorizer for resource requests
 * (group, resource or resource/subresource, verb, resourceNames), without
 * wildcards (the chart has none and the tests assert it).
 */
import type { Manifest } from './helm.ts';

export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

export interface ResourceRequest {
  verb: string;
  group: string;
  /** `resource` or `resource/subresource`. */
  resource: string;
  /** Empty for collection requests (list, watch, create). */
  name: string;
}

export const rulesOf = (m: Manifest): PolicyRule[] => m['rules'] as PolicyRule[];

export function allows(rules: readonly PolicyRule[], req: ResourceRequest): boolean {
  return rules.some(
    (r) =>
      r.apiGroups.includes(req.group) &&
      r.resources.includes(req.resource) &&
      r.verbs.includes(req.verb) &&
      // A rule with resourceNames only matches requests that carry one of those names.
      (r.resourceNames === undefined || r.resourceNames.length === 0 || r.resourceNames.includes(req.name)),
  );
}

/** Every verb granted on `group/resource` for a request naming `name` (sorted). */
export function verbsFor(rules: readonly PolicyRule[], group: string, resource: string, name = ''): string[] {
  const verbs = new Set<string>();
  for (const r of rules) {
    if (!r.apiGroups.includes(group) || !r.resources.includes(resource)) continue;
    if (r.resourceNames !== undefined && r.resourceNames.length > 0 && !r.resourceNames.includes(name)) continue;
    for (const v of r.verbs) verbs.add(v);
  }
  return [...verbs].sort();
}
