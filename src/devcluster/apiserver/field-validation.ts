/**
 * Server-side field validation of built-in kinds (`fieldValidation` =
 * Strict | Warn | Ignore), as kube-apiserver's strict JSON decoder reports
 * unknown fields: `unknown field "spec.foo"` (lists as `containers[0]`),
 * a 400 `strict decoding error: …` under Strict, one Warning per field under
 * Warn (the default when the parameter is absent), nothing under Ignore; the
 * fields are dropped (never stored) unless the request is refused.
 * The known fields come from the Kubernetes protobuf descriptor the codec is
 * generated from (protobuf/k8s-types.generated.ts): every JSON field of every
 * built-in message. Custom resources are not checked here (their schemas
 * prune or preserve unknown fields).
 */
import { messageFor } from './protobuf/codec.ts';
import { MESSAGES, type FieldRow } from './protobuf/k8s-types.generated.ts';
import { ApiError, errors } from './status.ts';
import { isPlainObject, type Obj } from './types.ts';

/** Types whose JSON is free-form or a scalar in JSON (checked no further). */
const OPAQUE = new Set(['runtime.RawExtension', 'apis.meta.v1.FieldsV1', 'apis.meta.v1.Time', 'apis.meta.v1.MicroTime',
  'api.resource.Quantity', 'util.intstr.IntOrString', 'apiextensions.v1.JSON', 'apis.meta.v1.Duration']);

const fieldCache = new Map<string, Map<string, FieldRow>>();

/** JSON field name -> row, inline (embedded) structs flattened. */
function fieldsOf(message: string): Map<string, FieldRow> | undefined {
  const hit = fieldCache.get(message);
  if (hit) return hit;
  const rows = MESSAGES[message];
  if (!rows) return undefined;
  const out = new Map<string, FieldRow>();
  for (const row of rows) {
    if (row[3] === 3) for (const [k, v] of fieldsOf(row[2]) ?? []) out.set(k, v);
    else out.set(row[0], row);
  }
  fieldCache.set(message, out);
  return out;
}

function walk(v: unknown, message: string, path: string, out: string[], prune: boolean): void {
  if (OPAQUE.has(message) || !isPlainObject(v)) return;
  const fields = fieldsOf(message);
  if (!fields) return;
  for (const [k, val] of Object.entries(v)) {
    const row = fields.get(k);
    const p = path ? `${path}.${k}` : k;
    if (!row) {
      if (path === '' && (k === 'apiVersion' || k === 'kind')) continue;
      out.push(`unknown field "${p}"`);
      if (prune) delete v[k];
      continue;
    }
    const [, , type, shape] = row;
    if (!MESSAGES[type]) continue; // a scalar
    if (shape === 1 && Array.isArray(val)) val.forEach((item, i) => walk(item, type, `${p}[${i}]`, out, prune));
    else if (shape === 2 && isPlainObject(val)) for (const [mk, mv] of Object.entries(val)) walk(mv, type, `${p}[${mk}]`, out, prune);
    else if (shape === 0) walk(val, type, p, out, prune);
  }
}

/**
 * `unknown field "…"` for each field of `obj` its kind does not have; with
 * `prune` they are also deleted from `obj`, as kube's decoder drops them.
 */
export function unknownFields(apiVersion: string, kind: string, obj: Obj, prune = false): string[] {
  const message = messageFor(apiVersion, kind);
  if (!message) return [];
  const out: string[] = [];
  walk(obj, message, '', out, prune);
  return out;
}

export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';

export function fieldValidation(query: URLSearchParams): FieldValidation {
  const v = query.get('fieldValidation');
  if (v === null || v === '') return 'Warn';
  if (v === 'Strict' || v === 'Warn' || v === 'Ignore') return v;
  throw errors.badRequest(`fieldValidation parameter unsupported: ${v}, must be one of Ignore, Warn, Strict`);
}

/**
 * Applies the request's fieldValidation to `obj` (a built-in's body): throws
 * under Strict, else adds warnings. A decoded body (create, update) fails as
 * kube's decoder words it: `Deployment in version "v1" cannot be handled as
 * a Deployment: strict decoding error: …`.
 */
export function checkFields(query: URLSearchParams, def: { group: string; version: string; kind: string }, obj: Obj, warnings: string[], decoded: boolean): void {
  const mode = fieldValidation(query);
  // Unknown fields are never stored: dropped under Warn and Ignore, refused under Strict.
  const unknown = unknownFields(def.group ? `${def.group}/${def.version}` : def.version, def.kind, obj, mode !== 'Strict');
  if (unknown.length === 0 || mode === 'Ignore') return;
  if (mode === 'Strict') {
    const prefix = decoded ? `${def.kind} in version "${def.version}" cannot be handled as a ${def.kind}: ` : '';
    throw new ApiError(400, 'BadRequest', `${prefix}strict decoding error: ${unknown.join(', ')}`);
  }
  warnings.push(...unknown);
}
