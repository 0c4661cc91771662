/**
 * The pods/eviction subresource with PodDisruptionBudget checks.
 *
 * A pod counts as healthy when `status.phase` is Running and its `Ready`
 * condition is "True" (what the disruption controller counts as
 * currentHealthy). The expected count is the number of pods the PDB selects
 * in its namespace (we have no controllers to ask for scale). An eviction is
 * allowed when currentHealthy - 1 >= desiredHealthy, or when the pod itself
 * is unhealthy and the budget is currently met (unhealthyPodEvictionPolicy
 * IfHealthyBudget, the default), or when the pod is already terminal.
 */
import { type Cluster, type Reply, type RequestScope } from './cluster.ts';
import { storeKey } from './registry.ts';
import { fromLabelSelectorObject, matchLabels } from './selectors.ts';
import { ApiError, errors } from './status.ts';
import { objKey } from './store.ts';
import { isPlainObject, meta, type Obj } from './types.ts';

export function isHealthy(pod: Obj): boolean {
  const st = isPlainObject(pod['status']) ? pod['status'] : {};
  if (st['phase'] !== 'Running') return false;
  const conds = Array.isArray(st['conditions']) ? (st['conditions'] as Obj[]) : [];
  return conds.some((c) => c['type'] === 'Ready' && c['status'] === 'True');
}

/** minAvailable / maxUnavailable as an int or a percentage of `expected` (rounded up, as kube). */
function scaled(v: unknown, expected: number): number {
  if (typeof v === 'number') return v;
  const m = typeof v === 'string' ? v.match(/^(\d+)%$/) : null;
  if (m) return Math.ceil((Number(m[1]) * expected) / 100);
  return Number(v ?? 0);
}

export async function evict(cluster: Cluster, s: RequestScope, body: unknown, admit: (eviction: Obj) => Promise<void>): Promise<Reply> {
  const podsDef = s.def;
  const pod = cluster.store.get(storeKey(podsDef), objKey(s.namespace, s.name));
  if (!pod) throw errors.notFound('pods', '', s.name);
  const eviction: Obj = isPlainObject(body) ? body : { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: s.name, namespace: s.namespace } };
  await admit(eviction);
  const phase = isPlainObject(pod['status']) ? pod['status']['phase'] : undefined;
  const terminal = phase === 'Succeeded' || phase === 'Failed';
  if (!terminal) {
    const pdbDef = cluster.registry.get('policy', 'v1', 'poddisruptionbudgets')!;
    const podLabels = meta(pod).labels;
    const pdbs = cluster.store.list(storeKey(pdbDef), s.namespace).filter((pdb) => {
      const sel = fromLabelSelectorObject(isPlainObject(pdb['spec']) ? pdb['spec']['selector'] : undefined);
      return sel !== null && sel.length > 0 && matchLabels(sel, podLabels);
    });
    if (pdbs.length > 1) {
      throw new ApiError(500, 'InternalError', 'This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.');
    }
    const pdb = pdbs[0];
    if (pdb) {
      const spec = pdb['spec'] as Obj;
      const sel = fromLabelSelectorObject(spec['selector'])!;
      const selected = cluster.store.list(storeKey(podsDef), s.namespace).filter((p) => matchLabels(sel, meta(p).labels));
      const expected = selected.length;
      const healthy = selected.filter(isHealthy).length;
      const desired = spec['minAvailable'] !== undefined
        ? scaled(spec['minAvailable'], expected)
        : expected - scaled(spec['maxUnavailable'] ?? 0, expected);
      const allowed = healthy - desired >= 1 || (!isHealthy(pod) && healthy >= desired);
      if (!allowed) {
        throw new ApiError(429, 'TooManyRequests', "Cannot evict pod as it would violate the pod's disruption budget.", {
          causes: [{ reason: 'DisruptionBudget', message: `The disruption budget ${meta(pdb).name ?? ''} needs ${desired} healthy pods and has ${healthy} currently` }],
        });
      }
    }
  }
  if (!s.query.getAll('dryRun').includes('All')) cluster.removeInternal(podsDef, s.namespace, s.name);
  return { code: 201, body: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 } };
}
