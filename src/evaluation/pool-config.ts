/**
 * The evaluation pool's configuration (pool.ts): what it is built with, and
 * the defaults of what the caller may leave out.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { RuleStats } from './rule-stats.ts';
import type { EvaluationInput, RuleSet, RuleVerdict } from '../policy/index.ts';
import { exemptNamespaces, type ExemptNamespaces } from '../policy/review/answer.ts';
import type { ParamStore, VapSet } from '../policy/vap/index.ts';
import type { NamespaceLabelStore } from '../policy/namespace-label-store.ts';
import { MAX_BATCH, type WorkerData } from './protocol.ts';
import type { PoisonPairs } from './poison-pairs.ts';
import type { ThreadMemory } from './thread-memory.ts';
import type { BatcherConfig } from './batcher.ts';

/** Tasks waiting per worker before new ones are refused: at ~50 µs per typical evaluation, 64 is a few ms of work. */
export const QUEUE_PER_WORKER = 64;
/** The smallest queue bound, so that a burst of an API server's concurrent requests (it sends up to ~200) to a small pool is not refused. */
export const MIN_QUEUE = 128;
/** Batches sent to one worker at once: the one it runs and the next. */
export const PIPELINE = 2;

/**
 * Batches per worker for a process that may run on `cpus` CPUs. The waiting
 * batch lets a worker go on without waiting for the main thread to send it
 * work, which pays only when the two can run at the same time. On one CPU
 * (a replica pinned to one core) they never do: the waiting batch only
 * splits the requests that arrive together into twice as many batches, each
 * costing a wake-up of both threads; measured there, 4–10% more CPU per
 * review (docs/benchmarks.md, session 10).
 */
export function pipelineFor(cpus: number): number {
  return cpus > 1 ? PIPELINE : 1;
}

export interface EvaluationPoolConfig {
  /** Names the pool in logs, metrics and errors (`admission`, `audit`). */
  name: string;
  /** Worker threads (`--evaluation-workers` for admission). */
  workers: number;
  /** The evaluation deadline, ms (`--evaluation-timeout`). */
  timeoutMs: number;
  /** Tasks that may wait for a worker. @default max(MIN_QUEUE, QUEUE_PER_WORKER × workers) */
  maxQueue?: number;
  /**
   * How long past the deadline a running evaluation may take before its
   * worker is terminated: the cooperative checks end most evaluations within
   * one regex step of the deadline, and replacing a worker costs a thread
   * start and a recompile of every rule. @default max(20, timeoutMs / 10)
   */
  graceMs?: number;
  /**
   * How long a batch of evaluations may run before the ones it has not
   * finished are taken back and sent again (batcher.ts): the longest that
   * a slow evaluation delays the others sent with it. A typical batch takes
   * a few ms. @default min(250, max(10, timeoutMs / 4))
   */
  reclaimMs?: number;
  /** Evaluations one task carries at most. @default MAX_BATCH (32) */
  maxBatch?: number;
  /** Batches sent to one worker at once (the one it runs and those waiting on its port). @default PIPELINE (2) */
  pipeline?: number;
  /** Reviews ({@link EvaluationPool.review}): namespaces allowed unevaluated, the install namespace included, built once (replica.ts). @default none */
  exempt?: ExemptNamespaces;
  /**
   * How long a request may take in the pool, queue and evaluations
   * included (its answer is due then); Infinity: no one waits (the audit).
   * An evaluation's own budget (`timeoutMs`) starts when a worker starts it;
   * the first attempt must start early enough to have all of it
   * (`requestMs - timeoutMs - graceMs` after submission), else it is refused
   * as overload; a retry after an abandon gets what is left.
   * @default Infinity
   */
  requestMs?: number;
  /**
   * With no `requestMs`: how long an evaluation may wait for a worker before
   * it is settled as never started, so that nothing waits for ever on
   * workers that cannot start. Long: a worker starts in seconds on a busy
   * machine, and the audit's few loops may queue behind a stuck rule or
   * two. @default max(120 s, 10 × timeoutMs)
   */
  startWithinMs?: number;
  /**
   * Evaluations one flow (a namespace, cluster-scoped objects, Portal's
   * kinds: flows.ts) may have waiting or running; past it the flow's next
   * one is refused as overload. A flow that floods fills its own share, not
   * the queue. @default max(MIN_FLOW_QUEUE, maxQueue / 4)
   */
  flowQueue?: number;
  /**
   * V8 resourceLimits of each thread (thread-memory.ts): a thread that
   * exceeds them is replaced, and the rule it was running gives `error` for
   * that object from then on (poison-pairs.ts). Undefined: V8's defaults
   * (tests; the replica and `portal test` always set them).
   */
  memory?: ThreadMemory | undefined;
}

/** The smallest per-flow bound: the API server's own queueLengthLimit for a flow is 50 (Priority and Fairness). */
export const MIN_FLOW_QUEUE = 32;
/**
 * A flow's credit per turn of the fair queue (fair-queue.ts), ms of worker
 * time: about 20 typical evaluations (~50 µs each), so a turn fills a
 * batch of cheap ones, while a flow whose rules take 100s of ms waits
 * hundreds of turns of the others for each one.
 */
export const QUANTUM_MS = 1;
/**
 * A batch estimated to take longer than this (ms) goes only to an idle
 * worker: queued on a busy one's port, whatever comes after it would wait
 * behind it. 10 ms is a full batch of typical evaluations several times over.
 */
export const HEAVY_BATCH_MS = 10;
/**
 * How long one first-use rule compile may take in a thread (adr/0021): a
 * 64 KB schema compiles in ~0.15–1.5 s on a loaded 2-vCPU VM; past this
 * the thread is stuck, not slow. An admission review's own bound
 * (`requestMs`) comes first anyway.
 */
export const FIRST_USE_COMPILE_MS = 20_000;

/**
 * The admission pool's `requestMs` for an evaluation timeout: the chart
 * sets `--evaluation-timeout` to 40% of the webhook's timeoutSeconds
 * (options.ts), so the API server waits 2.5 × it; 90% of that leaves the
 * rest for the transfer both ways. 2 s → 4.5 s of a 5 s webhook timeout.
 */
export function admissionRequestMs(timeoutMs: number): number {
  return Math.round(timeoutMs * 2.25);
}


/** The stores the workers mirror; `rules` always, VAPs and params for the audit. */
export interface PolicyStores {
  rules: RuleSet;
  vaps?: VapSet | undefined;
  params?: ParamStore | undefined;
  /** Cluster mode: the namespace labels reviews are answered with (file mode: only the name label). */
  namespaces?: NamespaceLabelStore | undefined;
  /** The (rule, object) pairs that exhausted a thread's memory; shared by a replica's pools and kept across restarts (poison-file.ts). @default the pool's own */
  poison?: PoisonPairs | undefined;
}

/** What a rule error is reported with: the request's identifiers. */
export type RequestIdentity = Pick<EvaluationInput, 'operation' | 'kind' | 'namespace' | 'name'>;

export interface EvaluationPoolDeps {
  logger: Logger;
  registry?: Registry | undefined;
  /** Sees each rule's `error` verdict at admission (metrics, Events), on the main thread; must not throw. */
  onRuleError?: ((verdict: RuleVerdict, request: RequestIdentity) => void) | undefined;
  /** Reviews: where the workers' per-rule counts are read (rule-stats.ts); absent: not counted. */
  ruleStats?: RuleStats | undefined;
}

/** `config` with every option it leaves out set to its default (see each option). */
export function withDefaults(config: EvaluationPoolConfig): Required<EvaluationPoolConfig> {
  return {
    maxQueue: Math.max(MIN_QUEUE, QUEUE_PER_WORKER * config.workers),
    graceMs: Math.max(20, Math.round(config.timeoutMs / 10)),
    reclaimMs: Math.min(250, Math.max(10, Math.round(config.timeoutMs / 4))),
    pipeline: PIPELINE,
    exempt: exemptNamespaces([]),
    requestMs: Number.POSITIVE_INFINITY,
    startWithinMs: Math.max(120_000, 10 * config.timeoutMs),
    flowQueue: Math.max(MIN_FLOW_QUEUE, Math.floor((config.maxQueue ?? Math.max(MIN_QUEUE, QUEUE_PER_WORKER * config.workers)) / 4)),
    memory: undefined,
    ...config,
    // The progress slot times at most MAX_BATCH items (protocol.ts).
    maxBatch: Math.min(MAX_BATCH, config.maxBatch ?? MAX_BATCH),
  };
}

/** The batcher's configuration (batcher.ts) for a pool's (`withDefaults`). */
export function batcherConfig(config: Required<EvaluationPoolConfig>): BatcherConfig {
  return {
    workers: config.workers,
    batches: config.pipeline * config.workers,
    maxBatch: config.maxBatch,
    timeoutMs: config.timeoutMs,
    graceMs: config.graceMs,
    compileMs: FIRST_USE_COMPILE_MS,
    reclaimMs: config.reclaimMs,
    // Deadlines are enforced within this of `deadline + grace`; grace is at least 20 ms.
    tickMs: Math.max(5, Math.min(25, Math.round(config.graceMs / 2))),
    quantumMs: QUANTUM_MS,
    heavyMs: HEAVY_BATCH_MS,
  };
}

/** What each of a pool's threads starts with (protocol.ts); `channel` is the pool's replication's. */
export function workerDataFor(
  config: Required<EvaluationPoolConfig>,
  o: { channel: string; progress: SharedArrayBuffer; mirrorsNamespaces: boolean; ruleStats: RuleStats | undefined },
): WorkerData {
  return {
    channel: o.channel,
    progress: o.progress,
    // A Set crosses to the thread as a Set (structured clone): not rebuilt there.
    exempt: config.exempt,
    namespaceLabels: o.mirrorsNamespaces ? 'mirror' : 'name-only',
    ruleStats: o.ruleStats?.channelName,
  };
}
