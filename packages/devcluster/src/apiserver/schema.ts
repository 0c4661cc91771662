/**
 * Structural-schema handling for custom resources, the simple parts of
 * apiextensions-apiserver: pruning of unknown fields, defaulting, then `type`,
 * `required`, `enum`, `nullable`, `x-kubernetes-int-or-string` and
 * `x-kubernetes-preserve-unknown-fields`. Formats, CEL and numeric/string
 * bounds are not checked.
 */
import type { StatusCause } from './status.ts';
import { isPlainObject, type Obj } from './types.ts';

const ROOT_META = new Set(['apiVersion', 'kind', 'metadata']);

/** Removes fields the schema does not declare (kube prunes them silently). */
export function prune(value: unknown, schema: Obj | undefined, root = true): void {
  if (!schema || schema['x-kubernetes-preserve-unknown-fields'] === true) {
    if (schema && isPlainObject(value) && isPlainObject(schema['properties'])) {
      for (const [k, s] of Object.entries(schema['properties'] as Record<string, Obj>)) prune(value[k], s, false);
    }
    return;
  }
  if (isPlainObject(value)) {
    const props = isPlainObject(schema['properties']) ? (schema['properties'] as Record<string, Obj>) : undefined;
    const addl = schema['additionalProperties'];
    for (const k of Object.keys(value)) {
      if (root && ROOT_META.has(k)) continue;
      if (props && Object.hasOwn(props, k)) prune(value[k], props[k], false);
      else if (isPlainObject(addl)) prune(value[k], addl, false);
      else if (addl === true) continue;
      else delete value[k];
    }
  } else if (Array.isArray(value) && isPlainObject(schema['items'])) {
    for (const v of value) prune(v, schema['items'] as Obj, false);
  }
}

/**
 * apiextensions-apiserver's structural defaulting (`structuraldefaulting`):
 * a property that is absent, or null where the schema does not allow null,
 * takes a copy of its schema's `default`; then defaulting descends into
 * properties, `additionalProperties` values and array items. A default is
 * set only inside an object that exists (an absent parent is not created
 * unless it has a default of its own), as upstream. Runs on create and on
 * every update, like upstream's defaulting on decode, so a stored object and
 * what admission sees carry the defaults (a PortalClusterRule without
 * `enforcement` is stored with `enforcement: Deny`).
 */
export function applySchemaDefaults(value: unknown, schema: Obj | undefined, root = true): void {
  if (!schema) return;
  if (isPlainObject(value)) {
    const props = isPlainObject(schema['properties']) ? (schema['properties'] as Record<string, Obj>) : {};
    for (const [k, s] of Object.entries(props)) {
      if (root && ROOT_META.has(k)) continue;
      if (!isPlainObject(s) || s['default'] === undefined) continue;
      if (!Object.hasOwn(value, k) || (value[k] === null && s['nullable'] !== true)) value[k] = structuredClone(s['default']);
    }
    for (const [k, v] of Object.entries(value)) {
      if (root && ROOT_META.has(k)) continue;
      const sub = Object.hasOwn(props, k) ? props[k] : isPlainObject(schema['additionalProperties']) ? (schema['additionalProperties'] as Obj) : undefined;
      applySchemaDefaults(v, sub, false);
    }
  } else if (Array.isArray(value) && isPlainObject(schema['items'])) {
    for (const v of value) applySchemaDefaults(v, schema['items'] as Obj, false);
  }
}

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function show(v: unknown): string {
  return typeof v === 'string' ? `"${v}"` : JSON.stringify(v);
}

export function validate(value: unknown, schema: Obj | undefined, path = '', causes: StatusCause[] = []): StatusCause[] {
  if (!schema) return causes;
  const field = path || '<root>';
  if (value === null) {
    if (schema['nullable'] !== true && schema['type'] !== undefined) {
      causes.push({ reason: 'FieldValueInvalid', message: `Invalid value: "null": ${field} in body must be of type ${String(schema['type'])}: "null"`, field });
    }
    return causes;
  }
  const t = schema['type'];
  const actual = typeOf(value);
  if (schema['x-kubernetes-int-or-string'] === true) {
    if (actual !== 'integer' && actual !== 'string') {
      causes.push({ reason: 'FieldValueInvalid', message: `Invalid value: ${show(value)}: ${field} in body must be of type integer,string: "${actual}"`, field });
    }
  } else if (typeof t === 'string' && !(t === actual || (t === 'number' && actual === 'integer'))) {
    causes.push({ reason: 'FieldValueInvalid', message: `Invalid value: "${actual}": ${field} in body must be of type ${t}: "${actual}"`, field });
    return causes;
  }
  if (Array.isArray(schema['enum']) && !schema['enum'].some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    const supported = (schema['enum'] as unknown[]).map(show).join(', ');
    causes.push({ reason: 'FieldValueNotSupported', message: `Unsupported value: ${show(value)}: supported values: ${supported}`, field });
  }
  if (isPlainObject(value)) {
    for (const r of Array.isArray(schema['required']) ? (schema['required'] as string[]) : []) {
      if (!Object.hasOwn(value, r)) {
        const f = path ? `${path}.${r}` : r;
        causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: f });
      }
    }
    const props = isPlainObject(schema['properties']) ? (schema['properties'] as Record<string, Obj>) : {};
    for (const [k, v] of Object.entries(value)) {
      if (!path && ROOT_META.has(k)) continue;
      const sub = props[k] ?? (isPlainObject(schema['additionalProperties']) ? (schema['additionalProperties'] as Obj) : undefined);
      validate(v, sub, path ? `${path}.${k}` : k, causes);
    }
  } else if (Array.isArray(value) && isPlainObject(schema['items'])) {
    value.forEach((v, i) => validate(v, schema['items'] as Obj, `${path}[${i}]`, causes));
  }
  return causes;
}
