/**
 * The compact form of a kind's schema that the type checks read (issue 33
 * item 1): only what decides whether a field can exist — properties, the
 * values of a map, the items of a list, and where anything goes. Built-in
 * kinds come from a generated catalogue in this form (builtin.generated.ts,
 * scripts/gen-kind-schemas.mjs); a CRD's structural schema is converted at
 * run time with {@link compactOpenApi}.
 *
 * A type is a token (`string`, `integer`, `number`, `boolean`: a scalar
 * with no fields; `any`: anything, not checked), the name of a shared
 * component, or a shape. Pure: no I/O.
 */

/** A type: a scalar token, `any`, a component name, or a shape. */
/** The generated catalogue's form: `[group, version, kind, resource, component]` rows and the components. */
export interface BuiltinCatalogue {
  kinds: [group: string, version: string, kind: string, resource: string, component: string][];
  components: Record<string, TypeRef>;
}

export type TypeRef = string | Shape;

export interface Shape {
  /** Properties (a closed object unless `u`). */
  p?: Record<string, TypeRef>;
  /** The values of a map (`additionalProperties`). */
  a?: TypeRef;
  /** The items of a list. */
  i?: TypeRef;
  /** 1: fields beyond `p` are allowed (`x-kubernetes-preserve-unknown-fields`). */
  u?: 1;
}

export const SCALARS: ReadonlySet<string> = new Set(['string', 'integer', 'number', 'boolean']);
export const ANY = 'any';

/** What a type is, once its component name is resolved. */
export type Resolved =
  | { kind: 'any' }
  | { kind: 'scalar'; type: string }
  | { kind: 'shape'; shape: Shape };

const ANY_RESOLVED: Resolved = Object.freeze({ kind: 'any' });

/** Resolves a type against its components; an unknown component is `any` (never a false refusal). */
export function resolveType(t: TypeRef | undefined, components: Readonly<Record<string, Shape | string>>): Resolved {
  let cur: TypeRef | undefined = t;
  // Components may name components; a cycle or a long chain is `any`.
  for (let i = 0; i < 8; i++) {
    if (cur === undefined || cur === ANY) return ANY_RESOLVED;
    if (typeof cur !== 'string') return { kind: 'shape', shape: cur };
    if (SCALARS.has(cur)) return { kind: 'scalar', type: cur };
    cur = Object.hasOwn(components, cur) ? components[cur] : undefined;
  }
  return ANY_RESOLVED;
}

/**
 * Bounds of a conversion: a CRD's schema is written by whoever may create
 * CRDs and can be as large as an object in etcd (~1.5 MiB). Past the bounds
 * the rest is `any` (unchecked, never refused) and `truncated` says so.
 */
export interface ConvertBudget {
  /** Schema nodes visited so far (shared across one conversion). */
  nodes: number;
  truncated: boolean;
}

/** A CRD's schema has at most ~60k nodes in 1.5 MiB; 20k covers the largest real ones (Prometheus' ~9k). */
export const MAX_SCHEMA_NODES = 20_000;
/** Kubernetes' own structural schemas nest < 20 levels; deeper is cut. */
export const MAX_SCHEMA_DEPTH = 64;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * An OpenAPI v3 schema (a CRD's `openAPIV3Schema`, or a component of
 * `/openapi/v3`) in compact form. `ref` names the component a `$ref` points
 * to (undefined: unknown, treated as `any`).
 */
export function compactOpenApi(schema: unknown, ref: (r: string) => string | undefined, budget: ConvertBudget = { nodes: 0, truncated: false }, depth = 0): TypeRef {
  if (!isObj(schema)) return ANY;
  if (++budget.nodes > MAX_SCHEMA_NODES || depth > MAX_SCHEMA_DEPTH) {
    budget.truncated = true;
    return ANY;
  }
  if (typeof schema['$ref'] === 'string') return ref(schema['$ref']) ?? ANY;
  const all = schema['allOf'];
  if (Array.isArray(all) && all.length === 1 && !isObj(schema['properties'])) return compactOpenApi(all[0], ref, budget, depth + 1);
  if (schema['x-kubernetes-int-or-string'] === true) return 'string';
  const preserve = schema['x-kubernetes-preserve-unknown-fields'] === true;
  const type = schema['type'];
  if (type === 'array') return { i: compactOpenApi(schema['items'], ref, budget, depth + 1) };
  if (typeof type === 'string' && SCALARS.has(type)) return type;
  const props = schema['properties'];
  const additional = schema['additionalProperties'];
  if (isObj(props)) {
    const p: Record<string, TypeRef> = {};
    for (const [k, v] of Object.entries(props)) p[k] = compactOpenApi(v, ref, budget, depth + 1);
    const shape: Shape = { p };
    if (isObj(additional)) shape.a = compactOpenApi(additional, ref, budget, depth + 1);
    if (preserve || additional === true) shape.u = 1;
    return shape;
  }
  if (isObj(additional)) return { a: compactOpenApi(additional, ref, budget, depth + 1) };
  // No properties: an open object (preserve-unknown-fields, or a schema that says nothing).
  return ANY;
}
