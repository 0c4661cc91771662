/**
 * The shape of a JSON Schema as the bounds (schema-bounds.ts, schema-cost.ts)
 * walk it: which keywords hold subschemas, whether each applies to the value
 * itself (in place) or to parts of it (descends), and to how many parts
 * (one named part, or every element or member), and local `$ref` targets.
 */
export type Json = unknown;
export type Schema = Record<string, Json>;

/** Keywords whose value is one subschema, applied to the same value (in place) or to a part of it. */
export const IN_PLACE_ONE = ['not', 'if', 'then', 'else'];
export const DESCEND_ONE = ['additionalProperties', 'items', 'contains', 'propertyNames', 'unevaluatedItems', 'unevaluatedProperties', 'additionalItems'];
/** Keywords whose value is an array of subschemas. */
export const IN_PLACE_MANY = ['allOf', 'anyOf', 'oneOf'];
export const DESCEND_MANY = ['prefixItems', 'items'];
/** Keywords whose value maps names to subschemas. */
export const IN_PLACE_MAP = ['dependentSchemas'];
export const DESCEND_MAP = ['properties', 'patternProperties'];
/** Maps of subschemas that apply only through `$ref`. */
export const DEFINITIONS = ['$defs', 'definitions'];

/**
 * What a subschema applies to, relative to its parent's value: the value
 * itself; one part of it (a named property, a tuple position); every element
 * of an array; or every member (or key) of an object.
 */
export type Reach = 'same' | 'one' | 'elements' | 'members';

/** Keywords (holding one subschema, or a map of them) whose subschema applies to every element or every member. */
const EVERY_ELEMENT: ReadonlySet<string> = new Set(['items', 'contains', 'unevaluatedItems', 'additionalItems']);
const EVERY_MEMBER: ReadonlySet<string> = new Set(['additionalProperties', 'propertyNames', 'unevaluatedProperties', 'patternProperties']);

export function isSchemaObject(v: Json): v is Schema {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function reachOf(keyword: string): Reach {
  if (EVERY_ELEMENT.has(keyword)) return 'elements';
  if (EVERY_MEMBER.has(keyword)) return 'members';
  return 'one';
}

/** The direct subschemas of a schema, each with what it applies to (`descends` when not the value itself) and its name or index. */
export function children(s: Schema, withDefinitions: boolean): { child: Json; descends: boolean; reach: Reach; key: string }[] {
  const out: { child: Json; descends: boolean; reach: Reach; key: string }[] = [];
  for (const k of IN_PLACE_ONE) if (k in s) out.push({ child: s[k], descends: false, reach: 'same', key: k });
  for (const k of DESCEND_ONE) if (k in s && !Array.isArray(s[k])) out.push({ child: s[k], descends: true, reach: reachOf(k), key: k });
  for (const k of IN_PLACE_MANY) if (Array.isArray(s[k])) (s[k] as Json[]).forEach((c, i) => out.push({ child: c, descends: false, reach: 'same', key: String(i) }));
  for (const k of DESCEND_MANY) if (Array.isArray(s[k])) (s[k] as Json[]).forEach((c, i) => out.push({ child: c, descends: true, reach: 'one', key: String(i) }));
  for (const k of IN_PLACE_MAP) if (isSchemaObject(s[k])) for (const [name, c] of Object.entries(s[k])) out.push({ child: c, descends: false, reach: 'same', key: name });
  for (const k of DESCEND_MAP) if (isSchemaObject(s[k])) for (const [name, c] of Object.entries(s[k])) out.push({ child: c, descends: true, reach: reachOf(k), key: name });
  if (withDefinitions) for (const k of DEFINITIONS) if (isSchemaObject(s[k])) for (const [name, c] of Object.entries(s[k])) out.push({ child: c, descends: false, reach: 'same', key: name });
  return out;
}

/** The `$ref` (or `$dynamicRef`) of a schema, if any. */
export function refOf(node: Schema): string | undefined {
  return typeof node['$ref'] === 'string' ? node['$ref'] : typeof node['$dynamicRef'] === 'string' ? node['$dynamicRef'] : undefined;
}

/** The target of a local `$ref` ("#", "#/$defs/a", with ~0 ~1 and %-escapes), or undefined. */
export function resolve(root: Json, ref: string): Json | undefined {
  if (!ref.startsWith('#')) return undefined;
  const pointer = ref.slice(1);
  if (pointer === '') return root;
  if (!pointer.startsWith('/')) return undefined;
  let node: Json = root;
  for (const raw of pointer.slice(1).split('/')) {
    let token: string;
    try {
      token = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    } catch {
      return undefined;
    }
    if (Array.isArray(node)) node = node[Number(token)];
    else if (isSchemaObject(node) && Object.hasOwn(node, token)) node = node[token];
    else return undefined;
  }
  return node;
}
