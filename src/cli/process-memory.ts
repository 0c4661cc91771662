/**
 * What a CLI command that starts evaluation threads reads of its process
 * (adr/0018): the memory the threads' limits derive from, and V8's heap
 * flags, which must be cleared before a thread starts for its own limits to
 * apply, and `portal test`'s `--evaluation-memory`. Shared by `portal serve`
 * / `portal dev` replicas and `portal test`.
 */
import { totalmem } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { threadMemoryFor, type ThreadMemory } from '../evaluation/thread-memory.ts';

/** This process's memory, MiB: its cgroup limit (a container's `limits.memory`), else the machine's. */
export function replicaMemoryMiB(): number {
  const total = totalmem();
  const constrained = process.constrainedMemory();
  return Math.floor((constrained > 0 && constrained < total ? constrained : total) / 1048576);
}

/**
 * Lets the evaluation threads' resourceLimits apply (adr/0018). V8's heap
 * flags are process-wide, and when set (the chart's NODE_OPTIONS caps the
 * main thread's heap with --max-old-space-size and --max-semi-space-size)
 * they override every worker's resourceLimits: a worker would get the main
 * thread's cap. The main heap is configured at start-up, so clearing them
 * now leaves its cap as it is and lets each worker have its own.
 */
export function releaseThreadHeapFlags(): void {
  setFlagsFromString('--max-old-space-size=0');
  setFlagsFromString('--max-semi-space-size=0');
}

/** `portal serve --evaluation-memory`'s bound too (config/options.ts). */
const MAX_EVALUATION_MEMORY_MIB = 65_536;

/** What `--evaluation-memory MIB` asks of `portal test`'s evaluation thread (0 or absent: derived from this process's memory), or why it cannot be read. */
export function evaluationMemoryFlag(value: string | undefined): { memory: ThreadMemory } | { problem: string } {
  const mib = value === undefined ? 0 : Number(value);
  if (!Number.isInteger(mib) || mib < 0 || mib > MAX_EVALUATION_MEMORY_MIB) {
    return { problem: `--evaluation-memory "${value}" is not a whole number of MiB from 0 to ${MAX_EVALUATION_MEMORY_MIB} (0: from the machine's memory)` };
  }
  return { memory: threadMemoryFor(replicaMemoryMiB(), 1, mib) };
}
