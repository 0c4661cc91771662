/**
 * The generic REST semantics of kube-apiserver over the in-memory store:
 * create / get / list / update / patch / delete for every served resource,
 * with admission, resourceVersion preconditions, the status subresource
 * split, generation, finalizers, namespaces and CRD registration.
 */
import { randomUUID } from 'node:crypto';
import YAML from 'yaml';
import type { AdmissionAttributes, AdmissionHook } from './admission-hook.ts';
import { EPHEMERAL_CONTAINERS, withEphemeralContainers } from './ephemeral-containers.ts';
import { recordApply, recordUpdate, managerFromUserAgent, type ManagedEntry, type Typing, type Writer } from './apply/managed.ts';
import { jsonPatch, mergePatch, strategicMerge } from './patch.ts';
import { defsFromCrd, groupVersion, Registry, storeKey, type ResourceDef } from './registry.ts';
import { matchLabels, parseFieldSelector, parseLabelSelector } from './selectors.ts';
import { ApiError, errors, successStatus } from './status.ts';
import { objKey, Store } from './store.ts';
import { clone, isPlainObject, jsonEqual, meta, nowTimestamp, type Obj, type UserInfo } from './types.ts';
import { checkDecodable, requireObjectBody, validateObject } from './validation.ts';
import { dropUnknownFields, fieldValidation, strictDecodingMessage } from './openapi/fields.ts';
import { typeModel } from './openapi/model.ts';
import { applyDefaults, ClusterIpAllocator, namespaceContents, podQosClass } from './defaults.ts';
import { VapAdmission } from './vap-admission.ts';

export interface RequestScope {
  def: ResourceDef;
  namespace: string;
  name: string;
  subresource: string;
  user: UserInfo;
  query: URLSearchParams;
  /** Admission warnings collected for the response. */
  warnings: string[];
  /** Audit annotations the admission chain asked to record (VAP, webhooks), for the audit log. */
  auditAnnotations?: Record<string, string>;
  /** The request's User-Agent ('' when absent): the default field manager. Unset for writes from inside the server. */
  userAgent?: string;
  /** Duplicate keys the body decoder found, in kube's wording (strict decoding errors). */
  duplicateFields?: string[];
}

export interface Reply { code: number; body: unknown }

const NS_SK = storeKey({ group: '', resource: 'namespaces' });
const CRD_SK = storeKey({ group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions' });
const NAME_CHARS = 'bcdfghjklmnpqrstvwxz2456789';

function isWebhookConfig(def: ResourceDef): boolean {
  return def.group === 'admissionregistration.k8s.io';
}

/** The object as served at `def`'s version (kind/apiVersion set). */
export function present(def: ResourceDef, o: Obj): Obj {
  return { ...o, apiVersion: groupVersion(def), kind: def.kind };
}

function withoutStatusAndMeta(o: Obj, dropStatus: boolean): Obj {
  const { metadata: _m, status, ...rest } = o;
  return dropStatus ? rest : { ...rest, status };
}

/** Compare ignoring resourceVersion and managedFields (a no-op write keeps the RV). */
function sameContent(a: Obj, b: Obj): boolean {
  const strip = (o: Obj): Obj => {
    const { resourceVersion: _r, managedFields: _f, ...m } = meta(o);
    return { ...o, metadata: m };
  };
  return jsonEqual(strip(a), strip(b));
}

/** Same managers owning the same fields (entry times aside): an apply that only takes ownership still writes. */
function sameOwnership(a: Obj, b: Obj): boolean {
  const owners = (o: Obj): unknown => (meta(o).managedFields ?? []).map((e) => (isPlainObject(e) ? { ...e, time: undefined } : e));
  return jsonEqual(owners(a), owners(b));
}

/** The schema server-side apply walks; resources without one are untyped (maps granular, lists atomic). */
function typing(def: ResourceDef): Typing {
  const model = typeModel(def);
  return model ? { nav: model, root: model.root } : { nav: { resolve: (x) => x }, root: undefined };
}

export class Cluster {
  readonly store: Store;
  readonly registry = new Registry();
  private readonly gcQueue = new Set<string>();
  /** ValidatingAdmissionPolicy enforcement: built into the server, like kube-apiserver's plugin (runs before webhooks). */
  private readonly vap: VapAdmission;
  private gcTimer: NodeJS.Timeout | undefined;
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
  }

  close(): void {
    this.closed = true;
    if (this.gcTimer) clearTimeout(this.gcTimer);
  }

  // ---- reads -------------------------------------------------------------

  get(s: RequestScope): Obj {
    const o = this.store.get(storeKey(s.def), objKey(s.def.namespaced ? s.namespace : '', s.name));
    if (!o) throw errors.notFound(s.def.resource, s.def.group, s.name);
    return present(s.def, o);
  }

  /** Predicate for label + field selectors from the query. */
  filter(s: RequestScope): (o: Obj) => boolean {
    const labels = parseLabelSelector(s.query.get('labelSelector'));
    const fields = parseFieldSelector(s.query.get('fieldSelector'), (f) =>
      f === 'metadata.name' || f === 'metadata.namespace' || Object.hasOwn(s.def.fieldSelectors, f));
    return (o: Obj) => {
      const m = meta(o);
      if (labels.length && !matchLabels(labels, m.labels)) return false;
      for (const f of fields) {
        const v = f.field === 'metadata.name' ? m.name : f.field === 'metadata.namespace' ? (m.namespace ?? '') : s.def.fieldSelectors[f.field]!(o);
        if ((v === f.value) === f.negate) return false;
      }
      return true;
    };
  }

  list(s: RequestScope): Obj {
    const match = this.filter(s);
    const limit = Number(s.query.get('limit') ?? '0');
    let listRv = this.store.currentRv();
    let after: string | undefined;
    const cont = s.query.get('continue');
    if (cont) {
      let token: { rv: number; start: string };
      try {
        token = JSON.parse(Buffer.from(cont, 'base64url').toString('utf8')) as { rv: number; start: string };
      } catch {
        throw errors.badRequest('continue key is not valid: illegal base64 data');
      }
      if (token.rv < this.store.compactedRv()) {
        throw errors.expired('The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.');
      }
      listRv = token.rv;
      after = token.start;
    }
    const all = this.store.list(storeKey(s.def), s.def.namespaced && s.namespace ? s.namespace : undefined);
    const items: Obj[] = [];
    let cursor: string | undefined;
    let remaining = 0;
    for (const o of all) {
      const m = meta(o);
      const key = objKey(m.namespace ?? '', m.name ?? '');
      if (after !== undefined && key <= after) continue;
      if (!match(o)) continue;
      if (limit > 0 && items.length >= limit) {
        remaining++;
        continue;
      }
      items.push(o);
      cursor = key;
    }
    const metadata: Obj = { resourceVersion: String(listRv) };
    if (remaining > 0 && cursor !== undefined) {
      metadata['continue'] = Buffer.from(JSON.stringify({ rv: listRv, start: cursor })).toString('base64url');
      metadata['remainingItemCount'] = remaining;
    }
    const shaped = items.map((o) => {
      if (!s.def.builtin) return present(s.def, o);
      const { apiVersion: _a, kind: _k, ...rest } = o;
      return rest;
    });
    return { kind: s.def.listKind, apiVersion: groupVersion(s.def), metadata, items: shaped };
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
    await this.admit(s, operation, object, null, this.options(s, 'CreateOptions'), this.dryRun(s), kind);
  }

  private dryRun(s: RequestScope): boolean {
    const d = s.query.getAll('dryRun');
    if (d.length === 0) return false;
    if (d.some((v) => v !== 'All')) throw errors.badRequest(`Invalid dry run value: ${d.join(',')}`);
    return true;
  }

  // ---- create ------------------------------------------------------------

  async create(s: RequestScope, body: unknown, opts: { skipAdmission?: boolean; apply?: { config: Obj; force: boolean } } = {}): Promise<Reply> {
    const obj = clone(requireObjectBody(body));
    if (typeof obj['kind'] === 'string' && obj['kind'] !== s.def.kind) {
      throw errors.badRequest(`the kind in the data (${obj['kind']}) does not match the expected kind (${s.def.kind})`);
    }
    const dryRun = this.dryRun(s);
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
    this.decode(s, obj);
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
    this.defaultOnCreate(s.def, obj);
    validateObject(s.def, obj);
    m.managedFields = opts.apply
      ? recordApply(typing(s.def), undefined, opts.apply.config, this.writer(s), opts.apply.force).managedFields
      : recordUpdate(typing(s.def), undefined, obj, this.writer(s));
    if (m.managedFields.length === 0) delete m.managedFields;
    const sk = storeKey(s.def);
    if (this.store.get(sk, objKey(m.namespace ?? '', name))) throw errors.alreadyExists(s.def.resource, s.def.group, name);
    if (!opts.skipAdmission) await this.admit(s, 'CREATE', obj, null, this.options(s, 'CreateOptions'), dryRun);
    if (dryRun) return { code: 201, body: obj };
    // Admission is asynchronous: a concurrent create may have won meanwhile.
    if (this.store.get(sk, objKey(m.namespace ?? '', name))) throw errors.alreadyExists(s.def.resource, s.def.group, name);
    this.store.put(sk, obj);
    this.afterWrite(s.def, obj, undefined);
    if (s.def.group === '' && s.def.resource === 'namespaces') await this.populateNamespace(name);
    return { code: 201, body: present(s.def, obj) };
  }

  /**
   * An applied configuration must fit the schema whatever fieldValidation
   * says: kube-apiserver cannot build its typed patch otherwise (a 500 with
   * an empty reason, which kubectl prints as "Error from server").
   */
  private checkApplyFields(s: RequestScope, applied: Obj): void {
    const model = typeModel(s.def);
    if (!model) return;
    const unknown = dropUnknownFields(model, clone(applied), 'smd');
    if (unknown.length === 0) return;
    const gvk = `${s.def.group}/${s.def.version}, Kind=${s.def.kind}`;
    const where = `${s.def.namespaced ? s.namespace : ''}/${s.name}; ${gvk}`;
    throw new ApiError(500, '', `failed to create typed patch object (${where}): ${unknown[0]!}: field not declared in schema`);
  }

  /** What decoding the body does in kube-apiserver: format errors, and unknown fields per fieldValidation. */
  private decode(s: RequestScope, obj: Obj, patched = false): void {
    checkDecodable(s.def, obj);
    const model = typeModel(s.def);
    const found = [...(s.duplicateFields ?? []), ...(model ? dropUnknownFields(model, obj).map((p) => `unknown field "${p}"`) : [])];
    if (found.length === 0) return;
    const mode = fieldValidation(s.query);
    // A patched object is not a request body: kube's patch handler reports the bare strict decoding error.
    if (mode === 'Strict') throw errors.badRequest(patched ? `strict decoding error: ${found.join(', ')}` : strictDecodingMessage(s.def.kind, s.def.version, found));
    if (mode === 'Warn') s.warnings.push(...found);
  }

  /** Who writes, for managedFields: fieldManager, else the User-Agent's product (kube-apiserver's default). */
  private writer(s: RequestScope): Writer {
    return {
      // Writes from inside the server (no HTTP request) are named after their system user, as kube's own components are.
      manager: s.query.get('fieldManager') || (s.userAgent === undefined ? s.user.username.replace(/^system:/, '') : managerFromUserAgent(s.userAgent)),
      apiVersion: groupVersion(s.def), subresource: s.subresource, hasStatus: s.def.hasStatus, now: nowTimestamp(),
    };
  }

  private options(s: RequestScope, kind: string): Obj {
    const o: Obj = { kind, apiVersion: 'meta.k8s.io/v1' };
    const fm = s.query.get('fieldManager');
    if (fm) o['fieldManager'] = fm;
    if (s.query.getAll('dryRun').length) o['dryRun'] = s.query.getAll('dryRun');
    return o;
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

  private defaultOnCreate(def: ResourceDef, obj: Obj): void {
    const m = meta(obj);
    if (def.group === '' && def.resource === 'namespaces') {
      m.labels = { ...(m.labels ?? {}), 'kubernetes.io/metadata.name': m.name ?? '' };
      obj['spec'] = { finalizers: ['kubernetes'] };
      obj['status'] = { phase: 'Active' };
      return;
    }
    if (def.group === '' && def.resource === 'pods') {
      obj['status'] = { phase: 'Pending', qosClass: podQosClass(obj) };
      return;
    }
    if (def.group === '' && def.resource === 'services') {
      this.serviceIps.assign(obj);
      obj['status'] = { loadBalancer: {} };
      return;
    }
    if (def.resource === 'customresourcedefinitions') {
      const spec = (obj['spec'] ?? {}) as Obj;
      const t = nowTimestamp();
      obj['status'] = {
        acceptedNames: clone(spec['names'] ?? {}),
        conditions: [
          { type: 'NamesAccepted', status: 'True', lastTransitionTime: t, reason: 'NoConflicts', message: 'no conflicts found' },
          { type: 'Established', status: 'True', lastTransitionTime: t, reason: 'InitialNamesAccepted', message: 'the initial names have been accepted' },
        ],
        storedVersions: Array.isArray(spec['versions'])
          ? (spec['versions'] as Obj[]).filter((v) => v['storage'] === true).map((v) => String(v['name'])) : [],
      };
      return;
    }
    if (def.hasStatus) delete obj['status'];
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
    this.decode(s, obj);
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

  async patch(s: RequestScope, raw: string, contentType: string): Promise<Reply> {
    const type = contentType.split(';')[0]!.trim().toLowerCase();
    const sk = storeKey(s.def);
    const existing = this.store.get(sk, objKey(s.def.namespaced ? s.namespace : '', s.name));
    let patchBody: unknown;
    try {
      patchBody = type === 'application/apply-patch+yaml' ? YAML.parse(raw) : JSON.parse(raw);
    } catch (e) {
      throw errors.badRequest(`error decoding patch: ${(e as Error).message}`);
    }
    if (type === 'application/apply-patch+yaml') {
      if (!s.query.get('fieldManager')) {
        throw new ApiError(422, 'Invalid', 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
          { kind: 'PatchOptions', group: 'meta.k8s.io', causes: [{ reason: 'FieldValueRequired', message: 'Required value: is required for apply patch', field: 'fieldManager' }] });
      }
      const applied = requireObjectBody(patchBody);
      this.checkApplyFields(s, applied);
      const force = s.query.get('force') === 'true';
      if (!existing) {
        if (s.subresource) throw errors.notFound(s.def.resource, s.def.group, s.name);
        const m = meta(applied);
        if (m.name && m.name !== s.name) throw errors.badRequest(`the name of the object (${m.name}) does not match the name on the URL (${s.name})`);
        return this.create(s, { ...clone(applied), metadata: { ...m, name: s.name } }, { apply: { config: applied, force } });
      }
      const result = recordApply(typing(s.def), existing, applied, this.writer(s), force);
      return this.commitUpdate(s, existing, result.object, { applied: result.managedFields });
    }
    if (!existing) throw errors.notFound(s.def.resource, s.def.group, s.name);
    let patched: unknown;
    switch (type) {
      case 'application/merge-patch+json':
        if (!isPlainObject(patchBody)) throw errors.badRequest('error decoding patch: merge patch must be a JSON object');
        patched = mergePatch(clone(existing), patchBody);
        break;
      case 'application/json-patch+json':
        patched = jsonPatch(existing, patchBody);
        break;
      case 'application/strategic-merge-patch+json':
        if (!s.def.builtin) throw errors.unsupportedMediaType(contentType);
        if (!isPlainObject(patchBody)) throw errors.badRequest('error decoding patch: strategic merge patch must be a JSON object');
        patched = strategicMerge(clone(existing), patchBody);
        break;
      default:
        throw errors.unsupportedMediaType(contentType);
    }
    const obj = requireObjectBody(patched);
    const m = meta(obj);
    if (m.resourceVersion && m.resourceVersion !== meta(existing).resourceVersion) throw errors.conflict(s.def.resource, s.def.group, s.name);
    if (m.name !== s.name) throw errors.badRequest(`the name of the object (${String(m.name)}) does not match the name on the URL (${s.name})`);
    this.decode(s, obj, true);
    return this.commitUpdate(s, existing, obj);
  }

  /**
   * The shared tail of PUT and PATCH: merge rules, validation, admission,
   * no-op detection, store. `incoming` is taken over (mutated and stored).
   */
  private async commitUpdate(s: RequestScope, existing: Obj, incoming: Obj, opts: { skipAdmission?: boolean; applied?: ManagedEntry[] } = {}): Promise<Reply> {
    const dryRun = this.dryRun(s);
    const old = existing;
    const om = meta(old);
    const sentManaged = s.subresource === 'status' ? undefined : meta(incoming).managedFields;
    let obj: Obj;
    if (s.subresource === 'status') {
      obj = { ...clone(old), status: clone(incoming['status']) };
      if (incoming['status'] === undefined) delete obj['status'];
    } else if (s.subresource === EPHEMERAL_CONTAINERS) {
      obj = withEphemeralContainers(s.def, old, incoming);
    } else {
      // No copy: every caller passes an object it owns (a fresh parse or a patched copy of the stored one).
      obj = incoming;
      if (s.def.hasStatus) {
        if (old['status'] === undefined) delete obj['status'];
        else obj['status'] = clone(old['status']);
      }
    }
    obj['apiVersion'] = groupVersion(s.def);
    obj['kind'] = s.def.kind;
    const m = meta(obj);
    m.name = om.name!;
    if (s.def.namespaced) m.namespace = om.namespace!;
    else delete m.namespace;
    m.uid = om.uid!;
    m.creationTimestamp = om.creationTimestamp!;
    m.resourceVersion = om.resourceVersion!;
    if (om.deletionTimestamp) {
      m.deletionTimestamp = om.deletionTimestamp;
      m.deletionGracePeriodSeconds = om.deletionGracePeriodSeconds ?? 0;
    } else {
      delete m.deletionTimestamp;
      delete m.deletionGracePeriodSeconds;
    }
    delete m.managedFields;
    if (s.def.resource === 'namespaces' && s.def.group === '') {
      m.labels = { ...(m.labels ?? {}), 'kubernetes.io/metadata.name': m.name };
      if (s.subresource !== 'status') obj['spec'] = clone(old['spec']);
    }
    if (s.def.generation) {
      const changed = !jsonEqual(withoutStatusAndMeta(obj, s.def.hasStatus), withoutStatusAndMeta(old, s.def.hasStatus));
      m.generation = (om.generation ?? 1) + (changed && s.subresource !== 'status' ? 1 : 0);
    } else delete m.generation;
    if (s.subresource !== 'status') {
      applyDefaults(s.def, obj);
      // clusterIP is allocated once and immutable: an update that omits it keeps it.
      if (s.def.group === '' && s.def.resource === 'services' && isPlainObject(obj['spec']) && isPlainObject(old['spec']) && !obj['spec']['clusterIP']) {
        for (const k of ['clusterIP', 'clusterIPs']) if (old['spec'][k] !== undefined) obj['spec'][k] = clone(old['spec'][k]);
      }
    }
    validateObject(s.def, obj);
    m.managedFields = opts.applied ?? recordUpdate(typing(s.def), old, obj, this.writer(s), sentManaged);
    if (m.managedFields.length === 0) delete m.managedFields;
    if (!opts.skipAdmission) await this.admit(s, 'UPDATE', obj, old, this.options(s, 'UpdateOptions'), dryRun);
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
    const dryRun = this.dryRun(s);
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
    for (const def of this.servedByStore()) {
      if (!def.namespaced) continue;
      for (const o of this.store.list(storeKey(def), name)) this.removeInternal(def, name, meta(o).name ?? '');
    }
    const left = this.servedByStore().some((d) => d.namespaced && this.store.list(storeKey(d), name).length > 0);
    if (left) {
      // Objects with finalizers hold the namespace in Terminating, as in kube.
      setTimeout(() => this.finishNamespace(name), 100).unref();
      return;
    }
    const gone = this.store.remove(NS_SK, '', name);
    if (gone) this.onRemoved(this.registry.get('', 'v1', 'namespaces')!, gone, 'Background');
  }

  /** One def per store (CRDs with several versions share one). */
  private servedByStore(): ResourceDef[] {
    const seen = new Map<string, ResourceDef>();
    for (const d of this.registry.all()) if (!seen.has(storeKey(d))) seen.set(storeKey(d), d);
    return [...seen.values()];
  }

  // ---- hooks: CRDs, garbage collection -----------------------------------

  private afterWrite(def: ResourceDef, obj: Obj, _old: Obj | undefined): void {
    if (storeKey(def) === CRD_SK) this.registry.setCrd(meta(obj).name ?? '', defsFromCrd(obj));
    if ((meta(obj).ownerReferences ?? []).length > 0) this.enqueueGc(storeKey(def), objKey(meta(obj).namespace ?? '', meta(obj).name ?? ''));
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
    if (!m.uid) return;
    // Dependents are found by scanning: deletions are rare next to writes,
    // and a scan keeps no index to go stale.
    for (const d of this.servedByStore()) {
      // Unsorted and uncopied (store.values): this scan runs once per deletion.
      const dependents: Obj[] = [];
      for (const o of this.store.values(storeKey(d))) if ((meta(o).ownerReferences ?? []).some((r) => r.uid === m.uid)) dependents.push(o);
      const key = (o: Obj): string => objKey(meta(o).namespace ?? '', meta(o).name ?? '');
      dependents.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0)); // etcd's order, as before
      for (const o of dependents) {
        const refs = meta(o).ownerReferences ?? [];
        if (propagation === 'Orphan') {
          const copy = clone(o);
          meta(copy).ownerReferences = refs.filter((r) => r.uid !== m.uid);
          this.store.put(storeKey(d), copy);
        } else this.enqueueGc(storeKey(d), objKey(meta(o).namespace ?? '', meta(o).name ?? ''));
      }
    }
  }

  private enqueueGc(sk: string, key: string): void {
    this.gcQueue.add(`${sk}\u0000${key}`);
    // Background collection, like the garbage collector controller: a
    // short delay so an owner created just after its dependent is seen.
    this.gcTimer ??= setTimeout(() => this.runGc(), 20);
  }

  private runGc(): void {
    this.gcTimer = undefined;
    if (this.closed) return;
    const items = [...this.gcQueue];
    this.gcQueue.clear();
    for (const item of items) {
      const [sk, key] = item.split('\u0000') as [string, string];
      const o = this.store.get(sk, key);
      if (!o) continue;
      const m = meta(o);
      const refs = m.ownerReferences ?? [];
      if (refs.length === 0) continue;
      const ownerAlive = refs.some((r) => {
        const ownerDef = this.registry.byKind(r.apiVersion, r.kind);
        if (!ownerDef) return true; // unresolvable kind: never collect on a guess
        const owner = this.store.byUid(r.uid);
        if (!owner) return false;
        const om = meta(owner);
        return om.name === r.name && (!ownerDef.namespaced || om.namespace === m.namespace);
      });
      if (ownerAlive) continue;
      const def = this.servedByStore().find((d) => storeKey(d) === sk);
      if (def) this.removeInternal(def, m.namespace ?? '', m.name ?? '');
    }
  }
}
