/**
 * `portal test` evaluates in one worker thread under the same V8
 * resourceLimits as a replica's evaluation threads (thread-memory.ts,
 * adr/0018), so that a (rule, resource) pair that allocates without bound
 * ends that thread, not the process.
 *
 * The main thread sends a job's policies (the thread builds an
 * OfflineEvaluator from them), then its resources one at a time, so the
 * thread holds one resource and the main thread knows which one a death
 * happened on. Before each rule the thread writes its key in a progress
 * slot (src/evaluation/progress.ts), so when it dies of
 * ERR_WORKER_OUT_OF_MEMORY the main thread knows the pair, starts another
 * thread and sends the resource again with the pair: that rule gives
 * `error` on that resource ("evaluating it on Pod a/big exhausted the
 * evaluation thread's memory (N MiB heap)"), every other rule and resource
 * is evaluated as usual. A VAP that exhausts it, or a death outside any rule
 * (receiving the resource), makes that resource a problem (bad input, like
 * a VAP cost overrun); a death while building the evaluator, every resource
 * left. Each death adds a pair or settles a resource, so a job ends after at
 * most one death per pair.
 *
 * Why not the replicas' EvaluationPool: it replicates live stores to several
 * threads, batches reviews and enforces deadlines; `portal test` evaluates
 * one fixed set of policies on a list of files, once.
 */
import { Worker } from 'node:worker_threads';
import { describeObject, outOfMemoryMessage } from '../../evaluation/poison-pairs.ts';
import { ProgressSlots } from '../../evaluation/progress.ts';
import { SLOT_BYTES } from '../../evaluation/protocol.ts';
import { describeThreadMemory, isOutOfMemory, type ThreadMemory } from '../../evaluation/thread-memory.ts';
import { workerModule } from '../../evaluation/threads.ts';
import type { KubeObject } from '../../policy/index.ts';
import { describe, VAP_KEY, type NamespaceContext, type OfflineEvaluation, type OfflineJudging, type OfflinePolicySet, type OfflineRequest } from './evaluator.ts';
import type { Resource } from './resources.ts';

/** What the thread builds its OfflineEvaluator from (the constructor's arguments). */
export interface EvaluatorSetup {
  policies: OfflinePolicySet;
  namespaces: NamespaceContext;
  params: readonly { source: string; object: KubeObject }[];
  judging: OfflineJudging;
}

export interface OfflineItem {
  resource: Resource;
  request: OfflineRequest;
}

/** What the main thread sends: the policies of a job (answered `ready`), then each item (answered with its result). */
export type ToThread =
  | { type: 'setup'; job: number; setup: EvaluatorSetup }
  /** `poisoned`: rules (RuleSet keys) that exhausted the thread's memory on this item, with their `error` message. */
  | { type: 'item'; job: number; index: number; item: OfflineItem; poisoned: [string, string][] };

export type ThreadAnswer = { type: 'ready'; job: number } | { type: 'result'; job: number; index: number; evaluation: OfflineEvaluation };

export interface ThreadData {
  progress: SharedArrayBuffer;
}

/** An answer, or the thread's death (with the rule it was running, if it wrote one for this item). */
type Reply = { ok: true; answer: ThreadAnswer } | { ok: false; error: unknown; key: string | undefined };

const problemOnly = (message: string): OfflineEvaluation => ({ verdicts: [], overruns: [], problems: [message] });

export class EvaluationThread {
  readonly #memory: ThreadMemory;
  readonly #progress = new SharedArrayBuffer(SLOT_BYTES);
  readonly #slots = new ProgressSlots(this.#progress);
  #worker: Worker | undefined;
  /** The job the thread holds the policies of. */
  #ready = 0;
  #jobs = 0;

  constructor(memory: ThreadMemory) {
    this.#memory = memory;
  }

  /** Starts the thread before the first job: it loads its modules while the main thread reads the inputs. */
  start(): void {
    this.#worker ??= this.#start();
  }

  /** Every item's evaluation, in order; never rejects for what an item does to the thread. */
  async evaluate(setup: EvaluatorSetup, items: readonly OfflineItem[]): Promise<OfflineEvaluation[]> {
    const job = ++this.#jobs;
    const results: OfflineEvaluation[] = [];
    const poisoned = new Map<number, [string, string][]>();
    while (results.length < items.length) {
      const index = results.length;
      if (this.#ready !== job) {
        const ready = await this.#send({ type: 'setup', job, setup }, index);
        if (!ready.ok) return [...results, ...items.slice(index).map((it) => problemOnly(`${describe(it.resource.ref)} could not be evaluated: ${this.#failure(ready.error)}`))];
        this.#ready = job;
      }
      const item = items[index]!;
      const mine = poisoned.get(index) ?? [];
      const reply = await this.#send({ type: 'item', job, index, item, poisoned: mine }, index);
      if (reply.ok) {
        results.push((reply.answer as Extract<ThreadAnswer, { type: 'result' }>).evaluation);
        continue;
      }
      // The thread died on this item: a Portal rule that exhausted its memory is evaluated again as `error`;
      // anything else settles the item as a problem.
      const what = this.#describe(item);
      if (isOutOfMemory(reply.error) && reply.key !== undefined && !reply.key.startsWith(VAP_KEY) && !mine.some(([rule]) => rule === reply.key)) {
        poisoned.set(index, [...mine, [reply.key, outOfMemoryMessage({ describe: what, limitMiB: this.#memory.maxOldGenerationSizeMb })]]);
        continue;
      }
      const running = reply.key?.startsWith(VAP_KEY) ? ` while ValidatingAdmissionPolicy "${reply.key.slice(VAP_KEY.length)}" ran` : '';
      results.push(problemOnly(`evaluating ${what}${running}: ${this.#failure(reply.error)}`));
    }
    return results;
  }

  /** Why the thread ended, for a problem. */
  #failure(error: unknown): string {
    return isOutOfMemory(error)
      ? `exhausted the evaluation thread's memory (${describeThreadMemory(this.#memory)}); give portal test more with --evaluation-memory, or fix the rule or the resource`
      : `the evaluation thread failed: ${error instanceof Error ? error.message : String(error)}`;
  }

  /** The resource as a poison pair names it: `Pod tenant-a/big` (`(CREATE)` for a suite's request). */
  #describe({ resource, request }: OfflineItem): string {
    const deleting = request.operation === 'DELETE';
    return describeObject({
      ...resource.input,
      operation: request.operation,
      object: deleting ? null : resource.input.object,
      oldObject: deleting ? resource.input.object : (request.oldObject ?? null),
    });
  }

  /** Sends a message (starting a thread if none runs) and waits for its answer or the thread's death. */
  #send(message: ToThread, index: number): Promise<Reply> {
    const worker = (this.#worker ??= this.#start());
    this.#slots.reset(0, 0);
    return new Promise<Reply>((resolve) => {
      let error: unknown;
      const onMessage = (m: ThreadAnswer): void => {
        const mine = m.job === message.job && (message.type === 'setup' ? m.type === 'ready' : m.type === 'result' && m.index === index);
        if (!mine) return;
        off();
        resolve({ ok: true, answer: m });
      };
      const onError = (e: unknown): void => void (error ??= e);
      const onExit = (code: number): void => {
        off();
        this.#worker = undefined;
        this.#ready = 0;
        // Read before another thread starts on the slot; the key counts only if it was written for this item.
        const key = message.type === 'item' && this.#slots.runningIndex(0, message.job) === index ? this.#slots.runningKey(0, message.job) : undefined;
        resolve({ ok: false, error: error ?? new Error(`the thread exited with code ${code}`), key });
      };
      const off = (): void => {
        worker.off('message', onMessage).off('error', onError).off('exit', onExit);
      };
      worker.on('message', onMessage).on('error', onError).on('exit', onExit);
      worker.postMessage(message);
    });
  }

  #start(): Worker {
    const { filename, execArgv } = workerModule(import.meta.url, 'thread-entry');
    const data: ThreadData = { progress: this.#progress };
    return new Worker(new URL(filename), { ...(execArgv ? { execArgv } : {}), workerData: data, resourceLimits: { ...this.#memory } });
  }

  /** Ends the thread (the run is over). */
  async close(): Promise<void> {
    const worker = this.#worker;
    this.#worker = undefined;
    this.#ready = 0;
    await worker?.terminate();
  }
}
