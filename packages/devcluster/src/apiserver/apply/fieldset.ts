/**
 * Field sets as structured-merge-diff defines them, over plain JSON and an
 * OpenAPI schema: the paths a value sets (`f:` fields, `k:{...}` items of
 * list-maps, `v:` items of sets), their FieldsV1 encoding, the printed path
 * form of conflict messages, and the merge and removal server-side apply
 * performs. Pure: no I/O, no clock.
 *
 * A path is a list of path elements in their FieldsV1 spelling; a set holds
 * the paths that are members (leaves, list items, map entries), not the
 * containers on the way to them, exactly as FieldsV1 `".": {}` marks them.
 */
import { isPlainObject, jsonEqual, type Obj } from '../types.ts';

/** How to read a schema: follow `$ref`s. `undefined` schemas are untyped (maps granular, lists atomic). */
export interface SchemaNav {
  resolve(s: Obj | undefined): Obj | undefined;
}

const SEP = '\u0000';

export type PathKey = string;

export function pathKey(elements: readonly string[]): PathKey {
  return elements.join(SEP);
}

export function pathElements(key: PathKey): string[] {
  return key === '' ? [] : key.split(SEP);
}

/** Defaults of list-map key fields that clients may omit (kube's schemas declare them). */
const KEY_DEFAULTS: Readonly<Record<string, unknown>> = { protocol: 'TCP' };

type ListKind = { type: 'map'; keys: string[] } | { type: 'set' } | { type: 'atomic' };

function listKind(schema: Obj | undefined): ListKind {
  const t = schema?.['x-kubernetes-list-type'];
  if (t === 'map' && Array.isArray(schema?.['x-kubernetes-list-map-keys'])) return { type: 'map', keys: schema['x-kubernetes-list-map-keys'] as string[] };
  if (t === 'set') return { type: 'set' };
  return { type: 'atomic' };
}

function isAtomicObject(schema: Obj | undefined): boolean {
  return schema?.['x-kubernetes-map-type'] === 'atomic' || schema?.['x-kubernetes-int-or-string'] === true;
}

function itemKey(item: unknown, keys: readonly string[]): string {
  const o: Obj = {};
  for (const k of [...keys].sort()) {
    const v = isPlainObject(item) && item[k] !== undefined ? item[k] : KEY_DEFAULTS[k];
    if (v !== undefined) o[k] = v;
  }
  return `k:${JSON.stringify(o)}`;
}

function childSchema(nav: SchemaNav, schema: Obj | undefined, key: string): { schema: Obj | undefined; declared: boolean } {
  const props = schema && isPlainObject(schema['properties']) ? schema['properties'] : undefined;
  if (props && Object.hasOwn(props, key)) return { schema: nav.resolve(props[key] as Obj), declared: true };
  const addl = schema?.['additionalProperties'];
  return { schema: isPlainObject(addl) ? nav.resolve(addl) : undefined, declared: false };
}

export interface Member {
  /** Scalars, atomic values and empty maps: their value is what conflicts compare. */
  leaf: boolean;
  value: unknown;
  /**
   * A non-empty map (not a struct) that is no member by itself. An Update
   * that adds it owns it too (FieldsV1 `".": {}` under `f:labels`), as
   * structured-merge-diff's comparison reports the added map; an Apply never.
   */
  container?: true;
}

/** Every member path of `value` with its value (structured-merge-diff's ToFieldSet). */
export function members(nav: SchemaNav, root: Obj | undefined, value: unknown): Map<PathKey, Member> {
  const out = new Map<PathKey, Member>();
  visit(nav, nav.resolve(root), value, '', out);
  return out;
}

/** Paths are built as strings on the way down (this runs on every write). */
function join(prefix: PathKey, element: string): PathKey {
  return prefix === '' ? element : `${prefix}${SEP}${element}`;
}

function visit(nav: SchemaNav, schema: Obj | undefined, value: unknown, path: PathKey, out: Map<PathKey, Member>): void {
  if (Array.isArray(value)) {
    const kind = listKind(schema);
    if (kind.type === 'atomic') {
      out.set(path, { leaf: true, value });
      return;
    }
    const items = schema && isPlainObject(schema['items']) ? nav.resolve(schema['items']) : undefined;
    for (const item of value) {
      if (kind.type === 'set') {
        out.set(join(path, `v:${JSON.stringify(item)}`), { leaf: true, value: item });
        continue;
      }
      const p = join(path, itemKey(item, kind.keys));
      visit(nav, items, item, p, out);
      out.set(p, { leaf: false, value: item });
    }
    return;
  }
  if (!isPlainObject(value) || isAtomicObject(schema)) {
    if (path !== '') out.set(path, { leaf: true, value });
    return;
  }
  for (const k in value) {
    const v = value[k];
    const child = childSchema(nav, schema, k);
    const p = join(path, `f:${k}`);
    visit(nav, child.schema, v, p, out);
    if (v === null || (isPlainObject(v) && Object.keys(v).length === 0)) out.set(p, { leaf: true, value: v });
    else if (!child.declared && (out.get(p)?.container ?? !out.has(p))) out.set(p, { leaf: false, value: v });
  }
  if (path !== '' && !(schema && isPlainObject(schema['properties'])) && !out.has(path)) out.set(path, { leaf: false, value, container: true });
}

// ---------------------------------------------------------------- FieldsV1

function elementOrder(e: string): number {
  return '.fkvi'.indexOf(e[0]!);
}

/** The FieldsV1 object of a set of paths. */
export function encodeFieldsV1(paths: Iterable<PathKey>): Obj {
  const root: Obj = {};
  for (const key of paths) {
    let node = root;
    for (const e of pathElements(key)) node = (node[e] ??= {}) as Obj;
    node['.'] = {};
  }
  return finish(root);
}

/** Drops `"."` on nodes without children (a plain `{}` says the same) and sorts as the apiserver does. */
function finish(node: Obj): Obj {
  const keys = Object.keys(node).filter((k) => k !== '.');
  if (keys.length === 0) return {};
  const out: Obj = {};
  if (Object.hasOwn(node, '.')) out['.'] = {};
  keys.sort((a, b) => elementOrder(a) - elementOrder(b) || (a < b ? -1 : a > b ? 1 : 0));
  for (const k of keys) out[k] = finish(node[k] as Obj);
  return out;
}

/** The paths of a FieldsV1 object; anything malformed is skipped. */
export function decodeFieldsV1(fields: unknown): Set<PathKey> {
  const out = new Set<PathKey>();
  const walk = (node: unknown, path: string[]): void => {
    if (!isPlainObject(node)) return;
    const keys = Object.keys(node);
    if (path.length && (keys.length === 0 || Object.hasOwn(node, '.'))) out.add(pathKey(path));
    for (const k of keys) if (k !== '.') walk(node[k], [...path, k]);
  };
  walk(fields, []);
  return out;
}

/** structured-merge-diff's printed path: `.spec.containers[name="nginx"].image`. */
export function pathString(key: PathKey): string {
  let s = '';
  for (const e of pathElements(key)) {
    const body = e.slice(2);
    if (e.startsWith('f:')) s += `.${body}`;
    else if (e.startsWith('k:')) {
      const o = JSON.parse(body) as Obj;
      s += `[${Object.entries(o).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(',')}]`;
    } else if (e.startsWith('v:')) s += `[=${body}]`;
    else s += `[${body}]`;
  }
  return s;
}

// ---------------------------------------------------------------- merge / remove

/**
 * The applied configuration merged into a copy of the live object (lists by
 * their type, maps granular, the rest replaced). The result shares nothing
 * with either input, so removePath may edit it.
 */
export function mergeApplied(nav: SchemaNav, root: Obj | undefined, live: unknown, config: unknown): unknown {
  return merge(nav, nav.resolve(root), structuredClone(live), config);
}

function merge(nav: SchemaNav, schema: Obj | undefined, live: unknown, config: unknown): unknown {
  if (Array.isArray(config)) {
    const kind = listKind(schema);
    if (kind.type === 'atomic' || !Array.isArray(live)) return structuredClone(config);
    if (kind.type === 'set') return [...live, ...config.filter((c) => !live.some((l) => jsonEqual(l, c))).map((c) => structuredClone(c) as unknown)];
    const items = schema && isPlainObject(schema['items']) ? nav.resolve(schema['items']) : undefined;
    const out: unknown[] = [...live];
    for (const c of config) {
      const k = itemKey(c, kind.keys);
      const i = out.findIndex((x) => itemKey(x, kind.keys) === k);
      if (i >= 0) out[i] = merge(nav, items, out[i], c);
      else out.push(structuredClone(c));
    }
    return out;
  }
  if (!isPlainObject(config) || !isPlainObject(live) || isAtomicObject(schema)) return structuredClone(config);
  const out: Obj = { ...live };
  for (const [k, v] of Object.entries(config)) out[k] = merge(nav, childSchema(nav, schema, k).schema, live[k], v);
  return out;
}

/** Removes the member `key` from `obj` (a field, a list-map item or a set value); missing parents are fine. */
export function removePath(nav: SchemaNav, root: Obj | undefined, obj: unknown, key: PathKey): void {
  const elements = pathElements(key);
  let schema = nav.resolve(root);
  let cur: unknown = obj;
  for (let i = 0; i < elements.length; i++) {
    const e = elements[i]!;
    const last = i === elements.length - 1;
    if (e.startsWith('f:')) {
      if (!isPlainObject(cur)) return;
      const name = e.slice(2);
      if (last) {
        delete cur[name];
        return;
      }
      schema = childSchema(nav, schema, name).schema;
      cur = cur[name];
    } else if (Array.isArray(cur)) {
      const kind = listKind(schema);
      const idx = e.startsWith('k:') && kind.type === 'map'
        ? cur.findIndex((x) => itemKey(x, kind.keys) === e)
        : e.startsWith('v:') ? cur.findIndex((x) => `v:${JSON.stringify(x)}` === e) : -1;
      if (idx < 0) return;
      if (last) {
        cur.splice(idx, 1);
        return;
      }
      schema = schema && isPlainObject(schema['items']) ? nav.resolve(schema['items']) : undefined;
      cur = cur[idx];
    } else return;
  }
}
