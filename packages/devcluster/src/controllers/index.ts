/**
 * The workload controllers and the simulated node of the embedded API server
 * (kube-controller-manager, kube-scheduler and one kubelet, in the spirit of
 * kwok), run in its process against its store and its REST semantics. Each
 * controller is driven by store events through a work queue; `idle()` waits
 * until every queue is drained (for benches and tests).
 */
import type { Logger } from 'pino';
import type { Cluster } from '../apiserver/cluster.ts';
import { recorder } from './events.ts';
import { clusterHost, controllerIdentity } from './host.ts';
import { runCronJobController } from './cronjob.ts';
import { runDeploymentController } from './deployment.ts';
import { runJobController } from './job.ts';
import { runNode } from './node.ts';
import { runReplicaSetController } from './replicaset.ts';
import { LogKey, toError } from 'portal/dev-api';

export { NODE_NAME } from './node.ts';

export interface ControllersOptions {
  /** How long a run-to-completion Pod (a Job's) runs on the simulated node. @default 1000 */
  podCompleteAfterMs?: number;
  /** The CronJob controller's clock (ms since epoch). @default Date.now */
  now?: () => number;
}

export interface Controllers { idle(): Promise<void> }

export async function startControllers(cluster: Cluster, opts: ControllersOptions, logger: Logger, signal: AbortSignal): Promise<Controllers> {
  const host = clusterHost(cluster);
  const log = (component: string) => (err: unknown): void => {
    if (signal.aborted) return;
    // Conflicts and denials are retried with backoff; they are normal, hence debug.
    logger.debug({ [LogKey.component]: component, [LogKey.error]: toError(err) }, 'controller sync failed; retrying');
  };
  const rec = (name: string, component: string) => recorder(host, controllerIdentity(name), component, log(component));
  const node = await runNode(host, { completeAfterMs: opts.podCompleteAfterMs ?? 1000, onError: log('kubelet') }, signal);
  const parts = [
    node,
    runReplicaSetController(host, rec('replicaset-controller', 'replicaset-controller'), log('replicaset-controller'), signal),
    runDeploymentController(host, rec('deployment-controller', 'deployment-controller'), log('deployment-controller'), signal),
    runJobController(host, rec('job-controller', 'job-controller'), log('job-controller'), signal),
    runCronJobController(host, rec('cronjob-controller', 'cronjob-controller'), opts.now ?? Date.now, log('cronjob-controller'), signal),
  ];
  return {
    // A controller's write wakes another, so wait until all are idle at once.
    async idle() {
      for (let i = 0; i < 100; i++) {
        await Promise.all(parts.map((p) => p.idle()));
        await new Promise((r) => setImmediate(r));
        let busy = false;
        for (const p of parts) {
          let done = false;
          void p.idle().then(() => { done = true; });
          await Promise.resolve();
          if (!done) busy = true;
        }
        if (!busy) return;
      }
    },
  };
}
