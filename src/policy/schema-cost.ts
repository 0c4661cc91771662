/**
 * The apply-time cost estimate of a rule's JSON Schema, in the spirit of the
 * API server's CEL cost estimate: every keyword counts once for each value
 * of the object it can apply to, not once. A keyword under `properties`
 * applies to one value; under `items` (or `contains`, `additionalProperties`,
 * `patternProperties`, ...) to every element or member, and nested ones
 * multiply. Without a schema for the object, the number of elements is what
 * the largest object can hold: the API server refuses bodies over 3 MiB and
 * an element takes at least 2 bytes (`0,`), a member 5 (`"":0,`). A
 * `maxItems` beside `items` lowers it (ajv checks `maxItems` first and,
 * stopping at the first error, never runs `items` on a longer list).
 * A keyword holding a list of values (`enum`, `required`) counts each.
 * `$ref`s count by their references (the schema is walked as expanded; the
 * expanded-size bound of schema-bounds.ts keeps that walk to at most 20,000
 * subschemas), and a recursive type counts its keywords once per value of
 * the object.
 *
 * Not weighed: what one check costs beyond a constant. `uniqueItems`
 * compares up to 256·255/2 pairs of items (MAX_UNIQUE_ITEMS), and `const`
 * or `enum` compare whole values; the evaluation deadline bounds those
 * (test/hostile/eval-deadline.test.ts runs the heaviest such rule).
 *
 * Issue 31: a 5 KB schema, a `$defs` of `allOf` 100 × `{minLength: 0}`
 * referenced 150 times on `spec.containers[].args.items`, is ~15,000
 * keywords (under the expanded-size bound) but ~2.4·10^10 keyword checks on
 * a Pod with the most `args` a request can carry; it is refused here.
 */
import { children, isSchemaObject, refOf, resolve, type Json, type Reach } from './schema-walk.ts';

/** 3 MiB: the API server refuses request bodies over 3 MiB, so no object it stores or sends is larger (admission/limits.ts). */
export const MAX_OBJECT_BYTES = 3 * 1024 * 1024;
/** The most elements of all arrays of one object together: each takes at least 2 bytes (`0,`). 1,572,864. */
export const MAX_ELEMENTS = MAX_OBJECT_BYTES / 2;
/** The most members of all objects of one object together: each takes at least 5 bytes (`"":0,`). */
export const MAX_MEMBERS = Math.floor(MAX_OBJECT_BYTES / 5);

/**
 * 1,000,000,000 keyword checks per object. It refuses multiplication, not
 * slowness (the evaluation deadline stops a slow rule): the shipped rules
 * estimate at most 2.4·10^8 (disallow-host-probes: 166 keywords, each under
 * `containers[]` counting 1,572,864 times; test/policy/schema-cost.test.ts
 * checks them all), leaving 4x headroom for rules of their kind, while the
 * issue's schema estimates 2.4·10^10. A rule over it needs a `maxItems`
 * beside the `items` it descends into, or fewer keywords there.
 */
export const MAX_SCHEMA_COST = 1_000_000_000;

/** A schema's estimated cost and the part of the object that weighs most in it. */
export interface SchemaCost {
  /** Keyword checks per object, at most. */
  cost: number;
  /** Where in the object (`spec.containers[].args[]`) the most checks apply. */
  heaviest: { path: string; cost: number; keywords: number; values: number };
}

function fanOut(node: Record<string, Json>, reach: Reach): number {
  if (reach === 'elements') {
    const max = node['maxItems'];
    return typeof max === 'number' && Number.isInteger(max) && max >= 0 ? Math.min(max, MAX_ELEMENTS) : MAX_ELEMENTS;
  }
  return reach === 'members' ? MAX_MEMBERS : 1;
}

function dataPath(parent: string, reach: Reach, key: string): string {
  if (reach === 'elements') return `${parent}[]`;
  if (reach === 'members') return `${parent}.*`;
  if (reach === 'one') return /^\d+$/.test(key) ? `${parent}[${key}]` : parent ? `${parent}.${key}` : key;
  return parent;
}

/** Keywords whose array value lists subschemas (walked as children), not values each checked. */
const SUBSCHEMA_LISTS: ReadonlySet<string> = new Set(['allOf', 'anyOf', 'oneOf', 'prefixItems', 'items']);

/**
 * A schema's own checks: one per keyword, except that a keyword holding a
 * list of values (`enum`, `required`, a `type` list) checks each of them
 * (an `enum` of 5,000 entries is 5,000 comparisons, not one).
 */
function weight(node: Record<string, Json>): number {
  let n = 0;
  for (const [k, v] of Object.entries(node)) n += Array.isArray(v) && !SUBSCHEMA_LISTS.has(k) ? Math.max(1, v.length) : 1;
  return Math.max(1, n);
}

/** The estimated cost of a schema that passed the expanded-size bound (schema-bounds.ts). */
export function schemaCost(root: Json): SchemaCost {
  // Checks per part of the object, keyed by its path, and how many values the path stands for.
  const byPath = new Map<string, { cost: number; values: number }>();
  const active = new Set<object>();
  const charged = new Set<object>();

  const walk = (node: Json, values: number, path: string): number => {
    const keywords = isSchemaObject(node) ? weight(node) : 1;
    let n = keywords * values;
    const at = byPath.get(path) ?? { cost: 0, values };
    at.cost += n;
    byPath.set(path, at);
    if (!isSchemaObject(node)) return n;
    for (const { child, reach, key } of children(node, false)) {
      n += walk(child, Math.min(values * fanOut(node, reach), MAX_ELEMENTS), dataPath(path, reach, key));
    }
    const ref = refOf(node);
    const target = ref === undefined ? undefined : resolve(root, ref);
    if (!isSchemaObject(target)) return n;
    if (active.has(target)) {
      // A recursive type: it runs at most once per value of the object, so
      // count its keywords once, at every value.
      if (charged.has(target)) return n;
      charged.add(target);
      return n + walk(target, MAX_ELEMENTS, `${path}…`);
    }
    active.add(target);
    try {
      return n + walk(target, values, path);
    } finally {
      active.delete(target);
    }
  };
  if (isSchemaObject(root)) active.add(root);
  const cost = walk(root, 1, '');
  let heaviest = { path: '', cost: 0, keywords: 0, values: 1 };
  for (const [path, at] of byPath) {
    if (at.cost > heaviest.cost) heaviest = { path, cost: at.cost, keywords: Math.round(at.cost / at.values), values: at.values };
  }
  return { cost, heaviest };
}

/** Why a schema's estimated cost is over {@link MAX_SCHEMA_COST}, or undefined. */
export function schemaCostProblem(schema: Json): string | undefined {
  const { cost, heaviest } = schemaCost(schema);
  if (cost <= MAX_SCHEMA_COST) return undefined;
  const where = heaviest.path === '' ? 'the object itself' : heaviest.path;
  return (
    `validate.schema's estimated cost is ${cost.toExponential(2)} keyword checks per object, more than the ${MAX_SCHEMA_COST.toExponential(0)} allowed (the cost bound): ` +
    `most of it is ${heaviest.keywords.toLocaleString('en-US')} keywords applied to each of up to ${heaviest.values.toLocaleString('en-US')} values at ${where}; ` +
    'give the arrays it descends into a "maxItems", or check fewer keywords there'
  );
}
