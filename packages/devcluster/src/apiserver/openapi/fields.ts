/**
 * Unknown fields, as kube-apiserver's strict decoding finds them: every key
 * the type's schema does not declare, by its JSON path
 * (`spec.containers[0].foo`). Unknown fields are always dropped (a Go struct
 * cannot hold them; a structural schema prunes them); `fieldValidation`
 * decides whether that is silent (Ignore), a warning (Warn, the server's
 * default) or a 400 (Strict, what kubectl asks for).
 */
import { isPlainObject, type Obj } from '../types.ts';
import type { TypeModel } from './model.ts';

export type FieldValidation = 'Ignore' | 'Warn' | 'Strict';

/** The query's fieldValidation; kube-apiserver defaults to Warn. */
export function fieldValidation(query: URLSearchParams): FieldValidation {
  const v = query.get('fieldValidation');
  return v === 'Ignore' || v === 'Strict' ? v : 'Warn';
}

/** Removes the fields `model` does not declare from `value`; returns their paths in document order. */
export function dropUnknownFields(model: TypeModel, value: unknown, style: PathStyle = 'json'): string[] {
  const found: string[] = [];
  walk(model, model.root, value, '', found, style);
  return found;
}

/**
 * `json`: the decoder's `spec.containers[0].foo`; `smd`: structured-merge-diff's
 * `.spec.containers[name="c"].foo` (list-map items by their keys), as server-side apply reports them.
 */
export type PathStyle = 'json' | 'smd';

function itemLabel(schema: Obj, item: unknown, i: number, style: PathStyle): string {
  const keys = schema['x-kubernetes-list-map-keys'];
  if (style === 'json' || schema['x-kubernetes-list-type'] !== 'map' || !Array.isArray(keys) || !isPlainObject(item)) return `[${i}]`;
  return `[${(keys as string[]).filter((k) => item[k] !== undefined).map((k) => `${k}=${JSON.stringify(item[k])}`).join(',')}]`;
}

function walk(model: TypeModel, schemaIn: Obj | undefined, value: unknown, path: string, found: string[], style: PathStyle): void {
  const schema = model.resolve(schemaIn);
  if (!schema) return;
  if (Array.isArray(value)) {
    const items = isPlainObject(schema['items']) ? schema['items'] : undefined;
    if (items) value.forEach((v, i) => walk(model, items, v, `${path}${itemLabel(schema, v, i, style)}`, found, style));
    return;
  }
  if (!isPlainObject(value) || schema['x-kubernetes-int-or-string'] === true) return;
  const preserve = schema['x-kubernetes-preserve-unknown-fields'] === true;
  const props = isPlainObject(schema['properties']) ? schema['properties'] : undefined;
  const addl = schema['additionalProperties'];
  if (!props && addl === undefined && (preserve || schema['type'] !== 'object')) return;
  for (const k of Object.keys(value)) {
    const sub = props && Object.hasOwn(props, k) ? props[k] : isPlainObject(addl) ? addl : undefined;
    const p = path || style === 'smd' ? `${path}.${k}` : k;
    if (sub !== undefined) walk(model, sub as Obj, value[k], p, found, style);
    else if (addl === true || preserve) continue;
    else {
      found.push(p);
      delete value[k];
    }
  }
}

/** kube-apiserver's decoding error for a strict request with unknown or duplicate fields (`unknown field "spec.foo"`, ...). */
export function strictDecodingMessage(kind: string, version: string, problems: readonly string[]): string {
  return `${kind} in version "${version}" cannot be handled as a ${kind}: strict decoding error: ${problems.join(', ')}`;
}
