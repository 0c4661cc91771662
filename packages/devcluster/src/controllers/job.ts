/**
 * The Job controller: runs min(parallelism, completions - succeeded) Pods
 * at a time, created as system:serviceaccount:kube-system:job-controller
 * through admission, counts succeeded / failed Pods, and marks the Job
 * Complete (SuccessCriteriaMet + Complete, reason CompletionsReached) or
 * Failed (BackoffLimitExceeded) as kube 1.35 does. Pods on the simulated node
 * succeed, so Jobs complete. Not simulated: indexed completion, pod failure
 * policy, activeDeadlineSeconds, ttlSecondsAfterFinished, suspend.
 */
import { clone, jsonEqual, meta, nowTimestamp, type Obj } from '../apiserver/types.ts';
import type { Recorder } from './events.ts';
import { controllerIdentity, JOBS, OwnedIndex, ownerRef, PODS, type Host } from './host.ts';
import { key, splitKey, WorkQueue } from './queue.ts';
import { isPodReady, podFromTemplate, slowStart } from './replicaset.ts';

const IDENTITY = controllerIdentity('job-controller');

function phase(p: Obj): unknown {
  return ((p['status'] ?? {}) as Obj)['phase'];
}

export function jobFinished(job: Obj): 'Complete' | 'Failed' | undefined {
  const conds = (((job['status'] ?? {}) as Obj)['conditions'] ?? []) as Obj[];
  for (const c of conds) if ((c['type'] === 'Complete' || c['type'] === 'Failed') && c['status'] === 'True') return c['type'];
  return undefined;
}

export function runJobController(host: Host, record: Recorder, onError: (err: unknown) => void, signal: AbortSignal): { idle(): Promise<void> } {
  const sync = async (k: string): Promise<void> => {
    const [ns, name] = splitKey(k);
    const job = host.get(JOBS, ns, name);
    if (!job || meta(job).deletionTimestamp || jobFinished(job)) return;
    const jm = meta(job);
    const spec = (job['spec'] ?? {}) as Obj;
    const completions = typeof spec['completions'] === 'number' ? spec['completions'] : 1;
    const parallelism = typeof spec['parallelism'] === 'number' ? spec['parallelism'] : 1;
    const backoffLimit = typeof spec['backoffLimit'] === 'number' ? spec['backoffLimit'] : 6;
    const pods = pods_.owned(jm.uid ?? '');
    const succeeded = pods.filter((p) => phase(p) === 'Succeeded').length;
    const failed = pods.filter((p) => phase(p) === 'Failed').length;
    const active = pods.filter((p) => !meta(p).deletionTimestamp && phase(p) !== 'Succeeded' && phase(p) !== 'Failed');
    const old = (job['status'] ?? {}) as Obj;
    const now = nowTimestamp();
    let failure: unknown;
    const done = succeeded >= completions;
    const overBackoff = failed > backoffLimit;
    if (!done && !overBackoff && spec['suspend'] !== true) {
      const want = Math.min(parallelism, completions - succeeded) - active.length;
      if (want > 0) {
        const template = clone((spec['template'] ?? {}) as Obj);
        const extra = { 'batch.kubernetes.io/controller-uid': jm.uid ?? '', 'batch.kubernetes.io/job-name': name, 'controller-uid': jm.uid ?? '', 'job-name': name };
        const { created, error } = await slowStart(want, () => host.create(IDENTITY, PODS, ns, podFromTemplate(template, ns, `${name}-`, ownerRef('batch/v1', 'Job', job), extra)));
        for (let i = 0; i < created; i++) record(job, 'Normal', 'SuccessfulCreate', 'Created pod');
        if (error !== undefined) {
          failure = error;
          record(job, 'Warning', 'FailedCreate', `Error creating: ${(error as Error).message}`);
        }
      }
    }
    const fresh = host.get(JOBS, ns, name);
    if (!fresh || meta(fresh).uid !== jm.uid) return;
    const nowActive = pods_.owned(jm.uid ?? '').filter((p) => !meta(p).deletionTimestamp && phase(p) !== 'Succeeded' && phase(p) !== 'Failed');
    const status: Obj = {
      ...clone(old),
      startTime: old['startTime'] ?? now,
      active: nowActive.length,
      ready: nowActive.filter(isPodReady).length,
      succeeded,
      failed,
      terminating: 0,
      uncountedTerminatedPods: {},
    };
    for (const f of ['active', 'succeeded', 'failed'] as const) if (status[f] === 0) delete status[f];
    const conditions = ((old['conditions'] ?? []) as Obj[]).slice();
    if (done) {
      const msg = 'Reached expected number of succeeded pods';
      conditions.push({ type: 'SuccessCriteriaMet', status: 'True', lastProbeTime: now, lastTransitionTime: now, reason: 'CompletionsReached', message: msg });
      conditions.push({ type: 'Complete', status: 'True', lastProbeTime: now, lastTransitionTime: now, reason: 'CompletionsReached', message: msg });
      status['completionTime'] = now;
      record(job, 'Normal', 'Completed', 'Job completed');
    } else if (overBackoff) {
      const msg = 'Job has reached the specified backoff limit';
      conditions.push({ type: 'FailureTarget', status: 'True', lastProbeTime: now, lastTransitionTime: now, reason: 'BackoffLimitExceeded', message: msg });
      conditions.push({ type: 'Failed', status: 'True', lastProbeTime: now, lastTransitionTime: now, reason: 'BackoffLimitExceeded', message: msg });
      record(job, 'Warning', 'BackoffLimitExceeded', msg);
    }
    if (conditions.length) status['conditions'] = conditions;
    if (!jsonEqual(status, old)) await host.update(IDENTITY, JOBS, { ...clone(fresh), status }, 'status');
    if (failure !== undefined) throw failure;
  };

  const queue = new WorkQueue(sync, signal, (_k, err) => onError(err));
  const pods_ = new OwnedIndex(host, PODS, (ownerUid, ev) => {
    const m = meta(ev.object);
    const owner = (m.ownerReferences ?? []).find((r) => r.uid === ownerUid);
    if (owner?.kind === 'Job') queue.add(key(m.namespace ?? '', owner.name));
  });
  const stop = host.watch(JOBS, (ev) => queue.add(key(meta(ev.object).namespace ?? '', meta(ev.object).name ?? '')));
  signal.addEventListener('abort', () => { stop(); pods_.stop(); }, { once: true });
  for (const j of host.list(JOBS)) queue.add(key(meta(j).namespace ?? '', meta(j).name ?? ''));
  return { idle: () => queue.idle() };
}
