/**
 * The validation kube-apiserver does that clients notice: object names,
 * MicroTime precision on Leases, pods having containers, the structural
 * schema of custom resources (pruned and defaulted first), CRD names.
 */
import type { ResourceDef } from './registry.ts';
import { applySchemaDefaults, prune, validate } from './schema.ts';
import { ApiError, errors, type StatusCause } from './status.ts';
import { isPlainObject, meta, type Obj } from './types.ts';
import { vapCauses } from './vap-validation.ts';

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** Go's RFC3339Micro layout (metav1.MicroTime): exactly six fractional digits. */
const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$/;

/** Names of namespaces (and Services) are DNS-1123 labels; everything else subdomains. */
function nameCauses(def: ResourceDef, name: string): StatusCause[] {
  // RBAC objects are named like path segments (kube's ValidateRBACName), so "system:discovery" is valid.
  if (def.group === 'rbac.authorization.k8s.io') {
    if (name === '.' || name === '..') return [{ reason: 'FieldValueInvalid', field: 'metadata.name', message: `Invalid value: "${name}": may not be '${name}'` }];
    const bad = ['/', '%'].find((c) => name.includes(c));
    return bad ? [{ reason: 'FieldValueInvalid', field: 'metadata.name', message: `Invalid value: "${name}": may not contain '${bad}'` }] : [];
  }
  const label = def.resource === 'namespaces' || def.resource === 'services';
  const re = label ? DNS1123_LABEL : DNS1123_SUBDOMAIN;
  const max = label ? 63 : 253;
  if (re.test(name) && name.length <= max) return [];
  const what = label ? 'RFC 1123 label' : 'RFC 1123 subdomain';
  const rule = label
    ? "must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
    : "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
  return [{ reason: 'FieldValueInvalid', field: 'metadata.name', message: `Invalid value: "${name}": a lowercase ${what} ${rule}` }];
}

/** Decoding errors (400), as the apiserver's JSON decoder reports them. */
export function checkDecodable(def: ResourceDef, obj: Obj): void {
  if (def.resource === 'leases' && def.group === 'coordination.k8s.io') {
    const spec = isPlainObject(obj['spec']) ? obj['spec'] : {};
    for (const f of ['acquireTime', 'renewTime']) {
      const v = spec[f];
      if (v === undefined || v === null) continue;
      if (typeof v !== 'string' || !MICRO_TIME.test(v)) {
        throw errors.badRequest(`Lease in version "v1" cannot be handled as a Lease: parsing time ${JSON.stringify(v)} as "2006-01-02T15:04:05.000000Z07:00": cannot parse ${JSON.stringify(String(v).slice(19))} as ".000000"`);
      }
    }
  }
}

export function validateObject(def: ResourceDef, obj: Obj): void {
  const m = meta(obj);
  const name = m.name ?? '';
  const causes: StatusCause[] = [...nameCauses(def, name)];
  if (def.resource === 'pods' && def.group === '') {
    const spec = isPlainObject(obj['spec']) ? obj['spec'] : {};
    if (!Array.isArray(spec['containers']) || spec['containers'].length === 0) {
      causes.push({ reason: 'FieldValueRequired', field: 'spec.containers', message: 'Required value' });
    }
  }
  if (def.resource === 'customresourcedefinitions') {
    const spec = isPlainObject(obj['spec']) ? obj['spec'] : {};
    const names = isPlainObject(spec['names']) ? spec['names'] : {};
    const expect = `${String(names['plural'] ?? '')}.${String(spec['group'] ?? '')}`;
    if (name !== expect) causes.push({ reason: 'FieldValueInvalid', field: 'metadata.name', message: `Invalid value: "${name}": must be spec.names.plural+"."+spec.group` });
    if (!Array.isArray(spec['versions']) || spec['versions'].length === 0) causes.push({ reason: 'FieldValueRequired', field: 'spec.versions', message: 'Required value' });
    if (typeof names['kind'] !== 'string' || !names['kind']) causes.push({ reason: 'FieldValueRequired', field: 'spec.names.kind', message: 'Required value' });
    if (spec['scope'] !== 'Namespaced' && spec['scope'] !== 'Cluster') causes.push({ reason: 'FieldValueNotSupported', field: 'spec.scope', message: `Unsupported value: "${String(spec['scope'])}": supported values: "Cluster", "Namespaced"` });
  }
  if (def.group === 'admissionregistration.k8s.io') causes.push(...vapCauses(def.resource, obj));
  if (def.group === '' && def.resource === 'events') causes.push(...eventNamespaceCauses(obj));
  if (def.schema) {
    prune(obj, def.schema);
    applySchemaDefaults(obj, def.schema);
    validate(obj, def.schema, '', causes);
  }
  if (causes.length) throw errors.invalid(def.kind, def.group, name, causes);
}

/**
 * kube-apiserver's legacyValidateEvent: a core/v1 Event lives in its
 * involvedObject's namespace; an Event about a cluster-scoped object (no
 * involvedObject.namespace) lives in "" or "default" (with eventTime set:
 * "default" or "kube-system"). That is why client-go records Events on
 * cluster-scoped objects in "default".
 */
function eventNamespaceCauses(obj: Obj): StatusCause[] {
  const namespace = meta(obj).namespace ?? '';
  const involved = isPlainObject(obj['involvedObject']) ? obj['involvedObject'] : {};
  const involvedNs = typeof involved['namespace'] === 'string' ? involved['namespace'] : '';
  const eventTime = obj['eventTime'];
  const hasEventTime = eventTime !== undefined && eventTime !== null && eventTime !== '';
  let ok: boolean;
  if (involvedNs !== '') ok = namespace === involvedNs;
  else ok = hasEventTime ? namespace === 'default' || namespace === 'kube-system' : namespace === '' || namespace === 'default';
  return ok ? [] : [{ reason: 'FieldValueInvalid', field: 'involvedObject.namespace', message: `Invalid value: "${involvedNs}": does not match event.namespace` }];
}

export function requireObjectBody(body: unknown): Obj {
  if (!isPlainObject(body)) throw new ApiError(400, 'BadRequest', 'the body of the request must be a JSON object');
  return body;
}
