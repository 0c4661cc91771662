/**
 * The pods/ephemeralcontainers subresource, the only way a real cluster lets
 * anyone add a container to a running Pod (`kubectl debug`). kubectl 1.35
 * sends a strategic merge patch on it; PUT and GET work too. The request is
 * served with the Pod as object (GET returns the Pod, writes take a Pod) and
 * goes through admission as an UPDATE of kind Pod with subResource
 * "ephemeralcontainers", so webhooks see the whole Pod, exactly like
 * kube-apiserver (pkg/registry/core/pod/storage EphemeralContainersREST).
 *
 * Only `spec.ephemeralContainers` is taken from the request; everything else
 * is the stored Pod. The validation is kube-apiserver's
 * ValidatePodEphemeralContainersUpdate, trimmed to what a client notices:
 * ephemeral containers are added, never changed or removed; names are unique
 * across all of the Pod's containers; name and image are required; the fields
 * an ephemeral container may not set are refused.
 */
import type { ResourceDef } from './registry.ts';
import { errors, type StatusCause } from './status.ts';
import { clone, isPlainObject, jsonEqual, meta, type Obj } from './types.ts';

export const EPHEMERAL_CONTAINERS = 'ephemeralcontainers';

/** Whether `def` serves the ephemeralcontainers subresource (core Pods only). */
export function servesEphemeralContainers(def: ResourceDef): boolean {
  return def.group === '' && def.resource === 'pods';
}

/** Fields of a Container that an EphemeralContainer must leave unset (core/v1 EphemeralContainerCommon). */
const FORBIDDEN_FIELDS = ['ports', 'resources', 'lifecycle', 'livenessProbe', 'readinessProbe', 'startupProbe', 'resizePolicy', 'restartPolicy'];

/** Go's zero values count as unset: kubectl debug sends `resources: {}`. */
function isSet(v: unknown): boolean {
  if (v === undefined || v === null) return false;
  if (Array.isArray(v)) return v.length > 0;
  if (isPlainObject(v)) return Object.keys(v).length > 0;
  return true;
}

function containers(spec: Obj, field: string): Obj[] {
  const v = spec[field];
  return Array.isArray(v) ? v.filter(isPlainObject) : [];
}

/**
 * The Pod to store for a write to the subresource: `old` with the incoming
 * `spec.ephemeralContainers`. Throws 422 Invalid as kube-apiserver does.
 */
export function withEphemeralContainers(def: ResourceDef, old: Obj, incoming: Obj): Obj {
  const name = meta(old).name ?? '';
  const oldSpec = isPlainObject(old['spec']) ? old['spec'] : {};
  const newSpec = isPlainObject(incoming['spec']) ? incoming['spec'] : {};
  const raw = newSpec['ephemeralContainers'];
  const causes: StatusCause[] = [];
  if (raw !== undefined && raw !== null && !Array.isArray(raw)) {
    causes.push({ reason: 'FieldValueInvalid', field: 'spec.ephemeralContainers', message: 'Invalid value: must be a list of ephemeral containers' });
    throw errors.invalid(def.kind, def.group, name, causes);
  }
  const next = containers(newSpec, 'ephemeralContainers');
  const before = containers(oldSpec, 'ephemeralContainers');
  const byName = new Map(next.map((c) => [c['name'], c]));
  for (const c of before) {
    const now = byName.get(c['name']);
    if (now === undefined || !jsonEqual(now, c)) {
      causes.push({ reason: 'FieldValueForbidden', field: 'spec.ephemeralContainers', message: `Forbidden: existing ephemeral containers "${String(c['name'])}" may not be removed or changed` });
    }
  }
  const taken = new Set([...containers(oldSpec, 'containers'), ...containers(oldSpec, 'initContainers')].map((c) => c['name']));
  next.forEach((c, i) => {
    const at = `spec.ephemeralContainers[${i}]`;
    const cname = c['name'];
    if (typeof cname !== 'string' || cname === '') causes.push({ reason: 'FieldValueRequired', field: `${at}.name`, message: 'Required value' });
    else if (taken.has(cname)) causes.push({ reason: 'FieldValueDuplicate', field: `${at}.name`, message: `Duplicate value: "${cname}"` });
    else taken.add(cname);
    if (typeof c['image'] !== 'string' || c['image'] === '') causes.push({ reason: 'FieldValueRequired', field: `${at}.image`, message: 'Required value' });
    for (const f of FORBIDDEN_FIELDS) {
      if (isSet(c[f])) causes.push({ reason: 'FieldValueForbidden', field: `${at}.${f}`, message: 'Forbidden: cannot be set for an Ephemeral Container' });
    }
  });
  if (causes.length) throw errors.invalid(def.kind, def.group, name, causes);
  const obj = clone(old);
  const spec = { ...oldSpec };
  if (next.length > 0) spec['ephemeralContainers'] = clone(next);
  else delete spec['ephemeralContainers'];
  obj['spec'] = spec;
  // The incoming resourceVersion is the precondition (checked by the caller);
  // metadata otherwise stays the stored Pod's.
  return obj;
}
