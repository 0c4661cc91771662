/**
 * Compile-time bounds on the work a rule's JSON Schema can ask for per
 * object, checked before ajv sees it (compiler.ts's schemaGuardProblem, so
 * the apply-time check refuses such a rule too).
 *
 * - Expansion. ajv compiles each `$ref` target once, but validation runs it
 *   at every reference: a 3 KB schema of 40 levels of `allOf`, each with two
 *   `$ref`s to the level below, runs 2^40 subschemas on every object. The
 *   schema's expanded size (its subschemas with every `$ref` replaced by its
 *   target, counted without building anything, each target's size computed
 *   once) must stay under {@link MAX_EXPANDED_SCHEMA}. A reference back to a
 *   schema being expanded is a recursion over the object's own nesting
 *   (a tree type), counted once; one that comes back without descending
 *   into the object (`{"allOf": [{"$ref": "#"}]}`) would never end and is
 *   refused.
 * - Cost. Within that size, every keyword counts once per value of the
 *   object it can apply to (schema-cost.ts): a keyword under `items` counts
 *   for every element the largest object can hold.
 * - `uniqueItems: true` compares every pair of items: only together with a
 *   `maxItems` of at most {@link MAX_UNIQUE_ITEMS} in the same schema. ajv
 *   (with allErrors) would still compare the pairs of a longer list after
 *   `maxItems` failed, so the compiled copy checks uniqueness only when
 *   `maxItems` holds ({@link guardUniqueItems}).
 */
import { schemaCostProblem } from './schema-cost.ts';
import { children, DEFINITIONS, DESCEND_MANY, DESCEND_MAP, DESCEND_ONE, IN_PLACE_MANY, IN_PLACE_MAP, IN_PLACE_ONE, isSchemaObject, refOf, resolve, type Json, type Schema } from './schema-walk.ts';

/**
 * 20,000 (keywords of the subschemas, as expanded): the largest shipped rule
 * schema expands to 166 (disallow-host-probes; test/policy/schema-bounds.test.ts
 * checks every shipped one), and a schema without references, at most
 * 64 KiB, holds at most ~10,000 keywords, so only reference expansion can
 * reach the bound; it leaves room for heavy reuse through `$defs` while
 * keeping the checks applied to any one value of the object in the tens of
 * thousands, not 2^40.
 */
export const MAX_EXPANDED_SCHEMA = 20_000;

/**
 * 256 items: ajv checks `uniqueItems` by comparing every pair, n(n−1)/2
 * comparisons, 32,640 at 256 (a few milliseconds for items of a few
 * fields). Each comparison walks the two items, so the worst case is still
 * ~n/2 passes over the list's content, which the evaluation deadline bounds;
 * 25,000 items without a bound took 21.7 s (issue 16).
 */
export const MAX_UNIQUE_ITEMS = 256;

class Refused extends Error {}

/**
 * The expanded size of a schema: each subschema counts its keywords (at
 * least 1), each `$ref` adds its target's expanded size. Stops (returns a
 * number above `bound`) as soon as the size exceeds `bound`. Throws Refused
 * for a reference cycle that does not descend into the value.
 */
function expandedSize(root: Json, bound: number): number {
  const memo = new Map<object, number>();
  // Targets being expanded, with the descent depth at which each was entered.
  const active = new Map<object, number>();

  const size = (node: Json, depth: number): number => {
    if (!isSchemaObject(node)) return 1;
    let n = Math.max(1, Object.keys(node).length);
    for (const { child, descends } of children(node, false)) {
      n += size(child, descends ? depth + 1 : depth);
      if (n > bound) return n;
    }
    const ref = refOf(node);
    if (ref !== undefined) {
      const target = resolve(root, ref);
      if (target !== undefined && isSchemaObject(target)) {
        const entered = active.get(target);
        if (entered !== undefined) {
          if (entered === depth) throw new Refused(`"$ref": "${ref}" refers back to a schema it is part of without descending into the value, which would never end`);
          n += 1; // a recursion over the value's own nesting
        } else {
          let t = memo.get(target);
          if (t === undefined) {
            active.set(target, depth);
            try {
              t = size(target, depth);
            } finally {
              active.delete(target);
            }
            memo.set(target, t);
          }
          n += t;
        }
      }
    }
    return n;
  };
  if (isSchemaObject(root)) active.set(root, 0);
  return size(root, 0);
}

/** Every subschema (definitions included), with its JSON Pointer-like path for messages. */
function eachSchema(root: Json, visit: (s: Schema, path: string) => void): void {
  const stack: { node: Json; path: string }[] = [{ node: root, path: '' }];
  const seen = new Set<object>();
  while (stack.length > 0) {
    const { node, path } = stack.pop() as { node: Json; path: string };
    if (!isSchemaObject(node) || seen.has(node)) continue;
    seen.add(node);
    visit(node, path);
    for (const [k, v] of Object.entries(node)) {
      if (Array.isArray(v) && (IN_PLACE_MANY.includes(k) || DESCEND_MANY.includes(k))) v.forEach((c, i) => stack.push({ node: c, path: `${path}/${k}/${i}` }));
      else if ([...IN_PLACE_MAP, ...DESCEND_MAP, ...DEFINITIONS].includes(k) && isSchemaObject(v)) {
        for (const [name, c] of Object.entries(v)) stack.push({ node: c, path: `${path}/${k}/${name}` });
      } else if ([...IN_PLACE_ONE, ...DESCEND_ONE].includes(k)) stack.push({ node: v, path: `${path}/${k}` });
    }
  }
}

/** Why a schema asks for unbounded work (the bound named), or undefined. */
export function schemaBoundProblem(schema: Json): string | undefined {
  let unique: string | undefined;
  eachSchema(schema, (s, path) => {
    if (unique !== undefined || s['uniqueItems'] !== true) return;
    const max = s['maxItems'];
    if (typeof max !== 'number' || !Number.isInteger(max) || max > MAX_UNIQUE_ITEMS) {
      unique = `validate.schema${path ? ` at ${path}` : ''}: "uniqueItems": true needs "maxItems" of at most ${MAX_UNIQUE_ITEMS} beside it (every pair of items is compared)${typeof max === 'number' ? `, not ${max}` : ''}`;
    }
  });
  if (unique !== undefined) return unique;
  let n: number;
  try {
    n = expandedSize(schema, MAX_EXPANDED_SCHEMA);
  } catch (e) {
    if (e instanceof Refused) return `validate.schema: ${e.message}`;
    throw e;
  }
  if (n > MAX_EXPANDED_SCHEMA) {
    return `validate.schema expands to more than ${MAX_EXPANDED_SCHEMA} subschemas once its "$ref"s are followed (the expanded-size bound); reference fewer schemas from each level`;
  }
  // Only a schema within the expanded-size bound is walked as expanded.
  return schemaCostProblem(schema);
}

/**
 * Rewrites (in place: call it on a private copy) every `uniqueItems: true`
 * beside a `maxItems: N` into `allOf: [… {if: {maxItems: N}, then:
 * {uniqueItems: true}}]`, so that a list longer than N fails `maxItems`
 * without its N² comparisons. The errors are the same (`if`/`allOf` are
 * wrappers schema-errors.ts leaves out).
 */
export function guardUniqueItems(schema: Json): void {
  const found: Schema[] = [];
  eachSchema(schema, (s) => {
    if (s['uniqueItems'] === true && typeof s['maxItems'] === 'number') found.push(s);
  });
  for (const s of found) {
    const max = s['maxItems'];
    delete s['uniqueItems'];
    const guard = { if: { maxItems: max }, then: { uniqueItems: true } };
    s['allOf'] = Array.isArray(s['allOf']) ? [...(s['allOf'] as Json[]), guard] : [guard];
  }
}

/** The expanded size of a schema (for tests and the docs' figures). */
export function schemaExpandedSize(schema: Json): number {
  return expandedSize(schema, Number.POSITIVE_INFINITY);
}
