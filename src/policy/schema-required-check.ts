/**
 * A rule's JSON Schema (`validate.schema`) checked against the schemas of the
 * kinds it matches (issue 33 item 1): a `required` property that no matched
 * kind can have makes every object fail the rule — a typo
 * (`required: [replcas]`) that would deny every write. Walked along
 * `properties`, `items`, `additionalProperties`, `allOf` and `then`/`else`.
 * Not under `anyOf`/`oneOf`/`not`/`if`: there a requirement that cannot hold
 * only rules a branch out, it does not fail every object. Other keywords
 * under a misspelt property apply to nothing and are harmless.
 *
 * Separate from the compiler (compiler.ts owns the schema's bounds, which
 * keep this walk small: at most MAX_SCHEMA_BYTES of schema). Pure: no I/O.
 */
import { element, join, selectField, type FieldProblem, type Followed } from './cel/field-check.ts';

/** Deeper than this, the walk stops (the compiler bounds depth too). */
const MAX_DEPTH = 64;
/**
 * Schema nodes visited at most: a rule arrives as JSON (no shared subtrees),
 * but a YAML file for `portal test` may alias one subtree many times.
 */
const MAX_NODES = 100_000;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The required properties of `schema` that no type of `root` can have. */
export function requiredProblems(schema: unknown, root: Followed): FieldProblem[] {
  const problems: FieldProblem[] = [];
  walk(schema, root, problems, 0, { nodes: 0 });
  return problems;
}

function walk(schema: unknown, at: Followed | undefined, problems: FieldProblem[], depth: number, budget: { nodes: number }): void {
  if (!isObj(schema) || at === undefined || depth > MAX_DEPTH || ++budget.nodes > MAX_NODES) return;
  const required = schema['required'];
  if (Array.isArray(required)) {
    for (const r of required) {
      if (typeof r === 'string' && selectField(at, r) === 'missing' && !problems.some((p) => p.path === join(at.path, r))) problems.push({ path: join(at.path, r), kinds: [...new Set(at.types.map((t) => t.label))] });
    }
  }
  const props = schema['properties'];
  if (isObj(props)) {
    for (const [k, sub] of Object.entries(props)) {
      const next = selectField(at, k);
      if (next !== 'missing') walk(sub, next, problems, depth + 1, budget);
    }
  }
  if (isObj(schema['items'])) walk(schema['items'], element(at, 'item'), problems, depth + 1, budget);
  if (isObj(schema['additionalProperties'])) walk(schema['additionalProperties'], element(at, 'value'), problems, depth + 1, budget);
  const all = schema['allOf'];
  if (Array.isArray(all)) for (const s of all) walk(s, at, problems, depth + 1, budget);
  for (const key of ['then', 'else'] as const) walk(schema[key], at, problems, depth + 1, budget);
}
