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
import type { LabelSelector } from '../types.ts';
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

/** A list of names where `*` matches anything: undefined for "any". */
type NameSet = ReadonlySet<string> | undefined;

function nameSet(list: readonly string[] | undefined): NameSet {
  return (list ?? []).includes('*') ? undefined : new Set(list ?? []);
}

const NOTHING: ReadonlySet<string> = new Set();

/** A NamedRuleWithOperations with its lists as sets, built once per policy generation. */
interface CompiledRule {
  scope: NamedRuleWithOperations['scope'];
  operations: NameSet;
  groups: NameSet;
  versions: NameSet;
  /** `res` / `res/sub` entries split once; `*` for either part is a wildcard. */
  resources: readonly { res: string; sub: string }[];
  names: ReadonlySet<string>;
}

function compileRule(rule: NamedRuleWithOperations): CompiledRule {
  return {
    scope: rule.scope,
    operations: nameSet(rule.operations),
    groups: nameSet(rule.apiGroups),
    versions: nameSet(rule.apiVersions),
    resources: (rule.resources ?? []).map((entry) => {
      const slash = entry.indexOf('/');
      return slash < 0 ? { res: entry, sub: '' } : { res: entry.slice(0, slash), sub: entry.slice(slash + 1) };
    }),
    names: rule.resourceNames && rule.resourceNames.length > 0 ? new Set(rule.resourceNames) : NOTHING,
  };
}

function inSet(set: NameSet, value: string): boolean {
  return set === undefined || set.has(value);
}

/** `*` and `res` never match a subresource; `res/*`, `*\/sub`, `*\/*` do. */
function matchesResource(list: CompiledRule['resources'], resource: string, subResource: string): boolean {
  for (const { res, sub } of list) {
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
 * kube's `rules.Matcher.Matches` for one rule and one group/version/resource.
 * `AUDIT` (an existing object seen by `portal test` or the audit) matches the
 * rules that admit its creation: an object that exists was created.
 */
function compiledRuleMatches(rule: CompiledRule, a: VapAttributes, resource: GroupVersionResource): boolean {
  return (
    matchesScope(rule.scope, a) &&
    inSet(rule.operations, a.operation === 'AUDIT' ? 'CREATE' : a.operation) &&
    inSet(rule.groups, resource.group) &&
    inSet(rule.versions, resource.version) &&
    matchesResource(rule.resources, resource.resource, a.subResource)
  );
}

/** kube's `rules.Matcher.Matches` for one rule and one group/version/resource. */
export function ruleMatches(rule: NamedRuleWithOperations, a: VapAttributes, resource: GroupVersionResource = a.resource): boolean {
  return compiledRuleMatches(compileRule(rule), a, resource);
}

function sameResource(x: GroupVersionResource, y: GroupVersionResource): boolean {
  return x.group === y.group && x.version === y.version && x.resource === y.resource;
}

function matchesRules(
  rules: readonly CompiledRule[],
  equivalentPolicy: boolean,
  a: VapAttributes,
  equivalents: EquivalentResources,
): GroupVersionResource | undefined {
  if (rules.length === 0) return undefined;
  for (const rule of rules) {
    if (!compiledRuleMatches(rule, a, a.resource)) continue;
    // A create relying on generateName has no name yet and matches no resourceNames (as upstream).
    if (rule.names === NOTHING || rule.names.has(a.name)) return a.resource;
  }
  if (!equivalentPolicy) return undefined;
  const alternatives = equivalents(a.resource);
  if (alternatives.length === 1 && sameResource(alternatives[0] as GroupVersionResource, a.resource)) return undefined;
  for (const rule of rules) {
    for (const eq of alternatives) {
      if (sameResource(eq, a.resource)) continue;
      // Upstream does not check resourceNames on the equivalent retry either.
      if (compiledRuleMatches(rule, a, eq)) return eq;
    }
  }
  return undefined;
}

/**
 * Whether the namespaceSelector selects the request: the object's own labels
 * for a Namespace (oldObject's on DELETE), the namespace's for namespaced
 * requests; cluster-scoped objects always match. An error when the
 * namespace is unknown.
 */
function namespaceSelectorMatches(
  selector: LabelSelector | undefined,
  a: VapAttributes,
  namespaceObject: KubeObject | null,
): { ok: true; match: boolean } | { ok: false; error: string } {
  if (selector === undefined) return MATCH;
  if (a.namespace === '' && !isNamespaceRequest(a)) return MATCH;
  if (isNamespaceRequest(a)) return selectorMatches(selector, labelsOf(a.object ?? a.oldObject)) ? MATCH : NO_MATCH;
  if (namespaceObject === null) return { ok: false, error: `namespaces "${a.namespace}" not found` };
  return selectorMatches(selector, labelsOf(namespaceObject)) ? MATCH : NO_MATCH;
}

const MATCH = Object.freeze({ ok: true as const, match: true });
const NO_MATCH = Object.freeze({ ok: true as const, match: false });
const NOT_SELECTED: MatchResult = Object.freeze({ matches: false as const });

function objectSelectorMatches(selector: LabelSelector | undefined, a: VapAttributes): boolean {
  if (selector === undefined) return true;
  return (a.object !== null && selectorMatches(selector, labelsOf(a.object))) || (a.oldObject !== null && selectorMatches(selector, labelsOf(a.oldObject)));
}

/** `Matcher.Matches` for one MatchResources, its lists compiled once (per policy or binding generation). */
export type CompiledMatch = (a: VapAttributes, namespaceObject: KubeObject | null, equivalents?: EquivalentResources) => MatchResult;

/**
 * `Matcher.Matches`, compiled: whether `m` selects the request. An empty
 * resourceRules list matches every resource (used for bindings; a policy's
 * matchConstraints always has rules).
 */
export function compileMatch(m: MatchResources): CompiledMatch {
  const nsSelector = isEmptySelector(m.namespaceSelector) ? undefined : (m.namespaceSelector ?? {});
  const objSelector = isEmptySelector(m.objectSelector) ? undefined : (m.objectSelector ?? {});
  const equivalent = (m.matchPolicy ?? 'Equivalent') === 'Equivalent';
  const exclude = (m.excludeResourceRules ?? []).map(compileRule);
  const include = (m.resourceRules ?? []).map(compileRule);
  return (a, namespaceObject, equivalents = defaultEquivalents) => {
    const ns = namespaceSelectorMatches(nsSelector, a, namespaceObject);
    if (ns.ok && !ns.match) return NOT_SELECTED;
    if (!objectSelectorMatches(objSelector, a)) return NOT_SELECTED;
    if (matchesRules(exclude, equivalent, a, equivalents)) return NOT_SELECTED;
    let resource = a.resource;
    if (include.length > 0) {
      const hit = matchesRules(include, equivalent, a, equivalents);
      if (!hit) return NOT_SELECTED;
      resource = hit;
    }
    if (!ns.ok) return { matches: false, error: ns.error };
    return { matches: true, resource, kind: a.kind };
  };
}

/** `Matcher.Matches` for a MatchResources used once (the evaluator compiles its own with compileMatch). */
export function matchResources(
  m: MatchResources,
  a: VapAttributes,
  namespaceObject: KubeObject | null,
  equivalents: EquivalentResources = defaultEquivalents,
): MatchResult {
  return compileMatch(m)(a, namespaceObject, equivalents);
}
