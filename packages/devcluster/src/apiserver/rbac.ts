/**
 * The RBAC authorizer of kube-apiserver over the embedded store: Roles,
 * ClusterRoles (with aggregationRule evaluated at request time),
 * RoleBindings and ClusterRoleBindings; subjects User, Group and
 * ServiceAccount; rules with verbs, apiGroups, resources (`res`,
 * `res/sub`, `*` and a star before `/sub`), resourceNames and nonResourceURLs (exact or
 * `prefix*`). The group system:masters is allowed everything, as kube's
 * privileged-group authorizer. Denials carry kube-apiserver's exact
 * Forbidden message.
 */
import { storeKey } from './registry.ts';
import { ApiError } from './status.ts';
import type { Store } from './store.ts';
import { isPlainObject, meta, type Obj, type UserInfo } from './types.ts';

export interface ResourceAttributes {
  verb: string; namespace: string; group: string; resource: string; subresource: string; name: string;
}
export interface NonResourceAttributes { verb: string; path: string }
export type Attributes = { resource: ResourceAttributes } | { nonResource: NonResourceAttributes };

export interface PolicyRule {
  verbs: string[]; apiGroups?: string[]; resources?: string[]; resourceNames?: string[]; nonResourceURLs?: string[];
}

const MASTERS = 'system:masters';
const SK = {
  roles: storeKey({ group: 'rbac.authorization.k8s.io', resource: 'roles' }),
  clusterRoles: storeKey({ group: 'rbac.authorization.k8s.io', resource: 'clusterroles' }),
  roleBindings: storeKey({ group: 'rbac.authorization.k8s.io', resource: 'rolebindings' }),
  clusterRoleBindings: storeKey({ group: 'rbac.authorization.k8s.io', resource: 'clusterrolebindings' }),
};

const strs = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

function rulesOf(o: Obj | undefined): PolicyRule[] {
  if (!o || !Array.isArray(o['rules'])) return [];
  return (o['rules'] as unknown[]).filter(isPlainObject).map((r) => {
    const rule: PolicyRule = { verbs: strs(r['verbs']) };
    if (r['apiGroups'] !== undefined) rule.apiGroups = strs(r['apiGroups']);
    if (r['resources'] !== undefined) rule.resources = strs(r['resources']);
    if (r['resourceNames'] !== undefined) rule.resourceNames = strs(r['resourceNames']);
    if (r['nonResourceURLs'] !== undefined) rule.nonResourceURLs = strs(r['nonResourceURLs']);
    return rule;
  });
}

function labelsMatch(sel: unknown, labels: Record<string, string> | undefined): boolean {
  if (!isPlainObject(sel)) return false;
  const ml = isPlainObject(sel['matchLabels']) ? sel['matchLabels'] : {};
  const l = labels ?? {};
  if (!Object.entries(ml).every(([k, v]) => l[k] === v)) return false;
  for (const e of Array.isArray(sel['matchExpressions']) ? (sel['matchExpressions'] as Obj[]) : []) {
    const key = String(e['key']);
    const values = strs(e['values']);
    const has = Object.hasOwn(l, key);
    switch (e['operator']) {
      case 'In': if (!has || !values.includes(l[key]!)) return false; break;
      case 'NotIn': if (has && values.includes(l[key]!)) return false; break;
      case 'Exists': if (!has) return false; break;
      case 'DoesNotExist': if (has) return false; break;
      default: return false;
    }
  }
  return Object.keys(ml).length > 0 || Array.isArray(sel['matchExpressions']);
}

export function ruleAllows(rule: PolicyRule, a: Attributes): boolean {
  const verbOk = rule.verbs.includes('*') || rule.verbs.includes('resource' in a ? a.resource.verb : a.nonResource.verb);
  if (!verbOk) return false;
  if ('nonResource' in a) {
    return (rule.nonResourceURLs ?? []).some((u) => u === '*' || u === a.nonResource.path || (u.endsWith('*') && a.nonResource.path.startsWith(u.slice(0, -1))));
  }
  const r = a.resource;
  const groups = rule.apiGroups ?? [];
  if (!groups.includes('*') && !groups.includes(r.group)) return false;
  const combined = r.subresource ? `${r.resource}/${r.subresource}` : r.resource;
  const resources = rule.resources ?? [];
  const resOk = resources.some((x) => x === '*' || x === combined || (r.subresource !== '' && x === `*/${r.subresource}`));
  if (!resOk) return false;
  const names = rule.resourceNames ?? [];
  return names.length === 0 || (r.name !== '' && names.includes(r.name));
}

function subjectMatches(subject: Obj, user: UserInfo, bindingNs: string): boolean {
  const kind = subject['kind'];
  const name = String(subject['name'] ?? '');
  if (kind === 'User') return user.username === name;
  if (kind === 'Group') return user.groups.includes(name);
  if (kind === 'ServiceAccount') {
    const ns = typeof subject['namespace'] === 'string' && subject['namespace'] ? subject['namespace'] : bindingNs;
    return user.username === `system:serviceaccount:${ns}:${name}`;
  }
  return false;
}

export class RbacAuthorizer {
  constructor(private readonly store: Store) {}

  private clusterRoleRules(name: string, seen = new Set<string>()): PolicyRule[] {
    if (seen.has(name)) return [];
    seen.add(name);
    const cr = this.store.get(SK.clusterRoles, `/${name}`);
    if (!cr) return [];
    const agg = cr['aggregationRule'];
    if (!isPlainObject(agg) || !Array.isArray(agg['clusterRoleSelectors'])) return rulesOf(cr);
    // Aggregated: the union of every ClusterRole one of the selectors matches (the aggregation controller's result, computed on read).
    const out = rulesOf(cr);
    for (const other of this.store.list(SK.clusterRoles)) {
      const om = meta(other);
      if (om.name === name) continue;
      if ((agg['clusterRoleSelectors'] as unknown[]).some((s) => labelsMatch(s, om.labels))) out.push(...this.clusterRoleRules(om.name ?? '', seen));
    }
    return out;
  }

  private roleRefRules(ref: unknown, namespace: string): PolicyRule[] {
    if (!isPlainObject(ref)) return [];
    const name = String(ref['name'] ?? '');
    if (ref['kind'] === 'ClusterRole') return this.clusterRoleRules(name);
    if (ref['kind'] === 'Role') return rulesOf(this.store.get(SK.roles, `${namespace}/${name}`));
    return [];
  }

  /** Every rule that applies to `user` in `namespace` ('' = cluster-wide rules only). */
  rulesFor(user: UserInfo, namespace: string): PolicyRule[] {
    const out: PolicyRule[] = [];
    for (const b of this.store.list(SK.clusterRoleBindings)) {
      const subjects = Array.isArray(b['subjects']) ? (b['subjects'] as unknown[]).filter(isPlainObject) : [];
      if (subjects.some((s) => subjectMatches(s, user, ''))) out.push(...this.roleRefRules(b['roleRef'], ''));
    }
    if (namespace) {
      for (const b of this.store.list(SK.roleBindings, namespace)) {
        const subjects = Array.isArray(b['subjects']) ? (b['subjects'] as unknown[]).filter(isPlainObject) : [];
        if (subjects.some((s) => subjectMatches(s, user, namespace))) out.push(...this.roleRefRules(b['roleRef'], namespace));
      }
    }
    return out;
  }

  allowed(user: UserInfo, a: Attributes): boolean {
    if (user.groups.includes(MASTERS)) return true;
    const ns = 'resource' in a ? a.resource.namespace : '';
    return this.rulesFor(user, ns).some((r) => ruleAllows(r, a));
  }

  /** Throws kube-apiserver's 403 when `user` may not do `a`. */
  check(user: UserInfo, a: Attributes): void {
    if (!this.allowed(user, a)) throw forbidden(user, a);
  }
}

/** The Forbidden error exactly as kube-apiserver writes it (responsewriters.ForbiddenStatusError). */
export function forbidden(user: UserInfo, a: Attributes): ApiError {
  if ('nonResource' in a) {
    return new ApiError(403, 'Forbidden', `forbidden: User "${user.username}" cannot ${a.nonResource.verb} path "${a.nonResource.path}"`, {});
  }
  const r = a.resource;
  const res = r.subresource ? `${r.resource}/${r.subresource}` : r.resource;
  const where = r.namespace ? `in the namespace "${r.namespace}"` : 'at the cluster scope';
  const reason = `User "${user.username}" cannot ${r.verb} resource "${res}" in API group "${r.group}" ${where}`;
  const qualified = r.group ? `${r.resource}.${r.group}` : r.resource;
  const subject = r.name ? `${qualified} "${r.name}"` : qualified;
  const details = { ...(r.name ? { name: r.name } : {}), ...(r.group ? { group: r.group } : {}), kind: r.resource };
  return new ApiError(403, 'Forbidden', `${subject} is forbidden: ${reason}`, details);
}
