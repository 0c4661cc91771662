/**
 * The type model of a served resource: its OpenAPI v3 schema and the
 * component schemas its `$ref`s point into. One model serves the OpenAPI
 * documents, strict field validation and server-side apply's field sets,
 * for built-ins (openapi/builtin.ts) and custom resources (their CRD's
 * openAPIV3Schema) alike.
 */
import { groupVersion, type ResourceDef } from '../registry.ts';
import { isPlainObject, type Obj } from '../types.ts';
import { builtinComponents, builtinKindComponent, REF_PREFIX } from './builtin.ts';

export interface TypeModel {
  /** Component name of the kind's schema. */
  readonly name: string;
  readonly root: Obj;
  /** Follows `$ref` (and kube's `allOf: [{$ref}]`) to the schema it names. */
  resolve(s: Obj | undefined): Obj | undefined;
  /** Component schemas by name (built-ins plus the custom resource's own). */
  readonly components: ReadonlyMap<string, Obj>;
}

const OBJECT_META = 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta';

/** kube-openapi's name of a custom resource schema: reversed group, version, kind (`dev.portal.v1alpha1.PortalRule`). */
export function crdComponentName(def: ResourceDef): string {
  return `${def.group.split('.').reverse().join('.')}.${def.version}.${def.kind}`;
}

function resolver(components: ReadonlyMap<string, Obj>): (s: Obj | undefined) => Obj | undefined {
  return (s) => {
    let cur = s;
    for (let i = 0; i < 32 && cur; i++) {
      const ref = cur['$ref'];
      if (typeof ref === 'string') {
        cur = components.get(ref.slice(REF_PREFIX.length));
        continue;
      }
      const all = cur['allOf'];
      if (Array.isArray(all) && all.length === 1 && isPlainObject(all[0]) && typeof all[0]['$ref'] === 'string' && !cur['properties']) {
        cur = all[0];
        continue;
      }
      return cur;
    }
    return cur;
  };
}

const crdModels = new WeakMap<ResourceDef, TypeModel | null>();

/** The custom resource's schema as kube publishes it: metadata is ObjectMeta, apiVersion and kind strings. */
function crdModel(def: ResourceDef): TypeModel | undefined {
  const hit = crdModels.get(def);
  if (hit !== undefined) return hit ?? undefined;
  let model: TypeModel | null = null;
  if (def.schema) {
    const props = isPlainObject(def.schema['properties']) ? def.schema['properties'] : {};
    const root: Obj = {
      ...def.schema,
      type: 'object',
      properties: { ...props, apiVersion: { type: 'string' }, kind: { type: 'string' }, metadata: { $ref: `${REF_PREFIX}${OBJECT_META}` } },
      'x-kubernetes-group-version-kind': [{ group: def.group, version: def.version, kind: def.kind }],
    };
    const name = crdComponentName(def);
    const components = new Map(builtinComponents());
    components.set(name, root);
    model = { name, root, components, resolve: resolver(components) };
  }
  crdModels.set(def, model);
  return model ?? undefined;
}

let builtinResolve: ((s: Obj | undefined) => Obj | undefined) | undefined;

export function typeModel(def: ResourceDef): TypeModel | undefined {
  if (!def.builtin) return crdModel(def);
  const name = builtinKindComponent(groupVersion(def), def.kind);
  const components = builtinComponents();
  const root = name ? components.get(name) : undefined;
  if (!name || !root) return undefined;
  builtinResolve ??= resolver(components);
  return { name, root, components, resolve: builtinResolve };
}

/** Names of the components reachable from `names` (the schemas a document must carry). */
export function closure(names: Iterable<string>, components: ReadonlyMap<string, Obj>): Set<string> {
  const seen = new Set<string>();
  const stack = [...names];
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) for (const x of v) visit(x);
    else if (isPlainObject(v)) {
      for (const [k, x] of Object.entries(v)) {
        if (k === '$ref' && typeof x === 'string') stack.push(x.slice(REF_PREFIX.length));
        else visit(x);
      }
    }
  };
  while (stack.length) {
    const n = stack.pop()!;
    if (seen.has(n)) continue;
    const s = components.get(n);
    if (!s) continue;
    seen.add(n);
    visit(s);
  }
  return seen;
}
