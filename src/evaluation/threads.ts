/**
 * The pool's worker threads (piscina): a fixed number, never idled out,
 * each taking `pipeline` batches at once.
 */
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Piscina } from 'piscina';
import type { WorkerData } from './protocol.ts';
import type { ThreadMemory } from './thread-memory.ts';

/**
 * A worker module `name` beside the module at `base` (its import.meta.url):
 * the compiled `.js`, or the `.ts` source under tsx (which workers must load
 * explicitly).
 */
export function workerModule(base: string, name: string): { filename: string; execArgv: string[] | undefined } {
  const source = base.endsWith('.ts');
  return {
    filename: new URL(source ? `./${name}.ts` : `./${name}.js`, base).href,
    execArgv: source ? ['--import', import.meta.resolve('tsx')] : undefined,
  };
}

export interface ThreadsConfig {
  workers: number;
  /** Batches one worker takes at once. */
  pipeline: number;
  workerData: WorkerData;
  /** Each thread's V8 limits (thread-memory.ts); undefined: V8's defaults. */
  memory?: ThreadMemory | undefined;
}

type LoadBalancer = NonNullable<NonNullable<ConstructorParameters<typeof Piscina>[0]>['loadBalancer']>;

/**
 * Gives a task to the worker with the fewest tasks, up to `perWorker` each,
 * whether the tasks carry an abort signal or not.
 *
 * Why not piscina's default (LeastBusyBalancer): it gives a task with a
 * signal only to an idle worker (and reports a worker running one as
 * `currentUsage` Infinity), so the second batch the pool sends (PIPELINE)
 * waited in piscina's queue on the main thread, and the worker slept until
 * the main thread woke up, read the first batch's answer and posted the
 * second: a round trip between the threads per batch. With this balancer the
 * second batch waits on the worker's own port and starts as soon as the first
 * ends. Terminating a worker (the signal of the batch it runs) fails every
 * task on it (piscina's WorkerInfo.destroy); the batcher queues again the
 * items of the batch that had not started (batcher.ts, #finished).
 */
export function pipelineBalancer(perWorker: number): LoadBalancer {
  return (_task, workers) => {
    let best: (typeof workers)[number] | null = null;
    let least = perWorker;
    for (const w of workers) {
      if (w.terminating || w.destroyed) continue;
      // currentUsage is Infinity for a worker running exactly one task with a signal.
      const n = w.currentUsage === Number.POSITIVE_INFINITY ? 1 : w.currentUsage;
      if (n < least) {
        best = w;
        least = n;
        if (n === 0) break;
      }
    }
    return best;
  };
}

export function startThreads(config: ThreadsConfig, on: { onError: (err: unknown) => void; onDestroy: (id: number) => void }): Piscina {
  const { filename, execArgv } = workerModule(import.meta.url, 'worker');
  const piscina = new Piscina({
    filename,
    ...(execArgv ? { execArgv } : {}),
    minThreads: config.workers,
    maxThreads: config.workers,
    // The bound is the pool's (EvaluationPool#attempt): piscina does not count tasks that carry an abort signal against its maxQueue.
    maxQueue: Number.MAX_SAFE_INTEGER,
    // A second batch waits on the worker's own port (PIPELINE, and pipelineBalancer): the worker starts it
    // as soon as it finishes the first, without a round trip through the main thread (on a busy machine
    // each wake-up of the other thread waits for a time slice). A batch stuck behind a slow one is taken
    // back (batcher.ts), so it is not held hostage.
    concurrentTasksPerWorker: config.pipeline,
    loadBalancer: pipelineBalancer(config.pipeline),
    idleTimeout: Number.MAX_SAFE_INTEGER,
    recordTiming: false,
    workerData: config.workerData,
    ...(config.memory ? { resourceLimits: { ...config.memory } } : {}),
  });
  piscina.on('error', on.onError);
  piscina.on('workerDestroy', (worker: { id: number }) => on.onDestroy(worker.id));
  return piscina;
}

/**
 * What waits for the threads piscina terminated (an abandoned evaluation's,
 * a crashed one) to exit. Why: piscina replaces a thread when the old one's
 * `exit` arrives, and when that happens after its close() returned (which
 * resets its closing flags), the replacement starts after the pool closed
 * and nothing ever stops it: a process that should end stays alive. The
 * pool's close waits for them (at most `ms`) before closing piscina.
 */
export function dyingThreads(piscina: Piscina): (ms: number) => Promise<void> {
  const dying = new Set<Promise<void>>();
  piscina.on('workerDestroy', (worker: { id: number }) => {
    // Still listed while piscina destroys it; an exited thread's id is -1 (nothing to wait for).
    const thread = worker.id < 0 ? undefined : piscina.threads.find((t) => t.threadId === worker.id);
    if (thread === undefined) return;
    const exited = once(thread, 'exit').then(
      () => undefined,
      () => undefined,
    );
    dying.add(exited);
    void exited.then(() => dying.delete(exited));
  });
  return async (ms) => {
    if (dying.size > 0) await Promise.race([Promise.all(dying), sleep(ms, undefined, { ref: false })]);
  };
}
