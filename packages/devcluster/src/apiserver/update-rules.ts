/**
 * What PUT and PATCH keep from the stored object whatever the request says
 * (identity, timestamps, status or spec per subresource), the generation
 * rule, and the no-op comparison: kube-apiserver's update strategy.
 */
import { applyDefaults } from './defaults.ts';
import { EPHEMERAL_CONTAINERS, withEphemeralContainers } from './ephemeral-containers.ts';
import { groupVersion } from './registry.ts';
import type { RequestScope } from './request-scope.ts';
import { clone, isPlainObject, jsonEqual, meta, type Obj } from './types.ts';

function withoutStatusAndMeta(o: Obj, dropStatus: boolean): Obj {
  const { metadata: _m, status, ...rest } = o;
  return dropStatus ? rest : { ...rest, status };
}

/** Compare ignoring resourceVersion and managedFields (a no-op write keeps the RV). */
export function sameContent(a: Obj, b: Obj): boolean {
  const strip = (o: Obj): Obj => {
    const { resourceVersion: _r, managedFields: _f, ...m } = meta(o);
    return { ...o, metadata: m };
  };
  return jsonEqual(strip(a), strip(b));
}

/** Same managers owning the same fields (entry times aside): an apply that only takes ownership still writes. */
export function sameOwnership(a: Obj, b: Obj): boolean {
  const owners = (o: Obj): unknown => (meta(o).managedFields ?? []).map((e) => (isPlainObject(e) ? { ...e, time: undefined } : e));
  return jsonEqual(owners(a), owners(b));
}

/** The object an update of `old` stores, from the request's `incoming` (taken over: mutated and returned when no subresource). */
export function updatedObject(s: RequestScope, old: Obj, incoming: Obj): Obj {
  const om = meta(old);
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
  return obj;
}
