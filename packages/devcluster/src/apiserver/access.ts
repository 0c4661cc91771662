/**
 * Who a request is and what it may do, after bearer-token authentication:
 * impersonation (Impersonate-User / -Group / -Uid / -Extra-*, each checked
 * against the `impersonate` verb as kube's impersonation filter does), RBAC
 * authorization of every resource request (rbac.ts; `AlwaysAllow` keeps the
 * old behaviour for tests of the bare REST semantics), and the review APIs
 * kubectl uses: SelfSubjectAccessReview and SubjectAccessReview (`auth
 * can-i`), SelfSubjectRulesReview (`auth can-i --list`); SelfSubjectReview
 * (`auth whoami`) is whoami.ts. Reviews are answered, never stored.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Reply, RequestScope } from './cluster.ts';
import { forbidden, RbacAuthorizer, type Attributes, type PolicyRule } from './rbac.ts';
import { errors } from './status.ts';
import type { Store } from './store.ts';
import { isPlainObject, type Obj, type UserInfo } from './types.ts';

export type AuthorizationMode = 'RBAC' | 'AlwaysAllow';

const REVIEW_GROUPS = new Set(['authorization.k8s.io']);
const SA_PREFIX = 'system:serviceaccount:';

function header(h: IncomingHttpHeaders, name: string): string[] {
  const v = h[name];
  if (v === undefined) return [];
  return (Array.isArray(v) ? v : [v]).flatMap((x) => x.split(',')).map((x) => x.trim()).filter(Boolean);
}

export class Access {
  readonly rbac: RbacAuthorizer;

  constructor(store: Store, readonly mode: AuthorizationMode) {
    this.rbac = new RbacAuthorizer(store);
  }

  allowed(user: UserInfo, a: Attributes): boolean {
    return this.mode === 'AlwaysAllow' || this.rbac.allowed(user, a);
  }

  private check(user: UserInfo, a: Attributes): void {
    if (!this.allowed(user, a)) throw forbidden(user, a);
  }

  /** The user a request acts as: the authenticated one, or whom it impersonates (after the checks). */
  identify(headers: IncomingHttpHeaders, user: UserInfo): UserInfo {
    const [as, ...more] = header(headers, 'impersonate-user');
    const groups = header(headers, 'impersonate-group');
    const uid = header(headers, 'impersonate-uid')[0];
    const extraKeys = Object.keys(headers).filter((k) => k.startsWith('impersonate-extra-'));
    if (as === undefined) {
      if (groups.length || uid !== undefined || extraKeys.length) {
        throw errors.badRequest('requested impersonation of groups, uid or extra without impersonating a user');
      }
      return user;
    }
    if (more.length) throw errors.badRequest('only one Impersonate-User header may be given');
    const imp = (resource: string, name: string, namespace = '', group = ''): void =>
      this.check(user, { resource: { verb: 'impersonate', namespace, group, resource, subresource: '', name } });
    let outGroups = [...groups];
    if (as.startsWith(SA_PREFIX)) {
      const [ns, name] = as.slice(SA_PREFIX.length).split(':') as [string, string | undefined];
      if (!ns || !name) throw errors.badRequest(`invalid service account username: ${JSON.stringify(as)}`);
      imp('serviceaccounts', name, ns);
      outGroups.push('system:serviceaccounts', `system:serviceaccounts:${ns}`);
    } else imp('users', as);
    for (const g of groups) imp('groups', g);
    if (uid !== undefined) imp('uids', uid, '', 'authentication.k8s.io');
    for (const k of extraKeys) {
      const key = decodeURIComponent(k.slice('impersonate-extra-'.length));
      for (const v of header(headers, k)) imp(`userextras/${key}`, v, '', 'authentication.k8s.io');
    }
    if (as !== 'system:anonymous' && !outGroups.includes('system:authenticated')) outGroups.push('system:authenticated');
    outGroups = [...new Set(outGroups)];
    return { username: as, uid: uid ?? '', groups: outGroups };
  }

  /** 403 unless `user` may do `verb` on the request's resource. */
  authorize(user: UserInfo, verb: string, s: RequestScope): void {
    if (this.mode === 'AlwaysAllow') return;
    // Reviews of oneself are for everyone (system:basic-user); the rest of the review APIs are checked like any resource.
    // A list or watch with an exact metadata.name field selector is authorized as that name (kube-apiserver's
    // RequestInfo), so a rule with resourceNames can grant watching one object.
    const name = s.name || (verb === 'list' || verb === 'watch' ? exactNameSelector(s.query.get('fieldSelector')) : '');
    this.check(user, { resource: { verb, namespace: s.def.namespaced ? s.namespace : '', group: s.def.group, resource: s.def.resource, subresource: s.subresource, name } });
  }

  isReview(s: RequestScope): boolean {
    return REVIEW_GROUPS.has(s.def.group);
  }

  /** Answers a review create; `body` is the review object. */
  review(user: UserInfo, verb: string, s: RequestScope, body: unknown): Reply {
    if (verb !== 'create' || s.name) throw errors.methodNotAllowed();
    const obj: Obj = isPlainObject(body) ? body : {};
    const spec = isPlainObject(obj['spec']) ? obj['spec'] : {};
    const out = (status: Obj, specOut: Obj = spec): Reply => ({
      code: 201,
      body: { kind: s.def.kind, apiVersion: `${s.def.group}/${s.def.version}`, metadata: { creationTimestamp: null }, spec: specOut, status },
    });
    switch (s.def.resource) {
      case 'selfsubjectaccessreviews':
        return out(this.access(user, spec));
      case 'subjectaccessreviews': {
        const subject: UserInfo = {
          username: typeof spec['user'] === 'string' ? spec['user'] : '',
          uid: typeof spec['uid'] === 'string' ? spec['uid'] : '',
          groups: Array.isArray(spec['groups']) ? spec['groups'].map(String) : [],
        };
        if (!subject.username && subject.groups.length === 0) {
          throw errors.invalid('SubjectAccessReview', 'authorization.k8s.io', '', [{ reason: 'FieldValueRequired', field: 'spec.user', message: 'Invalid value: "": at least one of user or group must be specified' }]);
        }
        return out(this.access(subject, spec));
      }
      case 'selfsubjectrulesreviews': {
        const ns = typeof spec['namespace'] === 'string' ? spec['namespace'] : '';
        return out(this.rules(user, ns));
      }
      default:
        throw errors.notFound(s.def.resource, s.def.group, s.name);
    }
  }

  private access(user: UserInfo, spec: Obj): Obj {
    let a: Attributes;
    if (isPlainObject(spec['resourceAttributes'])) {
      const r = spec['resourceAttributes'];
      const str = (k: string): string => (typeof r[k] === 'string' ? r[k] : '');
      a = { resource: { verb: str('verb'), namespace: str('namespace'), group: str('group'), resource: str('resource'), subresource: str('subresource'), name: str('name') } };
    } else if (isPlainObject(spec['nonResourceAttributes'])) {
      const r = spec['nonResourceAttributes'];
      a = { nonResource: { verb: String(r['verb'] ?? ''), path: String(r['path'] ?? '') } };
    } else {
      throw errors.invalid('SelfSubjectAccessReview', 'authorization.k8s.io', '', [{ reason: 'FieldValueRequired', field: 'spec.resourceAttributes', message: 'Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified' }]);
    }
    return this.allowed(user, a) ? { allowed: true } : { allowed: false };
  }

  private rules(user: UserInfo, namespace: string): Obj {
    let rules: PolicyRule[];
    if (this.mode === 'AlwaysAllow' || user.groups.includes('system:masters')) {
      rules = [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'] }, { verbs: ['*'], nonResourceURLs: ['*'] }];
    } else rules = this.rbac.rulesFor(user, namespace);
    const resourceRules = rules.filter((r) => r.resources !== undefined && r.resources.length > 0)
      .map((r) => ({ verbs: r.verbs, apiGroups: r.apiGroups ?? [], resources: r.resources, ...(r.resourceNames?.length ? { resourceNames: r.resourceNames } : {}) }));
    const nonResourceRules = rules.filter((r) => r.nonResourceURLs !== undefined && r.nonResourceURLs.length > 0)
      .map((r) => ({ verbs: r.verbs, nonResourceURLs: r.nonResourceURLs }));
    return { resourceRules, nonResourceRules, incomplete: false };
  }
}

/** `X` of a field selector that is exactly `metadata.name=X` (or `==X`), else ''. */
function exactNameSelector(selector: string | null): string {
  const m = /^metadata\.name==?([^,=!]+)$/.exec(selector?.trim() ?? '');
  return m?.[1] ?? '';
}
