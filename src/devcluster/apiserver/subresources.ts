/**
 * Subresources beyond status and eviction:
 * - `scale` (autoscaling/v1 Scale) for Deployments, ReplicaSets,
 *   StatefulSets and ReplicationControllers: GET, PUT and PATCH, admitted as
 *   kube-apiserver does (kind autoscaling/v1 Scale, subResource "scale");
 * - `log`, `exec`, `attach` and `portforward` of Pods, which need a kubelet
 *   and a container runtime: `portal dev` has neither, and says so in a
 *   Status instead of hanging or answering 404.
 */
import type { Cluster, Reply, RequestScope } from './cluster.ts';
import { jsonPatch, mergePatch, strategicMerge } from './patch.ts';
import type { ResourceDef } from './registry.ts';
import { ApiError, errors } from './status.ts';
import { clone, isPlainObject, meta, type Obj } from './types.ts';

const SCALABLE = new Set(['apps/deployments', 'apps/replicasets', 'apps/statefulsets', '/replicationcontrollers']);
export const RUNTIME_SUBRESOURCES = new Set(['log', 'exec', 'attach', 'portforward']);
export const SCALE_KIND = { group: 'autoscaling', version: 'v1', kind: 'Scale' };

export function hasScale(def: ResourceDef): boolean {
  return def.builtin && SCALABLE.has(`${def.group}/${def.resource}`);
}

export function servesSubresource(def: ResourceDef, sub: string): boolean {
  if (sub === 'scale') return hasScale(def);
  if (RUNTIME_SUBRESOURCES.has(sub)) return def.builtin && def.group === '' && def.resource === 'pods';
  return false;
}

/** A label selector in its string form (labels.Selector.String()). */
function selectorString(sel: unknown): string {
  if (!isPlainObject(sel)) return '';
  const parts: string[] = [];
  for (const [k, v] of Object.entries((sel['matchLabels'] ?? {}) as Record<string, string>).sort()) parts.push(`${k}=${v}`);
  for (const e of (Array.isArray(sel['matchExpressions']) ? sel['matchExpressions'] : []) as Obj[]) {
    const op = String(e['operator'] ?? '');
    const vals = Array.isArray(e['values']) ? (e['values'] as string[]).slice().sort().join(',') : '';
    if (op === 'In') parts.push(`${String(e['key'])} in (${vals})`);
    else if (op === 'NotIn') parts.push(`${String(e['key'])} notin (${vals})`);
    else if (op === 'Exists') parts.push(String(e['key']));
    else if (op === 'DoesNotExist') parts.push(`!${String(e['key'])}`);
  }
  return parts.join(',');
}

export function toScale(o: Obj): Obj {
  const m = meta(o);
  const spec = (o['spec'] ?? {}) as Obj;
  const status = (o['status'] ?? {}) as Obj;
  const replicas = typeof spec['replicas'] === 'number' ? spec['replicas'] : 1;
  const st: Obj = { replicas: typeof status['replicas'] === 'number' ? status['replicas'] : 0 };
  const sel = selectorString(spec['selector']);
  if (sel) st['selector'] = sel;
  return {
    kind: 'Scale', apiVersion: 'autoscaling/v1',
    metadata: { name: m.name, namespace: m.namespace, uid: m.uid, resourceVersion: m.resourceVersion, creationTimestamp: m.creationTimestamp },
    spec: { replicas }, status: st,
  };
}

function replicasFrom(scale: Obj, s: RequestScope): number {
  const r = isPlainObject(scale['spec']) ? scale['spec']['replicas'] : undefined;
  if (r === undefined) return 0;
  if (typeof r !== 'number' || !Number.isInteger(r) || r < 0) {
    throw errors.invalid('Scale', 'autoscaling', s.name, [{ reason: 'FieldValueInvalid', field: 'spec.replicas', message: `Invalid value: ${JSON.stringify(r)}: must be greater than or equal to 0` }]);
  }
  return r;
}

export async function serveScale(cluster: Cluster, s: RequestScope, verb: string, body: () => Promise<unknown>, rawPatch: () => Promise<{ raw: string; type: string }>): Promise<Reply> {
  const whole = { ...s, subresource: '' };
  const current = cluster.get(whole);
  if (verb === 'get') return { code: 200, body: toScale(current) };
  let scale: Obj;
  const old = toScale(current);
  if (verb === 'update') {
    const b = await body();
    if (!isPlainObject(b)) throw errors.badRequest('the body of a Scale update must be an object');
    scale = b;
  } else if (verb === 'patch') {
    const { raw, type } = await rawPatch();
    let p: unknown;
    try {
      p = JSON.parse(raw);
    } catch (e) {
      throw errors.badRequest(`error decoding patch: ${(e as Error).message}`);
    }
    if (type === 'application/merge-patch+json') scale = mergePatch(clone(old), p) as Obj;
    else if (type === 'application/strategic-merge-patch+json') scale = strategicMerge(clone(old), p) as Obj;
    else if (type === 'application/json-patch+json') scale = jsonPatch(old, p) as Obj;
    else throw errors.unsupportedMediaType(type);
  } else throw errors.methodNotAllowed();
  const rv = isPlainObject(scale['metadata']) ? scale['metadata']['resourceVersion'] : undefined;
  if (typeof rv === 'string' && rv !== '' && rv !== meta(current).resourceVersion) throw errors.conflict(s.def.resource, s.def.group, s.name);
  const replicas = replicasFrom(scale, s);
  const next = clone(current);
  ((next['spec'] ??= {}) as Obj)['replicas'] = replicas;
  const admitted = toScale(next);
  await cluster.admitSubresource(s, 'UPDATE', admitted, SCALE_KIND, old);
  const r = await cluster.update(whole, next, { skipAdmission: true });
  return { code: 200, body: toScale(r.body as Obj) };
}

/** log / exec / attach / portforward: there is no container runtime behind the simulated node. */
export function noContainerRuntime(cluster: Cluster, s: RequestScope): never {
  const pod = cluster.get({ ...s, subresource: '' }); // 404 for a missing Pod, as kube-apiserver
  const what = s.subresource === 'log' ? 'logs' : s.subresource;
  const node = String(((pod['spec'] ?? {}) as Obj)['nodeName'] ?? '');
  throw new ApiError(400, 'BadRequest',
    `portal dev has no container runtime, so ${what} is not available: the containers of pod "${s.name}" are simulated${node ? ` on node "${node}"` : ''} and never run (use a real cluster, such as kind, for ${what})`);
}
