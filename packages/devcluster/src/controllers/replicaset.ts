/**
 * The ReplicaSet controller: keeps `spec.replicas` Pods from the template,
 * created as system:serviceaccount:kube-system:replicaset-controller through
 * admission (a Pod the webhook denies shows as the FailedCreate Event and
 * the ReplicaFailure condition, as on a real cluster), and reports
 * replicas / fullyLabeledReplicas / readyReplicas / availableReplicas /
 * observedGeneration.
 */
import { fromLabelSelectorObject, matchLabels } from '../apiserver/selectors.ts';
import { clone, jsonEqual, meta, nowTimestamp, type Obj } from '../apiserver/types.ts';
import type { Recorder } from './events.ts';
import { controllerIdentity, OwnedIndex, ownerRef, PODS, REPLICASETS, type Host } from './host.ts';
import { key, splitKey, WorkQueue } from './queue.ts';

const IDENTITY = controllerIdentity('replicaset-controller');
/** client-go's slow start: creates go out in batches of 1, 2, 4, ... and stop at the first failing batch. */
const SLOW_START_INITIAL = 1;

export function isPodActive(p: Obj): boolean {
  const phase = ((p['status'] ?? {}) as Obj)['phase'];
  return !meta(p).deletionTimestamp && phase !== 'Succeeded' && phase !== 'Failed';
}

export function isPodReady(p: Obj): boolean {
  const conds = ((p['status'] ?? {}) as Obj)['conditions'];
  return Array.isArray(conds) && conds.some((c) => (c as Obj)['type'] === 'Ready' && (c as Obj)['status'] === 'True');
}

/** Creates `n` items with slow start; returns how many succeeded and the first error. */
export async function slowStart(n: number, create: () => Promise<unknown>): Promise<{ created: number; error: unknown }> {
  let created = 0;
  for (let batch = Math.min(n, SLOW_START_INITIAL); created < n; batch = Math.min(2 * batch, n - created)) {
    const results = await Promise.allSettled(Array.from({ length: batch }, create));
    for (const r of results) if (r.status === 'fulfilled') created++;
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) return { created, error: failed.reason };
  }
  return { created, error: undefined };
}

/** Deletion order of kube's ActivePods ranking: unscheduled, then not running, then not ready, then the newest. */
function deletionRank(p: Obj): [number, number, number, string] {
  const spec = (p['spec'] ?? {}) as Obj;
  const phase = ((p['status'] ?? {}) as Obj)['phase'];
  return [spec['nodeName'] ? 1 : 0, phase === 'Running' ? 1 : 0, isPodReady(p) ? 1 : 0, String(meta(p).creationTimestamp ?? '')];
}

function byDeletionPreference(a: Obj, b: Obj): number {
  const ra = deletionRank(a);
  const rb = deletionRank(b);
  for (let i = 0; i < 3; i++) if (ra[i] !== rb[i]) return (ra[i] as number) - (rb[i] as number);
  return ra[3] < rb[3] ? 1 : ra[3] > rb[3] ? -1 : 0;
}

export function podFromTemplate(template: Obj, namespace: string, generateName: string, owner: NonNullable<ReturnType<typeof meta>['ownerReferences']>[number], extraLabels: Record<string, string> = {}): Obj {
  const tm = (template['metadata'] ?? {}) as Obj;
  const labels = { ...((tm['labels'] ?? {}) as Record<string, string>), ...extraLabels };
  const metadata: Obj = { generateName, namespace, labels, ownerReferences: [owner] };
  if (tm['annotations']) metadata['annotations'] = clone(tm['annotations']);
  if (tm['finalizers']) metadata['finalizers'] = clone(tm['finalizers']);
  return { apiVersion: 'v1', kind: 'Pod', metadata, spec: clone(template['spec'] ?? {}) };
}

export interface ReplicaSetController { idle(): Promise<void> }

export function runReplicaSetController(host: Host, record: Recorder, onError: (err: unknown) => void, signal: AbortSignal): ReplicaSetController {
  const sync = async (k: string): Promise<void> => {
    const [ns, name] = splitKey(k);
    const rs = host.get(REPLICASETS, ns, name);
    if (!rs || meta(rs).deletionTimestamp) return;
    const rm = meta(rs);
    const spec = (rs['spec'] ?? {}) as Obj;
    const want = typeof spec['replicas'] === 'number' ? spec['replicas'] : 1;
    const template = (spec['template'] ?? {}) as Obj;
    const pods = pods_.owned(rm.uid ?? '').filter(isPodActive);
    let failure: unknown;
    if (pods.length < want) {
      const owner = ownerRef('apps/v1', 'ReplicaSet', rs);
      const n = want - pods.length;
      const { created, error } = await slowStart(n, () => host.create(IDENTITY, PODS, ns, podFromTemplate(template, ns, `${name}-`, owner)));
      if (created > 0) record(rs, 'Normal', 'SuccessfulCreate', created === 1 ? 'Created pod' : `Created ${created} pods`);
      if (error !== undefined) {
        failure = error;
        record(rs, 'Warning', 'FailedCreate', `Error creating: ${(error as Error).message}`);
      }
    } else if (pods.length > want) {
      const victims = [...pods].sort(byDeletionPreference).slice(0, pods.length - want);
      await Promise.all(victims.map(async (p) => {
        await host.delete(IDENTITY, PODS, ns, meta(p).name ?? '', { uid: meta(p).uid ?? '' }).catch(onError);
        record(rs, 'Normal', 'SuccessfulDelete', `Deleted pod: ${meta(p).name ?? ''}`);
      }));
    }
    await writeStatus(rs, failure);
    if (failure !== undefined) throw failure; // retried with backoff by the queue
  };

  const writeStatus = async (rs: Obj, failure: unknown): Promise<void> => {
    const fresh = host.get(REPLICASETS, meta(rs).namespace ?? '', meta(rs).name ?? '');
    if (!fresh || meta(fresh).uid !== meta(rs).uid) return;
    const fm = meta(fresh);
    const spec = (fresh['spec'] ?? {}) as Obj;
    const pods = pods_.owned(fm.uid ?? '').filter(isPodActive);
    const sel = fromLabelSelectorObject(spec['selector']);
    const ready = pods.filter(isPodReady).length;
    const old = (fresh['status'] ?? {}) as Obj;
    const conditions = ((old['conditions'] ?? []) as Obj[]).filter((c) => c['type'] !== 'ReplicaFailure');
    if (failure !== undefined) {
      const prev = ((old['conditions'] ?? []) as Obj[]).find((c) => c['type'] === 'ReplicaFailure');
      conditions.push({ type: 'ReplicaFailure', status: 'True', lastTransitionTime: prev?.['lastTransitionTime'] ?? nowTimestamp(), reason: 'FailedCreate', message: (failure as Error).message });
    }
    const status: Obj = {
      replicas: pods.length,
      fullyLabeledReplicas: sel ? pods.filter((p) => matchLabels(sel, meta(p).labels)).length : pods.length,
      readyReplicas: ready,
      availableReplicas: ready, // minReadySeconds is not simulated: ready is available
      observedGeneration: fm.generation ?? 1,
    };
    if (conditions.length) status['conditions'] = conditions;
    for (const f of ['readyReplicas', 'availableReplicas'] as const) if (status[f] === 0) delete status[f];
    if (jsonEqual(status, old)) return;
    await host.update(IDENTITY, REPLICASETS, { ...clone(fresh), status }, 'status');
  };

  const queue = new WorkQueue(sync, signal, (_k, err) => onError(err));
  const pods_ = new OwnedIndex(host, PODS, (ownerUid, ev) => {
    const p = meta(ev.object);
    const owner = (p.ownerReferences ?? []).find((r) => r.uid === ownerUid);
    if (owner?.kind === 'ReplicaSet') queue.add(key(p.namespace ?? '', owner.name));
  });
  const stop = host.watch(REPLICASETS, (ev) => queue.add(key(meta(ev.object).namespace ?? '', meta(ev.object).name ?? '')));
  signal.addEventListener('abort', () => { stop(); pods_.stop(); }, { once: true });
  for (const rs of host.list(REPLICASETS)) queue.add(key(meta(rs).namespace ?? '', meta(rs).name ?? ''));
  return { idle: () => queue.idle() };
}
