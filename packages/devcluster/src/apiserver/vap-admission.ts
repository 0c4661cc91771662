/**
 * The embedded API server's ValidatingAdmissionPolicy plugin, as in
 * kube-apiserver: it runs for every write (before the validating webhooks),
 * with the policies and bindings in the store, params read from the store,
 * and the namespace object of the request. Policy resources themselves (and
 * webhook configurations) are never subject to policies, so a broken policy
 * can always be fixed.
 *
 * A denial is the API server's error: `<resource> "<name>" is forbidden:
 * ValidatingAdmissionPolicy 'P' with binding 'B' denied request: MSG`, with
 * the validation's reason and its code (Invalid 422 by default, Forbidden
 * 403, Unauthorized 401, RequestEntityTooLarge 413) and the message as the
 * one cause. Warn bindings add warnings; audit annotations are returned for
 * the audit log.
 */
import { selectorMatches, admissionOutcome, VapSet, type ParamProvider, type ValidatingAdmissionPolicy, type ValidatingAdmissionPolicyBinding, type VapAttributes, type KubeObject } from 'portal/dev-api';
import type { AdmissionAttributes } from './admission-hook.ts';
import { storeKey, type Registry } from './registry.ts';
import { ApiError, qualified, type StatusDetails } from './status.ts';
import { objKey, type Store } from './store.ts';
import { clone, meta, type Obj } from './types.ts';

const GROUP = 'admissionregistration.k8s.io';
const POLICY_SK = storeKey({ group: GROUP, resource: 'validatingadmissionpolicies' });
const BINDING_SK = storeKey({ group: GROUP, resource: 'validatingadmissionpolicybindings' });
const NS_SK = storeKey({ group: '', resource: 'namespaces' });

export interface VapAdmissionResult {
  warnings: string[];
  auditAnnotations: Record<string, string>;
}

export class VapAdmission {
  private readonly set = new VapSet();
  private readonly known = { policies: new Set<string>(), bindings: new Set<string>() };

  constructor(
    private readonly store: Store,
    private readonly registry: Registry,
  ) {}

  /** Brings the compiled set up to date with the store (a policy is recompiled only when it changed). */
  private sync(): void {
    const policies = this.store.list(POLICY_SK);
    const bindings = this.store.list(BINDING_SK);
    const pNames = new Set<string>();
    for (const p of policies) {
      const name = meta(p).name ?? '';
      pNames.add(name);
      this.set.upsertPolicy({ ...(p as unknown as ValidatingAdmissionPolicy), apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicy' });
    }
    for (const n of this.known.policies) if (!pNames.has(n)) this.set.deletePolicy(n);
    this.known.policies = pNames;
    const bNames = new Set<string>();
    for (const b of bindings) {
      const name = meta(b).name ?? '';
      bNames.add(name);
      this.set.upsertBinding(b as unknown as ValidatingAdmissionPolicyBinding);
    }
    for (const n of this.known.bindings) if (!bNames.has(n)) this.set.deleteBinding(n);
    this.known.bindings = bNames;
  }

  private params(): ParamProvider {
    return {
      scope: (kind) => {
        const def = this.registry.byKind(kind.apiVersion, kind.kind);
        if (!def) return { ok: false, error: `paramKind kind \`${kind.apiVersion}, Kind=${kind.kind}\` not known` };
        return { ok: true, namespaced: def.namespaced };
      },
      find: (kind, namespace, ref) => {
        const def = this.registry.byKind(kind.apiVersion, kind.kind);
        if (!def) return { ok: false, error: `paramKind kind \`${kind.apiVersion}, Kind=${kind.kind}\` not known` };
        const sk = storeKey(def);
        const present = (o: Obj): KubeObject => clone({ ...o, apiVersion: kind.apiVersion, kind: kind.kind }) as KubeObject;
        if ('name' in ref) {
          const o = this.store.get(sk, objKey(namespace, ref.name));
          return { ok: true, objects: o ? [present(o)] : [] };
        }
        const all = this.store.list(sk, def.namespaced ? namespace : undefined);
        return { ok: true, objects: all.filter((o) => selectorMatches(ref.selector, meta(o).labels)).map(present) };
      },
    };
  }

  /** Throws the API server's error when a Deny binding denies; otherwise returns warnings and audit annotations. */
  admit(a: AdmissionAttributes): VapAdmissionResult {
    if (a.resource.group === GROUP) return { warnings: [], auditAnnotations: {} };
    this.sync();
    if (this.set.size.bindings === 0) return { warnings: [], auditAnnotations: {} };
    const attrs: VapAttributes = {
      operation: a.operation,
      kind: a.kind,
      resource: a.resource,
      subResource: a.subResource,
      namespace: a.namespace,
      name: a.name,
      namespaced: a.namespaced,
      object: a.object as KubeObject | null,
      oldObject: a.oldObject as KubeObject | null,
      userInfo: a.userInfo,
      dryRun: a.dryRun,
      options: a.options,
    };
    const nsObj = a.namespace !== '' && a.namespaced ? this.store.get(NS_SK, objKey('', a.namespace)) : undefined;
    const namespaceObject = nsObj ? (clone({ ...nsObj, apiVersion: 'v1', kind: 'Namespace' }) as KubeObject) : null;
    const outcome = admissionOutcome(this.set.evaluate(attrs, { namespaceObject, params: this.params() }));
    const d = outcome.denial;
    if (d) {
      // admission.NewForbidden: the resource (with its subresource) and the object's name.
      const resource = a.subResource ? `${a.resource.resource}/${a.subResource}` : a.resource.resource;
      const name = a.name || String((a.object?.['metadata'] as Obj | undefined)?.['name'] ?? '');
      const prefix = name ? `${qualified(resource, a.resource.group)} "${name}" is forbidden: ` : `${qualified(resource, a.resource.group)} is forbidden: `;
      const details: StatusDetails = { name, kind: resource, causes: [{ reason: '', message: d.message }] };
      if (a.resource.group) details.group = a.resource.group;
      throw new ApiError(d.code, d.reason, `${prefix}${d.message}`, details);
    }
    return { warnings: outcome.warnings, auditAnnotations: outcome.auditAnnotations };
  }
}
