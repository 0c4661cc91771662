/**
 * Custom resources' schemas from their CustomResourceDefinitions (the
 * structural `openAPIV3Schema` of each served version), as the API server
 * publishes them: `metadata` is ObjectMeta, `apiVersion` and `kind` strings.
 * {@link CrdSchemaStore} keeps the CRDs a replica's informer sees, or the
 * ones a `portal test` suite lists among its resources.
 *
 * Conversion is bounded (schema-node.ts): a hostile CRD costs at most
 * MAX_SCHEMA_NODES nodes, once per CRD change, never per rule or request.
 * Pure: no I/O.
 */
import { builtinSchemas, staticSource, type KindSchema, type KindSchemaSource } from './catalogue.ts';
import { BUILTIN_CATALOGUE } from './builtin.generated.ts';
import { compactOpenApi, type Shape } from './schema-node.ts';

const OBJECT_META = 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

export interface CrdSchemas {
  schemas: KindSchema[];
  /** Versions whose schema was over the conversion bounds (their excess is unchecked). */
  truncated: string[];
}

/** The served versions of a CRD object and their schemas; none when it is not a CRD with a group and kind. */
export function crdKindSchemas(crd: unknown): CrdSchemas {
  const out: CrdSchemas = { schemas: [], truncated: [] };
  if (!isObj(crd) || !isObj(crd['spec'])) return out;
  const spec = crd['spec'];
  const names = isObj(spec['names']) ? spec['names'] : {};
  const group = spec['group'];
  const kind = names['kind'];
  const resource = names['plural'];
  if (typeof group !== 'string' || typeof kind !== 'string' || typeof resource !== 'string') return out;
  const versions = Array.isArray(spec['versions']) ? spec['versions'] : [];
  for (const v of versions.slice(0, 64)) {
    if (!isObj(v) || typeof v['name'] !== 'string' || v['served'] === false) continue;
    const schema = isObj(v['schema']) ? v['schema']['openAPIV3Schema'] : undefined;
    const budget = { nodes: 0, truncated: false };
    const compact = compactOpenApi(schema, () => undefined, budget);
    if (budget.truncated) out.truncated.push(v['name']);
    const base: Shape = typeof compact === 'string' ? { u: 1 } : compact;
    const root: Shape = { ...base, p: { ...(base.p ?? {}), apiVersion: 'string', kind: 'string', metadata: OBJECT_META } };
    out.schemas.push({ group, version: v['name'], kind, resource, root, components: BUILTIN_CATALOGUE.components as Record<string, Shape | string> });
  }
  return out;
}

/** The CRDs seen so far (keyed by the CRD's name), as a schema source. */
export class CrdSchemaStore implements KindSchemaSource {
  readonly #crds = new Map<string, KindSchema[]>();
  #source: KindSchemaSource = staticSource([]);
  #generation = 0;

  /** Changes whenever the answers may (a CRD added, changed or removed). */
  get generation(): number {
    return this.#generation;
  }

  /** Adds or replaces a CRD. */
  set(name: string, crd: unknown): void {
    const { schemas } = crdKindSchemas(crd);
    // A CRD for a built-in group/kind cannot be created; never let one shadow the catalogue.
    const own = schemas.filter((s) => builtinSchemas().schemasOf(s.group, s.kind) === undefined);
    if (own.length > 0) this.#crds.set(name, own);
    else this.#crds.delete(name);
    this.#rebuild();
  }

  delete(name: string): void {
    if (this.#crds.delete(name)) this.#rebuild();
  }

  get size(): number {
    return this.#crds.size;
  }

  schemasOf(group: string, kind: string): readonly KindSchema[] | undefined {
    return this.#source.schemasOf(group, kind);
  }

  kindsOfResource(group: string, resource: string): readonly KindSchema[] | undefined {
    return this.#source.kindsOfResource(group, resource);
  }

  #rebuild(): void {
    this.#generation++;
    this.#source = staticSource([...this.#crds.values()].flat());
  }
}
