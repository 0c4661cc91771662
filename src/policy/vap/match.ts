/**
 * Which requests a policy (matchConstraints) and a binding (matchResources)
 * select: a port of kube-apiserver's `admission/plugin/policy/matching`
 * (`Matcher.Matches`, `matchesResourceRules`) and of the webhook
 * `rules.Matcher`, namespace and object matchers it reuses.
 *
 * Order, as upstream: namespaceSelector, objectSelector, excludeResourceRules,
 * resourceRules (with resourceNames), then matchPolicy Equivalent retries the
 * rules on the equivalent resources. A selector that cannot be evaluated (the
 * request's namespace is unknown) is an error, which the caller handles with
 * the policy's failurePolicy ("failed to configure policy: ...").
 */
import { isEmptySelector, selectorMatches } from '../label-selector.ts';
import type { KubeObject } from '../types.ts';
import type { GroupVersionResource, MatchResources, NamedRuleWithOperations, VapAttributes } from './types.ts';

export type MatchResult = { matches: true; resource: GroupVersionResource; kind: VapAttributes['kind'] } | { matches: false; error?: string };

/**
 * Other group/version/resources that serve the same objects (kube's
 * EquivalentResourceMapper, for matchPolicy Equivalent). The default knows the
 * built-in resources that kube ≥ 1.30 serves at more than one version.
 */
export type EquivalentResources = (resource: GroupVersionResource) => GroupVersionResource[];

const MULTI_VERSION: Record<string, string[]> = {
  'autoscaling/horizontalpodautoscalers': ['v2', 'v1'],
};

export const defaultEquivalents: EquivalentResources = (r) => {
  const versions = MULTI_VERSION[`${r.group}/${r.resource}`];
  return versions ? versions.map((version) => ({ group: r.group, version, resource: r.resource })) : [r];
};

export function isNamespaceRequest(a: Pick<VapAttributes, 'resource' | 'subResource'>): boolean {
  return a.resource.group === '' && a.resource.resource === 'namespaces';
}

function labelsOf(o: KubeObject | null): Record<string, string> {
  const labels = o?.metadata?.labels;
  return labels && typeof labels === 'object' ? labels : {};
}

function anyOrExact(list: readonly string[] | undefined, value: string): boolean {
  return (list ?? []).some((x) => x === '*' || x === value);
}

/** `*` and `res` never match a subresource; `res/*`, `*\/sub`, `*\/*` do. */
function matchesResource(list: readonly string[] | undefined, resource: string, subResource: string): boolean {
  for (const entry of list ?? []) {
    const slash = entry.indexOf('/');
    const res = slash < 0 ? entry : entry.slice(0, slash);
    const sub = slash < 0 ? '' : entry.slice(slash + 1);
    if ((res === '*' || res === resource) && (sub === '*' || sub === subResource)) return true;
  }
  return false;
}

function matchesScope(scope: NamedRuleWithOperations['scope'], a: VapAttributes): boolean {
  if (scope === undefined || scope === '*') return true;
  const clusterScoped = isNamespaceRequest(a) || a.namespace === '';
  return scope === 'Cluster' ? clusterScoped : !clusterScoped;
}

/**
 * `AUDIT` (an existing object seen by `portal test` or the audit) matches the
 * rules that admit its creation: an object that exists was created.
 */
function matchesOperation(ops: readonly string[] | undefined, op: VapAttributes['operation']): boolean {
  return anyOrExact(ops, op === 'AUDIT' ? 'CREATE' : op);
}

/** kube's `rules.Matcher.Matches` for one rule and one group/version/resource. */
export function ruleMatches(rule: NamedRuleWithOperations, a: VapAttributes, resource: GroupVersionResource = a.resource): boolean {
  return (
    matchesScope(rule.scope, a) &&
    matchesOperation(rule.operations, a.operation) &&
    anyOrExact(rule.apiGroups, resource.group) &&
    anyOrExact(rule.apiVersions, resource.version) &&
    matchesResource(rule.resources, resource.resource, a.subResource)
  );
}

function sameResource(x: GroupVersionResource, y: GroupVersionResource): boolean {
  return x.group === y.group && x.version === y.version && x.resource === y.resource;
}

function matchesRules(
  rules: readonly NamedRuleWithOperations[],
  equivalentPolicy: boolean,
  a: VapAttributes,
  equivalents: EquivalentResources,
): { resource: GroupVersionResource } | undefined {
  if (rules.length === 0) return undefined;
  for (const rule of rules) {
    if (!ruleMatches(rule, a)) continue;
    const names = rule.resourceNames ?? [];
    // A create relying on generateName has no name yet and matches no resourceNames (as upstream).
    if (names.length === 0 || names.includes(a.name)) return { resource: a.resource };
  }
  if (!equivalentPolicy) return undefined;
  const alternatives = equivalents(a.resource);
  if (alternatives.length === 1 && sameResource(alternatives[0] as GroupVersionResource, a.resource)) return undefined;
  for (const rule of rules) {
    for (const eq of alternatives) {
      if (sameResource(eq, a.resource)) continue;
      // Upstream does not check resourceNames on the equivalent retry either.
      if (ruleMatches(rule, a, eq)) return { resource: eq };
    }
  }
  return undefined;
}

/**
 * The namespace labels a namespaceSelector is judged on: the object's own for
 * a Namespace (oldObject's on DELETE), the namespace's for namespaced
 * requests; `null` when the selector does not apply (cluster-scoped objects
 * always match). `undefined` when the namespace is unknown.
 */
function namespaceSelectorMatches(
  m: MatchResources,
  a: VapAttributes,
  namespaceObject: KubeObject | null,
): { ok: true; match: boolean } | { ok: false; error: string } {
  if (a.namespace === '' && !isNamespaceRequest(a)) return { ok: true, match: true };
  if (isEmptySelector(m.namespaceSelector)) return { ok: true, match: true };
  const selector = m.namespaceSelector ?? {};
  if (isNamespaceRequest(a)) return { ok: true, match: selectorMatches(selector, labelsOf(a.object ?? a.oldObject)) };
  if (namespaceObject === null) return { ok: false, error: `namespaces "${a.namespace}" not found` };
  return { ok: true, match: selectorMatches(selector, labelsOf(namespaceObject)) };
}

function objectSelectorMatches(m: MatchResources, a: VapAttributes): boolean {
  if (isEmptySelector(m.objectSelector)) return true;
  const selector = m.objectSelector ?? {};
  return (a.object !== null && selectorMatches(selector, labelsOf(a.object))) || (a.oldObject !== null && selectorMatches(selector, labelsOf(a.oldObject)));
}

/**
 * `Matcher.Matches`: whether `m` selects the request. An empty resourceRules
 * list matches every resource (used for bindings; a policy's
 * matchConstraints always has rules).
 */
export function matchResources(
  m: MatchResources,
  a: VapAttributes,
  namespaceObject: KubeObject | null,
  equivalents: EquivalentResources = defaultEquivalents,
): MatchResult {
  const ns = namespaceSelectorMatches(m, a, namespaceObject);
  if (ns.ok && !ns.match) return { matches: false };
  if (!objectSelectorMatches(m, a)) return { matches: false };
  const equivalent = (m.matchPolicy ?? 'Equivalent') === 'Equivalent';
  if (matchesRules(m.excludeResourceRules ?? [], equivalent, a, equivalents)) return { matches: false };
  let resource = a.resource;
  if ((m.resourceRules ?? []).length > 0) {
    const hit = matchesRules(m.resourceRules ?? [], equivalent, a, equivalents);
    if (!hit) return { matches: false };
    resource = hit.resource;
  }
  if (!ns.ok) return { matches: false, error: ns.error };
  return { matches: true, resource, kind: a.kind };
}
