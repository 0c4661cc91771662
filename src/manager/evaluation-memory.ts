/**
 * A replica's bound on evaluation memory (adr/0018): the limits of every
 * evaluation thread (admission's, the audit's and the rule check's), and the one store of the
 * (rule, object) pairs that exhausted them, shared by both pools, loaded
 * from and kept in `--evaluation-state-dir` when one is given.
 */
import type { Logger } from 'pino';
import type { ServeConfig } from '../config/options.ts';
import { loadPoisonPairs, persistPoisonPairs } from '../evaluation/poison-file.ts';
import { PoisonPairs } from '../evaluation/poison-pairs.ts';
import { threadMemoryFor, type ThreadMemory } from '../evaluation/thread-memory.ts';
import { RULE_CHECK_THREADS } from '../evaluation/rule-check.ts';
import { LogKey } from '../observability/log-keys.ts';
import type { ModeRunnable } from './mode.ts';

export interface EvaluationMemory {
  /** Each evaluation thread's V8 limits. */
  threads: ThreadMemory;
  /** The pairs remembered; both pools mirror them into their threads. */
  poison: PoisonPairs;
  /** Says the threads' limit at start, and keeps the pairs in the state directory while the replica runs (when there is one). */
  runnables: ModeRunnable[];
}

/** Threads of the audit's own evaluation pool (adr/0013), counted in the derivation beside admission's. */
export const AUDIT_THREADS = 1;

export async function evaluationMemory(
  config: Readonly<Pick<ServeConfig, 'evaluationWorkers' | 'evaluationMemory' | 'evaluationStateDir' | 'policies'>>,
  replicaMiB: number,
  log: Logger,
): Promise<EvaluationMemory> {
  // Admission's threads, the audit's (cluster mode) and the thread that checks rules at apply (rule-check.ts).
  const threads = threadMemoryFor(replicaMiB, config.evaluationWorkers + (config.policies === '' ? AUDIT_THREADS : 0) + RULE_CHECK_THREADS, config.evaluationMemory);
  const poison = new PoisonPairs();
  const dir = config.evaluationStateDir;
  if (dir !== '') {
    const n = await loadPoisonPairs(dir, poison, log);
    if (n > 0) log.warn({ [LogKey.count]: n, [LogKey.dir]: dir }, 'remembered (rule, object) pairs that exhausted an evaluation thread\'s memory: they give error without running');
  }
  // Said when the replica starts, not while it is built: a configuration that fails prints nothing but its problems.
  const limits = `evaluation threads limited to ${threads.maxOldGenerationSizeMb} MiB heap each (${config.evaluationMemory > 0 ? '--evaluation-memory' : `from ${replicaMiB} MiB of replica memory`})`;
  const runnable: ModeRunnable['runnable'] = {
    name: 'evaluation-memory',
    async start(signal) {
      log.info({ [LogKey.count]: threads.maxOldGenerationSizeMb }, limits);
      const written = dir === '' ? undefined : persistPoisonPairs(dir, poison, log, signal);
      if (!signal.aborted) await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      await written?.();
    },
  };
  return { threads, poison, runnables: [{ runnable, group: 'probes' }] };
}
