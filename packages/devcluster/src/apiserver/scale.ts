/**
 * The `scale` subresource (autoscaling/v1 Scale) of Deployments,
 * ReplicaSets, StatefulSets and ReplicationControllers, which `kubectl
 * scale` uses: GET returns {spec.replicas, status.replicas, status.selector};
 * PUT and PATCH change the parent's spec.replicas (through the parent's own
 * update path, so resourceVersion preconditions and generation apply). They
 * are admitted as kube-apiserver admits them: `<resource>/scale`, kind
 * autoscaling/v1 Scale, object and oldObject the new and old Scale; an
 * admission webhook or ValidatingAdmissionPolicy whose rules name only the
 * parent resource never sees them. With the controllers on (`portal dev`,
 * src/devcluster/controllers/), the new spec.replicas is acted on.
 */
import type { Cluster, Reply, RequestScope } from './cluster.ts';
import { jsonPatch, mergePatch } from './patch.ts';
import { formatLabelSelector } from './printers.ts';
import type { ResourceDef } from './registry.ts';
import { ApiError, errors } from './status.ts';
import { isPlainObject, meta, type Obj } from './types.ts';

const SCALABLE = new Set(['apps/deployments', 'apps/replicasets', 'apps/statefulsets', '/replicationcontrollers']);

export function isScalable(def: ResourceDef): boolean {
  return def.builtin && SCALABLE.has(`${def.group}/${def.resource}`);
}

/** The discovery entry of `<resource>/scale`. */
export function scaleDiscovery(def: ResourceDef): Obj {
  return { name: `${def.resource}/scale`, singularName: '', namespaced: def.namespaced, group: 'autoscaling', version: 'v1', kind: 'Scale', verbs: ['get', 'patch', 'update'] };
}

const SCALE_KIND = Object.freeze({ group: 'autoscaling', version: 'v1', kind: 'Scale' });

function toScale(def: ResourceDef, o: Obj): Obj {
  const m = meta(o);
  const spec = isPlainObject(o['spec']) ? o['spec'] : {};
  const status = isPlainObject(o['status']) ? o['status'] : {};
  // ReplicationControllers select with a plain map; the others with a LabelSelector.
  const selector = def.resource === 'replicationcontrollers' ? { matchLabels: spec['selector'] } : spec['selector'];
  const formatted = formatLabelSelector(selector);
  return {
    kind: 'Scale', apiVersion: 'autoscaling/v1',
    metadata: { name: m.name, namespace: m.namespace, uid: m.uid, resourceVersion: m.resourceVersion, creationTimestamp: m.creationTimestamp },
    spec: { replicas: typeof spec['replicas'] === 'number' ? spec['replicas'] : 1 },
    status: { replicas: typeof status['replicas'] === 'number' ? status['replicas'] : 0, ...(formatted !== '<none>' ? { selector: formatted } : {}) },
  };
}

function replicasOf(scale: unknown): number {
  const spec = isPlainObject(scale) && isPlainObject(scale['spec']) ? scale['spec'] : {};
  // Scale.spec.replicas is `omitempty`: a JSON Scale for 0 replicas has none.
  const r = spec['replicas'] ?? 0;
  if (typeof r !== 'number' || !Number.isInteger(r) || r < 0) {
    throw new ApiError(422, 'Invalid', `Scale.autoscaling "" is invalid: spec.replicas: Invalid value: ${JSON.stringify(r ?? null)}: must be greater than or equal to 0`,
      { kind: 'Scale', group: 'autoscaling', causes: [{ reason: 'FieldValueInvalid', message: 'must be greater than or equal to 0', field: 'spec.replicas' }] });
  }
  return r;
}

/** get / update / patch of `<resource>/<name>/scale`. */
export async function serveScale(c: Cluster, s: RequestScope, verb: string, io: { object: () => Promise<unknown>; raw: () => Promise<string>; contentType: string }): Promise<Reply> {
  const parent: RequestScope = { ...s, subresource: '' };
  const current = (): Obj => c.get(parent);
  let wanted: unknown;
  switch (verb) {
    case 'get':
      return { code: 200, body: toScale(s.def, current()) };
    case 'update':
      // JSON or protobuf (kubectl's scale client may send either).
      wanted = await io.object();
      break;
    case 'patch': {
      const type = io.contentType.split(';')[0]!.trim().toLowerCase();
      let patch: unknown;
      try {
        patch = JSON.parse(await io.raw());
      } catch (e) {
        throw errors.badRequest(`error decoding patch: ${(e as Error).message}`);
      }
      const scale = toScale(s.def, current());
      // A Scale has no lists: a strategic merge patch is a merge patch here.
      if (type === 'application/merge-patch+json' || type === 'application/strategic-merge-patch+json') wanted = mergePatch(scale, patch);
      else if (type === 'application/json-patch+json') wanted = jsonPatch(scale, patch);
      else throw errors.unsupportedMediaType(io.contentType);
      break;
    }
    default:
      throw errors.methodNotAllowed();
  }
  return setReplicas(c, parent, wanted);
}

async function setReplicas(c: Cluster, parent: RequestScope, wanted: unknown): Promise<Reply> {
  const replicas = replicasOf(wanted);
  const rv = isPlainObject(wanted) && isPlainObject(wanted['metadata']) ? wanted['metadata']['resourceVersion'] : undefined;
  // The parent's resourceVersion is the Scale's: a stale one is a 409 from the parent's update.
  const patch = { ...(typeof rv === 'string' && rv ? { metadata: { resourceVersion: rv } } : {}), spec: { replicas } };
  const admitAs = { subresource: 'scale', kind: SCALE_KIND, view: (o: Obj) => toScale(parent.def, o) };
  const reply = await c.patch(parent, JSON.stringify(patch), 'application/merge-patch+json', { admitAs });
  return { code: 200, body: toScale(parent.def, reply.body as Obj) };
}
