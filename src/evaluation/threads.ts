/**
 * The pool's worker threads (piscina): a fixed number, never idled out,
 * each taking `pipeline` batches at once.
 */
import { Piscina } from 'piscina';
import type { WorkerData } from './protocol.ts';

/** The worker module: compiled `.js` beside this file, or the `.ts` source under tsx (which workers must load explicitly). */
function workerModule(): { filename: string; execArgv: string[] | undefined } {
  const source = import.meta.url.endsWith('.ts');
  return {
    filename: new URL(source ? './worker.ts' : './worker.js', import.meta.url).href,
    execArgv: source ? ['--import', import.meta.resolve('tsx')] : undefined,
  };
}

export interface ThreadsConfig {
  workers: number;
  /** Batches one worker takes at once. */
  pipeline: number;
  workerData: WorkerData;
}

export function startThreads(config: ThreadsConfig, on: { onError: (err: unknown) => void; onDestroy: (id: number) => void }): Piscina {
  const { filename, execArgv } = workerModule();
  const piscina = new Piscina({
    filename,
    ...(execArgv ? { execArgv } : {}),
    minThreads: config.workers,
    maxThreads: config.workers,
    // The bound is the pool's (EvaluationPool#attempt): piscina does not count tasks that carry an abort signal against its maxQueue.
    maxQueue: Number.MAX_SAFE_INTEGER,
    // A second batch waits on the worker's own port (PIPELINE): the worker starts it as soon as it
    // finishes the first, without a round trip through the main thread (on a busy machine each wake-up
    // of the other thread waits for a time slice). A batch stuck behind a slow one is taken back
    // (batcher.ts), so it is not held hostage.
    concurrentTasksPerWorker: config.pipeline,
    idleTimeout: Number.MAX_SAFE_INTEGER,
    recordTiming: false,
    workerData: config.workerData,
  });
  piscina.on('error', on.onError);
  piscina.on('workerDestroy', (worker: { id: number }) => on.onDestroy(worker.id));
  return piscina;
}
