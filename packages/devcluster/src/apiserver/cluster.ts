/**
 * The generic REST semantics of kube-apiserver over the in-memory store:
 * create / get / list / update / patch / delete for every served resource,
 * with admission, resourceVersion preconditions, the status subresource
 * split, generation, finalizers, namespaces and CRD registration.
 */
import { randomUUID } from 'node:crypto';
import type { AdmissionAttributes, AdmissionHook, AdmittedView } from './admission-hook.ts';
import { recordApply, recordUpdate, type ManagedEntry } from './apply/managed.ts';
import { listObjects, selectorFilter } from './cluster-list.ts';
import { GarbageCollector, servedByStore } from './garbage-collector.ts';
import { applyPatchBody, decodePatchBody } from './patch.ts';
import { defsFromCrd, groupVersion, Registry, storeKey, type ResourceDef } from './registry.ts';
import { checkApplyFields, decodeChecks, isDryRun, present, requestOptions, typing, writer, type Reply, type RequestScope } from './request-scope.ts';
import { ApiError, errors, successStatus } from './status.ts';
import { objKey, Store } from './store.ts';
import { clone, isPlainObject, meta, nowTimestamp, type Obj, type UserInfo } from './types.ts';
import { requireObjectBody, validateObject } from './validation.ts';
import { applyDefaults, ClusterIpAllocator, defaultOnCreate, namespaceContents } from './defaults.ts';
import { sameContent, sameOwnership, updatedObject } from './update-rules.ts';
import { VapAdmission } from './vap-admission.ts';

export { present, type Reply, type RequestScope } from './request-scope.ts';

const NS_SK = storeKey({ group: '', resource: 'namespaces' });
const CRD_SK = storeKey({ group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions' });
const NAME_CHARS = 'bcdfghjklmnpqrstvwxz2456789';

function isWebhookConfig(def: ResourceDef): boolean {
  return def.group === 'admissionregistration.k8s.io';
}

export class Cluster {
  readonly store: Store;
  readonly registry = new Registry();
  private readonly gc: GarbageCollector;
  /** ValidatingAdmissionPolicy enforcement: built into the server, like kube-apiserver's plugin (runs before webhooks). */
  private readonly vap: VapAdmission;
  private closed = false;
  /** PEM published in every namespace as the kube-root-ca.crt ConfigMap. */
  rootCaCert = '';
  private readonly serviceIps = new ClusterIpAllocator();

  constructor(
    historyLimit: number,
    private readonly admission: AdmissionHook | undefined,
    private readonly signal: AbortSignal,
  ) {
    this.store = new Store(historyLimit);
    this.vap = new VapAdmission(this.store, this.registry);
    this.gc = new GarbageCollector(this.store, this.registry, (def, namespace, name) => this.removeInternal(def, namespace, name));
  }

  close(): void {
    this.closed = true;
    this.gc.close();
  }

  // ---- reads -------------------------------------------------------------

  get(s: RequestScope): Obj {
    const o = this.store.get(storeKey(s.def), objKey(s.def.namespaced ? s.namespace : '', s.name));
    if (!o) throw errors.notFound(s.def.resource, s.def.group, s.name);
    return present(s.def, o);
  }

  /** Predicate for label + field selectors from the query. */
  filter(s: RequestScope): (o: Obj) => boolean {
    return selectorFilter(s);
  }

  list(s: RequestScope): Obj {
    return listObjects(this.store, s);
  }

  namespaceLabels(name: string): Record<string, string> | undefined {
    const ns = this.store.get(NS_SK, objKey('', name));
    return ns ? { ...(meta(ns).labels ?? {}) } : undefined;
  }

  // ---- admission ---------------------------------------------------------

  private async admit(s: RequestScope, operation: AdmissionAttributes['operation'], object: Obj | null, oldObject: Obj | null,
    options: Obj | null, dryRun: boolean, kind = { group: s.def.group, version: s.def.version, kind: s.def.kind }): Promise<void> {
    if (isWebhookConfig(s.def)) return;
    const attrs: AdmissionAttributes = {
      operation, kind,
      resource: { group: s.def.group, version: s.def.version, resource: s.def.resource },
      subResource: s.subresource, namespace: s.def.namespaced ? s.namespace : '', name: s.name,
      namespaced: s.def.namespaced, object: object ? clone(object) : null, oldObject: oldObject ? clone(oldObject) : null,
      userInfo: { username: s.user.username, uid: s.user.uid, groups: [...s.user.groups] }, dryRun, options,
    };
    // kube-apiserver's plugin order: ValidatingAdmissionPolicy, then ValidatingAdmissionWebhook.
    const vap = this.vap.admit(attrs);
    s.warnings.push(...vap.warnings);
    if (Object.keys(vap.auditAnnotations).length > 0) s.auditAnnotations = { ...s.auditAnnotations, ...vap.auditAnnotations };
    if (!this.admission) return;
    const out = await this.admission.admit(attrs, {
      namespaceLabels: (n) => this.namespaceLabels(n),
      validatingWebhookConfigurations: () => this.store.list(storeKey({ group: 'admissionregistration.k8s.io', resource: 'validatingwebhookconfigurations' }))
        .map((o) => clone({ ...o, apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration' })),
      signal: this.signal,
    });
    s.warnings.push(...out.warnings);
    if (out.auditAnnotations) s.auditAnnotations = { ...s.auditAnnotations, ...out.auditAnnotations };
    if (!out.allowed) {
      const reason = out.status.reason || (out.status.code === 403 ? 'Forbidden' : '');
      throw new ApiError(out.status.code, reason, out.status.message);
    }
  }

  /** Admission for a subresource create such as pods/eviction. */
  async admitSubresource(s: RequestScope, operation: AdmissionAttributes['operation'], object: Obj,
    kind: { group: string; version: string; kind: string }): Promise<void> {
    await this.admit(s, operation, object, null, requestOptions(s, 'CreateOptions'), isDryRun(s), kind);
  }


  // ---- create ------------------------------------------------------------

  async create(s: RequestScope, body: unknown, opts: { skipAdmission?: boolean; apply?: { config: Obj; force: boolean } } = {}): Promise<Reply> {
    const obj = clone(requireObjectBody(body));
    if (typeof obj['kind'] === 'string' && obj['kind'] !== s.def.kind) {
      throw errors.badRequest(`the kind in the data (${obj['kind']}) does not match the expected kind (${s.def.kind})`);
    }
    const dryRun = isDryRun(s);
    const m = meta(obj);
    if (s.def.namespaced) {
      if (m.namespace && m.namespace !== s.namespace) {
        throw errors.badRequest('the namespace of the provided object does not match the namespace sent on the request');
      }
      m.namespace = s.namespace;
    } else delete m.namespace;
    if (m.resourceVersion) throw errors.internal('resourceVersion should not be set on objects to be created');
    if (!m.name && m.generateName) {
      let suffix = '';
      for (let i = 0; i < 5; i++) suffix += NAME_CHARS[Math.floor(Math.random() * NAME_CHARS.length)];
      m.name = `${m.generateName}${suffix}`;
    }
    if (!m.name) {
      throw errors.invalid(s.def.kind, s.def.group, '', [{ reason: 'FieldValueRequired', field: 'metadata.name', message: 'Required value: name or generateName is required' }]);
    }
    const name = m.name;
    s.name = name; // for the audit log and admission
    decodeChecks(s, obj);
    if (s.def.namespaced) this.requireNamespace(s);
    obj['apiVersion'] = groupVersion(s.def);
    obj['kind'] = s.def.kind;
    m.uid = randomUUID();
    m.creationTimestamp = nowTimestamp();
    delete m.deletionTimestamp;
    delete m.deletionGracePeriodSeconds;
    delete m.managedFields;
    if (s.def.generation) m.generation = 1;
    else delete m.generation;
    applyDefaults(s.def, obj);
    defaultOnCreate(s.def, obj, this.serviceIps);
    validateObject(s.def, obj);
    m.managedFields = opts.apply
      ? recordApply(typing(s.def), undefined, opts.apply.config, writer(s), opts.apply.force).managedFields
      : recordUpdate(typing(s.def), undefined, obj, writer(s));
    if (m.managedFields.length === 0) delete m.managedFields;
    const sk = storeKey(s.def);
    if (this.store.get(sk, objKey(m.namespace ?? '', name))) throw errors.alreadyExists(s.def.resource, s.def.group, name);
    if (!opts.skipAdmission) await this.admit(s, 'CREATE', obj, null, requestOptions(s, 'CreateOptions'), dryRun);
    if (dryRun) return { code: 201, body: obj };
    // Admission is asynchronous: a concurrent create may have won meanwhile.
    if (this.store.get(sk, objKey(m.namespace ?? '', name))) throw errors.alreadyExists(s.def.resource, s.def.group, name);
    this.store.put(sk, obj);
    this.afterWrite(s.def, obj, undefined);
    if (s.def.group === '' && s.def.resource === 'namespaces') await this.populateNamespace(name);
    return { code: 201, body: present(s.def, obj) };
  }





  /** The default ServiceAccount and kube-root-ca.crt, as their controllers create them right after the namespace. */
  private async populateNamespace(namespace: string): Promise<void> {
    const system: UserInfo = { username: 'system:kube-controller-manager', uid: '', groups: ['system:authenticated'] };
    for (const [resource, obj] of namespaceContents(namespace, this.rootCaCert)) {
      const def = this.registry.get('', 'v1', resource);
      if (!def) continue;
      const scope: RequestScope = { def, namespace, name: '', subresource: '', user: system, query: new URLSearchParams(), warnings: [] };
      if (this.store.get(storeKey(def), objKey(namespace, String(meta(obj).name)))) continue;
      await this.create(scope, obj, { skipAdmission: true });
    }
  }

  private requireNamespace(s: RequestScope): void {
    const ns = this.store.get(NS_SK, objKey('', s.namespace));
    if (!ns) throw errors.notFound('namespaces', '', s.namespace);
    if (meta(ns).deletionTimestamp) {
      throw errors.forbidden(s.def.resource, s.def.group, s.name,
        `unable to create new content in namespace ${s.namespace} because it is being terminated`);
    }
  }


  // ---- update / patch ----------------------------------------------------

  async update(s: RequestScope, body: unknown, opts: { skipAdmission?: boolean } = {}): Promise<Reply> {
    const obj = clone(requireObjectBody(body));
    const m = meta(obj);
    if (m.name !== undefined && m.name !== s.name) {
      throw errors.badRequest(`the name of the object (${m.name}) does not match the name on the URL (${s.name})`);
    }
    if (s.def.namespaced && m.namespace && m.namespace !== s.namespace) {
      throw errors.badRequest('the namespace of the provided object does not match the namespace sent on the request');
    }
    decodeChecks(s, obj);
    const sk = storeKey(s.def);
    const existing = this.store.get(sk, objKey(s.def.namespaced ? s.namespace : '', s.name));
    if (!existing) {
      if (s.def.putCreates && !s.subresource) {
        delete m.resourceVersion;
        return this.create(s, { ...obj, metadata: { ...m, name: s.name } });
      }
      throw errors.notFound(s.def.resource, s.def.group, s.name);
    }
    if (!m.resourceVersion) {
      if (s.def.putRequiresRv) {
        throw errors.invalid(s.def.kind, s.def.group, s.name, [{ reason: 'FieldValueInvalid', field: 'metadata.resourceVersion', message: 'Invalid value: 0x0: must be specified for an update' }]);
      }
    } else if (m.resourceVersion !== meta(existing).resourceVersion) {
      throw errors.conflict(s.def.resource, s.def.group, s.name);
    }
    return this.commitUpdate(s, existing, obj, opts);
  }

  async patch(s: RequestScope, raw: string, contentType: string, opts: { admitAs?: AdmittedView } = {}): Promise<Reply> {
    const type = contentType.split(';')[0]!.trim().toLowerCase();
    const sk = storeKey(s.def);
    const existing = this.store.get(sk, objKey(s.def.namespaced ? s.namespace : '', s.name));
    const patchBody = decodePatchBody(type, raw);
    if (type === 'application/apply-patch+yaml') {
      if (!s.query.get('fieldManager')) {
        throw new ApiError(422, 'Invalid', 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
          { kind: 'PatchOptions', group: 'meta.k8s.io', causes: [{ reason: 'FieldValueRequired', message: 'Required value: is required for apply patch', field: 'fieldManager' }] });
      }
      const applied = requireObjectBody(patchBody);
      checkApplyFields(s, applied);
      const force = s.query.get('force') === 'true';
      if (!existing) {
        if (s.subresource) throw errors.notFound(s.def.resource, s.def.group, s.name);
        const m = meta(applied);
        if (m.name && m.name !== s.name) throw errors.badRequest(`the name of the object (${m.name}) does not match the name on the URL (${s.name})`);
        return this.create(s, { ...clone(applied), metadata: { ...m, name: s.name } }, { apply: { config: applied, force } });
      }
      const result = recordApply(typing(s.def), existing, applied, writer(s), force);
      return this.commitUpdate(s, existing, result.object, { applied: result.managedFields });
    }
    if (!existing) throw errors.notFound(s.def.resource, s.def.group, s.name);
    const patched = applyPatchBody(type, contentType, s.def, existing, patchBody);
    const obj = requireObjectBody(patched);
    const m = meta(obj);
    if (m.resourceVersion && m.resourceVersion !== meta(existing).resourceVersion) throw errors.conflict(s.def.resource, s.def.group, s.name);
    if (m.name !== s.name) throw errors.badRequest(`the name of the object (${String(m.name)}) does not match the name on the URL (${s.name})`);
    decodeChecks(s, obj, true);
    return this.commitUpdate(s, existing, obj, opts.admitAs ? { admitAs: opts.admitAs } : {});
  }

  /**
   * The shared tail of PUT and PATCH: merge rules, validation, admission,
   * no-op detection, store. `incoming` is taken over (mutated and stored).
   */
  private async commitUpdate(s: RequestScope, existing: Obj, incoming: Obj, opts: { skipAdmission?: boolean; applied?: ManagedEntry[]; admitAs?: AdmittedView } = {}): Promise<Reply> {
    const dryRun = isDryRun(s);
    const old = existing;
    const om = meta(old);
    const sentManaged = s.subresource === 'status' ? undefined : meta(incoming).managedFields;
    const obj = updatedObject(s, old, incoming);
    const m = meta(obj);
    validateObject(s.def, obj);
    m.managedFields = opts.applied ?? recordUpdate(typing(s.def), old, obj, writer(s), sentManaged);
    if (m.managedFields.length === 0) delete m.managedFields;
    const as = opts.admitAs;
    if (as) await this.admit({ ...s, subresource: as.subresource }, 'UPDATE', as.view(obj), as.view(old), requestOptions(s, 'UpdateOptions'), dryRun, as.kind);
    else if (!opts.skipAdmission) await this.admit(s, 'UPDATE', obj, old, requestOptions(s, 'UpdateOptions'), dryRun);
    const sk = storeKey(s.def);
    const current = this.store.get(sk, objKey(om.namespace ?? '', om.name!));
    if (current !== existing) throw errors.conflict(s.def.resource, s.def.group, s.name);
    if (sameContent(obj, old) && sameOwnership(obj, old)) return { code: 200, body: present(s.def, old) };
    if (dryRun) return { code: 200, body: obj };
    if (m.deletionTimestamp && (m.finalizers ?? []).length === 0 && !(s.def.resource === 'namespaces' && s.def.group === '')) {
      this.store.put(sk, obj);
      this.store.remove(sk, om.namespace ?? '', om.name!);
      this.onRemoved(s.def, obj, 'Background');
      return { code: 200, body: present(s.def, obj) };
    }
    this.store.put(sk, obj);
    this.afterWrite(s.def, obj, old);
    return { code: 200, body: present(s.def, obj) };
  }

  // ---- delete ------------------------------------------------------------

  async delete(s: RequestScope, body: unknown, opts: { skipAdmission?: boolean } = {}): Promise<Reply> {
    const dryRun = isDryRun(s);
    const options: Obj = isPlainObject(body) ? clone(body) : {};
    const propagation = String(options['propagationPolicy'] ?? (options['orphanDependents'] === true ? 'Orphan' : 'Background'));
    const sk = storeKey(s.def);
    const ns = s.def.namespaced ? s.namespace : '';
    const existing = this.store.get(sk, objKey(ns, s.name));
    if (!existing) throw errors.notFound(s.def.resource, s.def.group, s.name);
    const em = meta(existing);
    const pre = isPlainObject(options['preconditions']) ? options['preconditions'] : {};
    if (typeof pre['uid'] === 'string' && pre['uid'] !== em.uid) {
      throw new ApiError(409, 'Conflict', `Operation cannot be fulfilled on ${s.def.group ? `${s.def.resource}.${s.def.group}` : s.def.resource} "${s.name}": Precondition failed: UID in precondition: ${pre['uid']}, UID in object meta: ${String(em.uid)}`,
        { name: s.name, ...(s.def.group ? { group: s.def.group } : {}), kind: s.def.resource });
    }
    if (typeof pre['resourceVersion'] === 'string' && pre['resourceVersion'] !== em.resourceVersion) {
      throw errors.conflict(s.def.resource, s.def.group, s.name);
    }
    if (!opts.skipAdmission) await this.admit(s, 'DELETE', null, existing, { kind: 'DeleteOptions', apiVersion: 'meta.k8s.io/v1', ...options }, dryRun);
    if (dryRun) return { code: 200, body: s.def.deleteReturnsObject ? present(s.def, existing) : successStatus(this.details(s.def, existing)) };
    const isNs = s.def.group === '' && s.def.resource === 'namespaces';
    if (isNs || (em.finalizers ?? []).length > 0) {
      if (em.deletionTimestamp) return { code: 200, body: present(s.def, existing) };
      const obj = clone(existing);
      const m = meta(obj);
      m.deletionTimestamp = nowTimestamp();
      m.deletionGracePeriodSeconds = 0;
      if (isNs) obj['status'] = { ...((obj['status'] ?? {}) as Obj), phase: 'Terminating' };
      this.store.put(sk, obj);
      if (isNs) setImmediate(() => this.finishNamespace(s.name));
      return { code: 200, body: present(s.def, obj) };
    }
    const gone = this.store.remove(sk, ns, s.name)!;
    this.onRemoved(s.def, gone, propagation);
    return { code: 200, body: s.def.deleteReturnsObject ? present(s.def, gone) : successStatus(this.details(s.def, gone)) };
  }

  private details(def: ResourceDef, o: Obj): Obj {
    const m = meta(o);
    return def.group ? { name: m.name, group: def.group, kind: def.resource, uid: m.uid } : { name: m.name, kind: def.resource, uid: m.uid };
  }

  /** Removes without admission (garbage collection, namespace cleanup, eviction). */
  removeInternal(def: ResourceDef, namespace: string, name: string, propagation = 'Background'): void {
    const sk = storeKey(def);
    const existing = this.store.get(sk, objKey(namespace, name));
    if (!existing) return;
    const em = meta(existing);
    if ((em.finalizers ?? []).length > 0) {
      if (em.deletionTimestamp) return;
      const obj = clone(existing);
      meta(obj).deletionTimestamp = nowTimestamp();
      meta(obj).deletionGracePeriodSeconds = 0;
      this.store.put(sk, obj);
      return;
    }
    const gone = this.store.remove(sk, namespace, name);
    if (gone) this.onRemoved(def, gone, propagation);
  }

  private finishNamespace(name: string): void {
    if (this.closed) return;
    for (const def of servedByStore(this.registry)) {
      if (!def.namespaced) continue;
      for (const o of this.store.list(storeKey(def), name)) this.removeInternal(def, name, meta(o).name ?? '');
    }
    const left = servedByStore(this.registry).some((d) => d.namespaced && this.store.list(storeKey(d), name).length > 0);
    if (left) {
      // Objects with finalizers hold the namespace in Terminating, as in kube.
      setTimeout(() => this.finishNamespace(name), 100).unref();
      return;
    }
    const gone = this.store.remove(NS_SK, '', name);
    if (gone) this.onRemoved(this.registry.get('', 'v1', 'namespaces')!, gone, 'Background');
  }

  // ---- hooks: CRDs, garbage collection (garbage-collector.ts) -------------

  private afterWrite(def: ResourceDef, obj: Obj, _old: Obj | undefined): void {
    if (storeKey(def) === CRD_SK) this.registry.setCrd(meta(obj).name ?? '', defsFromCrd(obj));
    this.gc.written(def, obj);
  }

  private onRemoved(def: ResourceDef, gone: Obj, propagation: string): void {
    const m = meta(gone);
    if (storeKey(def) === CRD_SK) {
      const defs = this.registry.removeCrd(m.name ?? '');
      const first = defs[0];
      if (first) {
        const sk = storeKey(first);
        for (const o of this.store.list(sk)) this.store.remove(sk, meta(o).namespace ?? '', meta(o).name ?? '');
        this.store.dropBucket(sk);
      }
    }
    this.gc.removed(gone, propagation);
  }
}
