/**
 * How much memory one evaluation thread may use (adr/0018): V8's
 * `resourceLimits` of each worker (piscina passes them). Past them V8 ends
 * the thread (ERR_WORKER_OUT_OF_MEMORY), never the process: the pool
 * replaces the thread and the rule that was running gives `error`
 * (pool.ts, poison-pairs.ts).
 *
 * Derived from the replica's memory M (its cgroup limit, the container's
 * `resources.limits.memory`; the machine's memory when it has none) and the
 * evaluation threads T it runs (admission workers and the audit's):
 *
 *   old generation = clamp(M / (2 × T), 128 MiB, 1 GiB)
 *
 * Half of M for the threads together leaves the other half to the main
 * thread (informer caches, TLS, reports). The floor: a thread holds its own
 * compiled copy of every rule (20-40 MiB with the shipped libraries) and
 * reads reviews of up to the body limit; below it a thread could die
 * compiling the rules, and piscina stops replacing threads that die before
 * they are ready. The ceiling: no single evaluation needs more; past it the
 * object or the rule is hostile. `--evaluation-memory` replaces the
 * derivation.
 *
 * The young generation is capped at 48 MiB (V8's three 16 MiB semi-spaces,
 * as the chart's --max-semi-space-size=16 for the main thread) and the stack
 * at 4 MiB (Node's default, stated so it is bounded on purpose).
 */
export interface ThreadMemory {
  maxOldGenerationSizeMb: number;
  maxYoungGenerationSizeMb: number;
  stackSizeMb: number;
}

export const MIN_THREAD_OLD_MIB = 128;
export const MAX_THREAD_OLD_MIB = 1024;
export const THREAD_YOUNG_MIB = 48;
export const THREAD_STACK_MIB = 4;

/**
 * The limits of each evaluation thread of a replica with `replicaMiB` of
 * memory and `threads` evaluation threads; `oldMiB` > 0 (the flag) is used
 * as it is.
 */
export function threadMemoryFor(replicaMiB: number, threads: number, oldMiB = 0): ThreadMemory {
  const derived = Math.floor(replicaMiB / (2 * Math.max(1, threads)));
  return {
    maxOldGenerationSizeMb: oldMiB > 0 ? oldMiB : Math.min(MAX_THREAD_OLD_MIB, Math.max(MIN_THREAD_OLD_MIB, derived)),
    maxYoungGenerationSizeMb: THREAD_YOUNG_MIB,
    stackSizeMb: THREAD_STACK_MIB,
  };
}

/** `limits` as one line for logs and messages: `256 MiB heap (+48 MiB young)`. */
export function describeThreadMemory(limits: ThreadMemory): string {
  return `${limits.maxOldGenerationSizeMb} MiB heap`;
}

/** True for the error a worker fails with when it reached its resourceLimits. */
export function isOutOfMemory(err: unknown): boolean {
  return err instanceof Error && (err as { code?: unknown }).code === 'ERR_WORKER_OUT_OF_MEMORY';
}
