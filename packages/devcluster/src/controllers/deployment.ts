/**
 * The Deployment controller, after kube's pkg/controller/deployment: one
 * ReplicaSet per pod template (named `<deployment>-<pod-template-hash>`), a
 * template change makes a new ReplicaSet and a rolling update (maxSurge /
 * maxUnavailable, with kube's scale-up, unhealthy clean-up and scale-down
 * steps) or a Recreate, and the status kubectl reads: observedGeneration,
 * replicas, updatedReplicas, readyReplicas, availableReplicas,
 * unavailableReplicas and the Available / Progressing conditions with the
 * real reasons and messages, so `kubectl rollout status` completes.
 * Not simulated: minReadySeconds, progressDeadlineSeconds, revisionHistoryLimit clean-up.
 */
import { clone, isPlainObject, jsonEqual, meta, nowTimestamp, type Obj } from '../apiserver/types.ts';
import type { Recorder } from './events.ts';
import { controllerIdentity, DEPLOYMENTS, ownerRef, REPLICASETS, type Host } from './host.ts';
import { runOwnerController, splitKey } from './queue.ts';

const IDENTITY = controllerIdentity('deployment-controller');
const HASH_LABEL = 'pod-template-hash';
const REVISION = 'deployment.kubernetes.io/revision';
const SAFE = 'bcdfghjklmnpqrstvwxz2456789';

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (isPlainObject(v)) return `{${Object.keys(v).filter((k) => v[k] !== undefined).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  return JSON.stringify(v);
}

/** kube's ComputeHash: FNV-32a of the template, its decimal digits mapped through rand.SafeEncodeString's alphabet. */
export function podTemplateHash(template: unknown): string {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(canonical(template), 'utf8')) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return [...String(h)].map((c) => SAFE[Number(c) % SAFE.length]).join('');
}

/** An int-or-percent against `total` (percent rounded up for surge, down for unavailable). */
function resolve(v: unknown, total: number, roundUp: boolean, dflt: number): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && /^\d+%$/.test(v)) {
    const x = (Number(v.slice(0, -1)) * total) / 100;
    return roundUp ? Math.ceil(x) : Math.floor(x);
  }
  if (typeof v === 'string' && /^\d+$/.test(v)) return Number(v);
  return dflt;
}

export function surgeAndUnavailable(d: Obj): { surge: number; unavailable: number } {
  const spec = (d['spec'] ?? {}) as Obj;
  const replicas = replicasOf(spec);
  const ru = (((spec['strategy'] ?? {}) as Obj)['rollingUpdate'] ?? {}) as Obj;
  const surge = resolve(ru['maxSurge'] ?? '25%', replicas, true, 0);
  let unavailable = resolve(ru['maxUnavailable'] ?? '25%', replicas, false, 0);
  if (surge === 0 && unavailable === 0) unavailable = 1; // as kube: a rollout must be able to move
  return { surge, unavailable: Math.min(unavailable, replicas) };
}

function replicasOf(spec: Obj): number {
  return typeof spec['replicas'] === 'number' ? spec['replicas'] : 1;
}

const num = (o: Obj, section: 'spec' | 'status', f: string): number => {
  const v = ((o[section] ?? {}) as Obj)[f];
  return typeof v === 'number' ? v : 0;
};

function templateWithoutHash(rs: Obj): unknown {
  const t = clone(((rs['spec'] ?? {}) as Obj)['template'] ?? {}) as Obj;
  const labels = ((t['metadata'] ?? {}) as Obj)['labels'];
  if (isPlainObject(labels)) {
    delete labels[HASH_LABEL];
  }
  return t;
}

function revisionOf(o: Obj): number {
  const r = Number(meta(o).annotations?.[REVISION] ?? '0');
  return Number.isFinite(r) ? r : 0;
}

function condition(type: string, status: string, reason: string, message: string, old: Obj[]): Obj {
  const t = nowTimestamp();
  const prev = old.find((c) => c['type'] === type);
  const same = prev && prev['status'] === status;
  return { type, status, lastUpdateTime: same && prev['reason'] === reason && prev['message'] === message ? prev['lastUpdateTime'] : t, lastTransitionTime: same ? prev['lastTransitionTime'] : t, reason, message };
}

/** The ReplicaSet of the Deployment's current template, labelled and selected by its pod-template-hash. */
function newReplicaSet(d: Obj, hash: string, revision: number, initial: number, surge: number): Obj {
  const { name, namespace: ns } = meta(d);
  const spec = (d['spec'] ?? {}) as Obj;
  const template = spec['template'] ?? {};
  const replicas = replicasOf(spec);
  const t = clone(template) as Obj;
  const tm = (t['metadata'] ??= {}) as Obj;
  tm['labels'] = { ...((tm['labels'] ?? {}) as Record<string, string>), [HASH_LABEL]: hash };
  const sel = clone((spec['selector'] ?? {}) as Obj);
  sel['matchLabels'] = { ...((sel['matchLabels'] ?? {}) as Record<string, string>), [HASH_LABEL]: hash };
  const rs: Obj = {
    apiVersion: 'apps/v1', kind: 'ReplicaSet',
    metadata: {
      name: `${name ?? ''}-${hash}`, namespace: ns, labels: tm['labels'], ownerReferences: [ownerRef('apps/v1', 'Deployment', d)],
      annotations: { [REVISION]: String(revision), 'deployment.kubernetes.io/desired-replicas': String(replicas), 'deployment.kubernetes.io/max-replicas': String(replicas + surge) },
    },
    spec: { replicas: initial, minReadySeconds: spec['minReadySeconds'] ?? 0, selector: sel, template: t },
  };
  return rs;
}

/** The status a Deployment shows for its ReplicaSets `all` (`created`: the new one was created by this sync). */
function deploymentStatus(d: Obj, all: Obj[], created: boolean): Obj {
  const dm = meta(d);
  const spec = (d['spec'] ?? {}) as Obj;
  const replicas = replicasOf(spec);
  const newRs = all.find((rs) => jsonEqual(templateWithoutHash(rs), spec['template'] ?? {}));
  const sum = (f: string): number => all.reduce((s, rs) => s + num(rs, 'status', f), 0);
  const available = sum('availableReplicas');
  const old = (d['status'] ?? {}) as Obj;
  const oldConds = Array.isArray(old['conditions']) ? (old['conditions'] as Obj[]) : [];
  const { unavailable } = surgeAndUnavailable(d);
  const status: Obj = {
    observedGeneration: dm.generation ?? 1,
    replicas: sum('replicas'),
    updatedReplicas: newRs ? num(newRs, 'status', 'replicas') : 0,
    readyReplicas: sum('readyReplicas'),
    availableReplicas: available,
    unavailableReplicas: Math.max(0, replicas - available),
  };
  const conds: Obj[] = [];
  conds.push(available >= replicas - unavailable
    ? condition('Available', 'True', 'MinimumReplicasAvailable', 'Deployment has minimum availability.', oldConds)
    : condition('Available', 'False', 'MinimumReplicasUnavailable', 'Deployment does not have minimum availability.', oldConds));
  const rsName = newRs ? meta(newRs).name ?? '' : '';
  const complete = newRs !== undefined && status['updatedReplicas'] === replicas && status['replicas'] === replicas && available === replicas;
  if (spec['paused'] === true) conds.push(condition('Progressing', 'Unknown', 'DeploymentPaused', 'Deployment is paused', oldConds));
  else if (complete) conds.push(condition('Progressing', 'True', 'NewReplicaSetAvailable', `ReplicaSet "${rsName}" has successfully progressed.`, oldConds));
  else if (created) conds.push(condition('Progressing', 'True', 'NewReplicaSetCreated', `Created new replica set "${rsName}"`, oldConds));
  else if (newRs) conds.push(condition('Progressing', 'True', 'ReplicaSetUpdated', `ReplicaSet "${rsName}" is progressing.`, oldConds));
  const failure = newRs ? ((((newRs['status'] ?? {}) as Obj)['conditions'] ?? []) as Obj[]).find((c) => c['type'] === 'ReplicaFailure') : undefined;
  if (failure) conds.push(condition('ReplicaFailure', 'True', String(failure['reason']), String(failure['message']), oldConds));
  status['conditions'] = conds;
  for (const f of ['readyReplicas', 'availableReplicas', 'unavailableReplicas', 'replicas', 'updatedReplicas'] as const) if (status[f] === 0) delete status[f];
  return status;
}

type Scale = (d: Obj, rs: Obj, to: number) => Promise<void>;

/** One step of a rolling update: the new ReplicaSet up within maxSurge, or old ones down within maxUnavailable. */
async function rollingStep(scale: Scale, d: Obj, newRs: Obj, olds: Obj[], replicas: number, surge: number, unavailable: number): Promise<void> {
  const newSpec = num(newRs, 'spec', 'replicas');
  const allSpec = [newRs, ...olds].reduce((s, rs) => s + num(rs, 'spec', 'replicas'), 0);
  // Scale up the new ReplicaSet within maxSurge.
  if (newSpec < replicas) {
    const up = Math.min(replicas + surge - allSpec, replicas - newSpec);
    if (up > 0) {
      await scale(d, newRs, newSpec + up);
      return; // the ReplicaSet's events bring the next step
    }
  } else if (newSpec > replicas) {
    await scale(d, newRs, replicas);
    return;
  }
  // Scale down old ReplicaSets within maxUnavailable: unhealthy replicas first, then the oldest.
  const minAvailable = replicas - unavailable;
  const newUnavailable = num(newRs, 'spec', 'replicas') - num(newRs, 'status', 'availableReplicas');
  const maxScaledDown = allSpec - minAvailable - newUnavailable;
  if (maxScaledDown <= 0) return;
  let cleaned = 0;
  for (const rs of olds) {
    if (cleaned >= maxScaledDown) break;
    const s = num(rs, 'spec', 'replicas');
    const avail = num(rs, 'status', 'availableReplicas');
    if (s === 0 || s <= avail) continue;
    const down = Math.min(maxScaledDown - cleaned, s - avail);
    await scale(d, rs, s - down);
    cleaned += down;
  }
  if (cleaned > 0) return;
  const available = [newRs, ...olds].reduce((s, rs) => s + num(rs, 'status', 'availableReplicas'), 0);
  if (available <= minAvailable) return;
  let total = available - minAvailable;
  for (const rs of olds) {
    if (total <= 0) break;
    const s = num(rs, 'spec', 'replicas');
    if (s === 0) continue;
    const down = Math.min(s, total);
    await scale(d, rs, s - down);
    total -= down;
  }
}

export function runDeploymentController(host: Host, record: Recorder, onError: (err: unknown) => void, signal: AbortSignal): { idle(): Promise<void> } {
  const scale = async (d: Obj, rs: Obj, to: number): Promise<void> => {
    const from = num(rs, 'spec', 'replicas');
    if (from === to) return;
    const copy = clone(rs);
    (copy['spec'] as Obj)['replicas'] = to;
    const ann = (meta(copy).annotations ??= {});
    ann['deployment.kubernetes.io/desired-replicas'] = String(replicasOf((d['spec'] ?? {}) as Obj));
    await host.update(IDENTITY, REPLICASETS, copy);
    record(d, 'Normal', 'ScalingReplicaSet', `Scaled ${to > from ? 'up' : 'down'} replica set ${meta(rs).name ?? ''} from ${from} to ${to}`);
  };

  const sync = async (k: string): Promise<void> => {
    const [ns, name] = splitKey(k);
    const d = host.get(DEPLOYMENTS, ns, name);
    if (!d || meta(d).deletionTimestamp) return;
    const dm = meta(d);
    const spec = (d['spec'] ?? {}) as Obj;
    const replicas = replicasOf(spec);
    const template = spec['template'] ?? {};
    const all = rss.owned(dm.uid ?? '').filter((rs) => !meta(rs).deletionTimestamp);
    let newRs = all.find((rs) => jsonEqual(templateWithoutHash(rs), template));
    const olds = all.filter((rs) => rs !== newRs).sort((a, b) => String(meta(a).creationTimestamp).localeCompare(String(meta(b).creationTimestamp)));
    const recreate = ((spec['strategy'] ?? {}) as Obj)['type'] === 'Recreate';
    const { surge, unavailable } = surgeAndUnavailable(d);
    const paused = spec['paused'] === true;
    let created = false;

    if (!newRs && !paused) {
      const hash = podTemplateHash(template);
      const revision = Math.max(0, ...all.map(revisionOf)) + 1;
      const allSpec = olds.reduce((s, rs) => s + num(rs, 'spec', 'replicas'), 0);
      const initial = olds.every((rs) => num(rs, 'spec', 'replicas') === 0 && num(rs, 'status', 'replicas') === 0)
        ? replicas
        : recreate ? 0 : Math.max(0, Math.min(replicas + surge - allSpec, replicas));
      const rs = newReplicaSet(d, hash, revision, initial, surge);
      newRs = await host.create(IDENTITY, REPLICASETS, ns, rs);
      created = true;
      if (initial > 0) record(d, 'Normal', 'ScalingReplicaSet', `Scaled up replica set ${meta(newRs).name ?? ''} from 0 to ${initial}`);
      if (dm.annotations?.[REVISION] !== String(revision)) {
        const copy = clone(d);
        (meta(copy).annotations ??= {})[REVISION] = String(revision);
        await host.update(IDENTITY, DEPLOYMENTS, copy);
      }
    } else if (newRs && !paused) {
      if (recreate) {
        for (const rs of olds) await scale(d, rs, 0);
        if (olds.every((rs) => num(rs, 'status', 'replicas') === 0)) await scale(d, newRs, replicas);
      } else if (olds.every((rs) => num(rs, 'spec', 'replicas') === 0)) {
        await scale(d, newRs, replicas);
      } else {
        await rollingStep(scale, d, newRs, olds, replicas, surge, unavailable);
      }
    }
    await writeStatus(k, created);
  };

  const writeStatus = async (k: string, created: boolean): Promise<void> => {
    const [ns, name] = splitKey(k);
    const d = host.get(DEPLOYMENTS, ns, name);
    if (!d) return;
    const dm = meta(d);
    const all = rss.owned(dm.uid ?? '').filter((rs) => !meta(rs).deletionTimestamp);
    const old = (d['status'] ?? {}) as Obj;
    const status = deploymentStatus(d, all, created);
    if (jsonEqual(status, old)) return;
    await host.update(IDENTITY, DEPLOYMENTS, { ...clone(d), status }, 'status');
  };

  const { owned: rss, idle } = runOwnerController(host, { name: 'deployment-controller', kind: 'Deployment', resource: DEPLOYMENTS, owns: REPLICASETS }, sync, onError, signal);
  return { idle };
}
