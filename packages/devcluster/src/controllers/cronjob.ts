/**
 * The CronJob controller: creates a Job `<cronjob>-<minutes since epoch>` at
 * each scheduled time (only the most recent missed run after a pause, as
 * kube), honours suspend, concurrencyPolicy (Allow / Forbid / Replace),
 * startingDeadlineSeconds and the jobs history limits, and keeps
 * status.active / lastScheduleTime / lastSuccessfulTime. It sleeps until
 * the next run with one timer per CronJob (no polling). The clock is
 * injectable so tests need not wait for a minute boundary.
 */
import { ApiError } from '../apiserver/status.ts';
import { clone, jsonEqual, meta, nowTimestamp, type Obj } from '../apiserver/types.ts';
import { lastRun, nextRun, parseCron, CronError, type Schedule } from './cron.ts';
import type { Recorder } from './events.ts';
import { controllerIdentity, CRONJOBS, JOBS, ownerRef, type Host } from './host.ts';
import { jobFinished } from './job.ts';
import { runOwnerController, splitKey } from './queue.ts';

const IDENTITY = controllerIdentity('cronjob-controller');
const SCHEDULED_AT = 'batch.kubernetes.io/cronjob-scheduled-timestamp';

function rfc3339(ms: number): string {
  return nowTimestamp(ms);
}

/** The Job of the run at `due`: named after its minute, so a run is created once. */
function jobFor(cj: Obj, due: number): Obj {
  const { name, namespace: ns } = meta(cj);
  const spec = (cj['spec'] ?? {}) as Obj;
  const tpl = clone((spec['jobTemplate'] ?? {}) as Obj);
  const tm = (tpl['metadata'] ?? {}) as Obj;
  const jobName = `${name ?? ''}-${Math.floor(due / 60_000)}`;
  const job: Obj = {
    apiVersion: 'batch/v1', kind: 'Job',
    metadata: {
      name: jobName, namespace: ns, labels: tm['labels'] ?? {},
      annotations: { ...((tm['annotations'] ?? {}) as Record<string, string>), [SCHEDULED_AT]: rfc3339(due) },
      ownerReferences: [ownerRef('batch/v1', 'CronJob', cj)],
    },
    spec: tpl['spec'] ?? {},
  };
  return job;
}

/** The run to start now, if any: the most recent missed one, unless past startingDeadlineSeconds or forbidden by a running Job. */
function dueRun(cj: Obj, schedule: Schedule, t: number, running: boolean, record: Recorder): number | undefined {
  const cm = meta(cj);
  const spec = (cj['spec'] ?? {}) as Obj;
  const old = (cj['status'] ?? {}) as Obj;
  const since = Date.parse(String(old['lastScheduleTime'] ?? cm.creationTimestamp ?? rfc3339(t)));
  // The most recent missed run (kube starts only that one).
  const latest = lastRun(schedule, t);
  let due = latest !== undefined && latest > since ? latest : undefined;
  const deadline = typeof spec['startingDeadlineSeconds'] === 'number' ? spec['startingDeadlineSeconds'] * 1000 : undefined;
  if (due !== undefined && deadline !== undefined && t - due > deadline) {
    record(cj, 'Warning', 'MissSchedule', `Missed scheduled time to start a job: ${rfc3339(due)}`);
    due = undefined;
  }
  const policy = spec['concurrencyPolicy'] ?? 'Allow';
  if (due !== undefined && policy === 'Forbid' && running) {
    record(cj, 'Normal', 'JobAlreadyActive', 'Not starting job because prior execution is running and concurrency policy is Forbid');
    due = undefined;
  }
  return due;
}

export function runCronJobController(host: Host, record: Recorder, now: () => number, onError: (err: unknown) => void, signal: AbortSignal): { idle(): Promise<void> } {
  const sync = async (k: string): Promise<void> => {
    const [ns, name] = splitKey(k);
    const cj = host.get(CRONJOBS, ns, name);
    if (!cj || meta(cj).deletionTimestamp) return;
    const cm = meta(cj);
    const spec = (cj['spec'] ?? {}) as Obj;
    const old = (cj['status'] ?? {}) as Obj;
    const status: Obj = clone(old);
    const owned = jobs.owned(cm.uid ?? '').filter((j) => !meta(j).deletionTimestamp);
    const active = owned.filter((j) => !jobFinished(j));
    const finished = owned.filter((j) => jobFinished(j));

    // History limits: the oldest finished Jobs go (their Pods follow by garbage collection).
    const byAge = (a: Obj, b: Obj): number => String(meta(a).creationTimestamp).localeCompare(String(meta(b).creationTimestamp));
    const prune = async (list: Obj[], limit: number): Promise<void> => {
      for (const j of list.sort(byAge).slice(0, Math.max(0, list.length - limit))) {
        await host.delete(IDENTITY, JOBS, ns, meta(j).name ?? '', { uid: meta(j).uid ?? '' }).catch(onError);
        record(cj, 'Normal', 'SuccessfulDelete', `Deleted job ${meta(j).name ?? ''}`);
      }
    };
    await prune(finished.filter((j) => jobFinished(j) === 'Complete'), typeof spec['successfulJobsHistoryLimit'] === 'number' ? spec['successfulJobsHistoryLimit'] : 3);
    await prune(finished.filter((j) => jobFinished(j) === 'Failed'), typeof spec['failedJobsHistoryLimit'] === 'number' ? spec['failedJobsHistoryLimit'] : 1);
    const lastSuccess = finished.filter((j) => jobFinished(j) === 'Complete')
      .map((j) => String(((j['status'] ?? {}) as Obj)['completionTime'] ?? '')).sort().at(-1);
    if (lastSuccess) status['lastSuccessfulTime'] = lastSuccess;

    let schedule;
    try {
      schedule = parseCron(String(spec['schedule'] ?? ''));
    } catch (e) {
      if (!(e instanceof CronError)) throw e;
      record(cj, 'Warning', 'UnparseableSchedule', `unparseable schedule: ${JSON.stringify(spec['schedule'])} : ${e.message}`);
      return;
    }
    const t = now();
    if (spec['suspend'] !== true) {
      const due = dueRun(cj, schedule, t, active.length > 0, record);
      const policy = spec['concurrencyPolicy'] ?? 'Allow';
      if (due !== undefined) {
        if (policy === 'Replace') {
          for (const j of active) {
            await host.delete(IDENTITY, JOBS, ns, meta(j).name ?? '', { uid: meta(j).uid ?? '' }).catch(onError);
            record(cj, 'Normal', 'SuccessfulDelete', `Deleted job ${meta(j).name ?? ''}`);
          }
        }
        const job = jobFor(cj, due);
        const jobName = String(meta(job).name);
        try {
          await host.create(IDENTITY, JOBS, ns, job);
          record(cj, 'Normal', 'SuccessfulCreate', `Created job ${jobName}`);
        } catch (e) {
          if (!(e instanceof ApiError && e.reason === 'AlreadyExists')) {
            record(cj, 'Warning', 'FailedCreate', `Error creating job: ${(e as Error).message}`);
            throw e;
          }
        }
        status['lastScheduleTime'] = rfc3339(due);
      }
    }
    const refs = jobs.owned(cm.uid ?? '').filter((j) => !meta(j).deletionTimestamp && !jobFinished(j))
      .sort(byAge).map((j) => ({ kind: 'Job', namespace: ns, name: meta(j).name, uid: meta(j).uid, apiVersion: 'batch/v1', resourceVersion: meta(j).resourceVersion }));
    if (refs.length) status['active'] = refs;
    else delete status['active'];
    const fresh = host.get(CRONJOBS, ns, name);
    if (fresh && meta(fresh).uid === cm.uid && !jsonEqual(status, (fresh['status'] ?? {}) as Obj)) {
      await host.update(IDENTITY, CRONJOBS, { ...clone(fresh), status }, 'status');
    }
    const next = nextRun(schedule, t);
    if (next !== undefined) queue.addAfter(k, next - t + 1);
  };

  const { owned: jobs, queue, idle } = runOwnerController(host, { name: 'cronjob-controller', kind: 'CronJob', resource: CRONJOBS, owns: JOBS }, sync, onError, signal);
  return { idle };
}
