/**
 * Where the type checks find a kind's schema (issue 33 item 1): the
 * built-in kinds from the generated catalogue (builtin.generated.ts, what the
 * dev cluster serves at `/openapi/v3`), custom resources from their CRDs
 * (crd-schemas.ts; a replica keeps them from an informer). Later users (the
 * "lookups") read schemas through the same {@link KindSchemaSource}.
 *
 * Pure: no I/O.
 */
import { BUILTIN_CATALOGUE } from './builtin.generated.ts';
import type { BuiltinCatalogue, Shape, TypeRef } from './schema-node.ts';

export type { BuiltinCatalogue };

/** One served version of a kind and its schema. */
export interface KindSchema {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  /** Plural resource name. */
  readonly resource: string;
  readonly root: TypeRef;
  /** What component names in `root` resolve to. */
  readonly components: Readonly<Record<string, Shape | string>>;
}

export interface KindSchemaSource {
  /**
   * Every served version of `group`/`kind`; undefined when the kind is not
   * known (not served, or not seen yet): a check against it is not done.
   */
  schemasOf(group: string, kind: string): readonly KindSchema[] | undefined;
  /** The kinds served as `group`/`resource` (VAP rules name resources). */
  kindsOfResource(group: string, resource: string): readonly KindSchema[] | undefined;
}

/** `apps/v1 Deployment`, `v1 Pod`: how problems name a kind. */
export function kindLabel(s: Pick<KindSchema, 'group' | 'version' | 'kind'>): string {
  return `${s.group === '' ? '' : `${s.group}/`}${s.version} ${s.kind}`;
}

/** A source over a fixed list of schemas. */
export function staticSource(schemas: readonly KindSchema[]): KindSchemaSource {
  const byKind = new Map<string, KindSchema[]>();
  const byResource = new Map<string, KindSchema[]>();
  const add = (m: Map<string, KindSchema[]>, key: string, s: KindSchema): void => {
    const list = m.get(key);
    if (list) list.push(s);
    else m.set(key, [s]);
  };
  for (const s of schemas) {
    add(byKind, `${s.group}/${s.kind}`, s);
    add(byResource, `${s.group}/${s.resource}`, s);
  }
  return {
    schemasOf: (group, kind) => byKind.get(`${group}/${kind}`),
    kindsOfResource: (group, resource) => byResource.get(`${group}/${resource}`),
  };
}

/** The catalogue's kinds as a source: built once at load (30 rows), read only afterwards. */
const BUILTIN: KindSchemaSource = staticSource(
  BUILTIN_CATALOGUE.kinds.map(([group, version, kind, resource, component]) => ({ group, version, kind, resource, root: component, components: BUILTIN_CATALOGUE.components as Record<string, Shape | string> })),
);

/** The built-in kinds of the generated catalogue. */
export function builtinSchemas(): KindSchemaSource {
  return BUILTIN;
}

/** The first source that knows a kind answers for it (a CRD never shadows a built-in: built-ins come first). */
export function layered(...sources: readonly KindSchemaSource[]): KindSchemaSource {
  return {
    schemasOf: (group, kind) => {
      for (const s of sources) {
        const r = s.schemasOf(group, kind);
        if (r !== undefined) return r;
      }
      return undefined;
    },
    kindsOfResource: (group, resource) => {
      for (const s of sources) {
        const r = s.kindsOfResource(group, resource);
        if (r !== undefined) return r;
      }
      return undefined;
    },
  };
}
