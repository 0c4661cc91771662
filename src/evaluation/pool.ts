/**
 * The evaluation pool (adr/0013): rules, and ValidatingAdmissionPolicies for
 * the audit, evaluated in worker threads (piscina) so that a rule that takes
 * too long costs one worker, never the event loop that answers probes and
 * every other request.
 *
 * - Policies: each worker compiles its own copy (a rule on first use there,
 *   adr/0021), kept current by the stores' numbered changes (replication.ts);
 *   a task carries the revision it must be evaluated at.
 * - Reviews: an admission review travels whole, as its text; the worker
 *   reads and answers it (policy/review/answer.ts), so the main thread
 *   parses nothing on the common path.
 * - Deadline (`--evaluation-timeout`): it counts from when a worker starts
 *   the evaluation (batcher.ts), never past the request's `requestMs`. The
 *   evaluator checks it between rules and inside regex work (cooperative);
 *   a rule that is still running
 *   `graceMs` after it is abandoned: the task's signal aborts, piscina
 *   terminates the worker and starts another. The rule that was running
 *   (read from shared memory) gets `error`; the input is evaluated again,
 *   once, with that rule skipped and what is left of the request's time, so
 *   every other rule keeps its real verdict. If that attempt is abandoned too (a second slow
 *   rule), every rule not decided gets `error` on the main thread, without
 *   running any rule code. A task that never started before its deadline
 *   (queued behind stuck workers) gets the same: `error` for every rule it
 *   matches. Those verdicts go through failurePolicy and enforcement like
 *   any other error.
 * - Fair queuing (issue 31 item 2): evaluations wait in flows (flows.ts: a
 *   namespace, cluster-scoped objects, Portal's kinds) taken by deficit
 *   round robin charged with measured time (fair-queue.ts), so a namespace
 *   that floods waits behind its own load.
 * - Memory (adr/0018): threads run under resourceLimits (`memory`). One
 *   that exceeds them dies alone; the items of its batches go again, and the
 *   (rule, object) pair it was running is remembered (poison-pairs.ts, on
 *   every thread): `error` at once from then on, as after a deadline.
 * - Queue: bounded (`maxQueue`), and each flow to its share (`flowQueue`);
 *   past either a task is refused at once with a QueueFull error, and so is
 *   a request whose first evaluation could not start in time to be answered
 *   within `requestMs`: overload, answered as such (answerer.ts), not an
 *   internal error and not a policy verdict.
 *
 * Built un-started: the threads start on `start()` or on the first task,
 * whichever comes first; `close()` (idempotent) drains them.
 */
import type { Piscina } from 'piscina';
import type { Logger } from 'pino';
import { ErrorCode, PortalError, toError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';
import { evaluate, type EvaluationBudget, type EvaluationInput, type KubeObject, type RuleVerdict } from '../policy/index.ts';
import type { BindingEvaluation, VapAttributes } from '../policy/vap/index.ts';
import { answerReview, nameOnlyNamespaceLabels, type AnsweredReview, type ReviewContext } from '../policy/review/answer.ts';
import { Batcher, type AttemptWindow } from './batcher.ts';
import { flowOf, reviewFlow } from './flows.ts';
import { flowFull, notStarted, queueFull } from './overload.ts';
import type { Attempt } from './batch-items.ts';
import { batcherConfig, withDefaults, workerDataFor, type EvaluationPoolConfig, type EvaluationPoolDeps, type PolicyStores } from './pool-config.ts';
import { poolMetrics, type PoolMetrics } from './pool-metrics.ts';
import { PolicyReplication } from './replication.ts';
import { dyingThreads, startThreads } from './threads.ts';
import { unpackReview } from './packed-review.ts';
import { epochNow, SLOT_BYTES, type ItemBody, type RuleCheckBody, type TaskOutcomes, type TaskResults } from './protocol.ts';
import { poisonCheck, PoisonPairs } from './poison-pairs.ts';
import { logAbandoned, rememberPoison, reviewWhat } from './abandoned.ts';

type What = () => Pick<EvaluationInput, 'kind' | 'namespace' | 'name'>;

/** What the pool evaluates: a review (sent as its bare text) or one of the other items as the worker receives it. */
type TaskBody = { kind: 'review'; body: string } | Exclude<ItemBody, string>;

/** What the batcher sends for a body: a review as its bare text (protocol.ts, Task). */
function wireBody(body: TaskBody): ItemBody {
  return body.kind === 'review' ? body.body : body;
}

/** How long close waits for terminated threads to exit: a terminated thread exits in milliseconds; this only bounds a thread that does not. */
const DYING_EXIT_MS = 5000;

export class EvaluationPool {
  readonly name: string;
  readonly #config: Required<EvaluationPoolConfig>;
  readonly #stores: PolicyStores;
  readonly #log: Logger;
  readonly #onRuleError: EvaluationPoolDeps['onRuleError'];
  readonly #ruleStats: EvaluationPoolDeps['ruleStats'];
  readonly #progress: SharedArrayBuffer;
  readonly #batcher: Batcher;
  readonly #metrics: PoolMetrics | undefined;
  readonly #reviewContext: ReviewContext;
  readonly #poison: PoisonPairs;
  readonly #poisoned: NonNullable<EvaluationBudget['poisoned']>;
  #outOfMemory = 0;
  #piscina: Piscina | undefined;
  /** Waits for the threads piscina terminated to exit (threads.ts, dyingThreads). */
  #dying: ((ms: number) => Promise<void>) | undefined;
  #replication: PolicyReplication | undefined;
  #closed: Promise<void> | undefined;
  #abandoned = 0;
  #rejected = 0;
  #ready = false;

  constructor(config: EvaluationPoolConfig, stores: PolicyStores, deps: EvaluationPoolDeps) {
    if (!Number.isInteger(config.workers) || config.workers < 1) {
      throw new PortalError(ErrorCode.ConfigInvalid, `evaluation pool ${config.name}: workers must be a positive integer, got ${config.workers}`);
    }
    this.name = config.name;
    this.#config = withDefaults(config);
    const namespaces = stores.namespaces;
    this.#reviewContext = {
      rules: stores.rules,
      exempt: this.#config.exempt,
      namespaceLabels: namespaces ? (ns) => (ns === '' ? undefined : namespaces.labels(ns)) : nameOnlyNamespaceLabels,
    };
    this.#stores = stores;
    this.#poison = stores.poison ?? new PoisonPairs();
    this.#poisoned = poisonCheck(this.#poison, (key) => stores.rules.version(key));
    this.#log = deps.logger.child({ [LogKey.subcomponent]: `evaluation-${config.name}` });
    this.#onRuleError = deps.onRuleError;
    this.#ruleStats = deps.ruleStats;
    // One slot per batch that can be active (one per worker), and as many again so that the slot of a
    // terminated worker's task is reused last (batcher.ts).
    this.#progress = new SharedArrayBuffer((8 * this.#config.pipeline * this.#config.workers + 8) * SLOT_BYTES);
    this.#batcher = new Batcher(
      batcherConfig(this.#config),
      {
        log: this.#log,
        // Not #ensure(): while the pool closes, what was submitted before still runs.
        run: (task, signal) =>
          this.#piscina
            ? (this.#piscina.run(task, { signal: signal as unknown as AbortSignal }) as Promise<TaskOutcomes>)
            : Promise.reject(new PortalError(ErrorCode.Closed, `the ${this.name} evaluation pool is closed`)),
        seq: () => this.#replication?.seq ?? 0,
        progress: this.#progress,
        closedError: (cause) => (this.#closed ? new PortalError(ErrorCode.Closed, `the ${this.name} evaluation pool is closed`, { cause }) : undefined),
      },
    );
    this.#metrics = deps.registry ? poolMetrics(deps.registry, this.name, () => ({ threads: this.#piscina?.threads.length ?? 0, queued: this.#batcher.waiting() })) : undefined;
  }

  // ---- lifecycle -----------------------------------------------------------

  /** Runnable: starts the workers, runs until `signal` aborts, then drains them. */
  async start(signal: AbortSignal): Promise<void> {
    this.#ensure();
    if (!signal.aborted) await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    await this.close();
  }

  /** Idempotent: refuses new tasks, lets running ones finish, stops the threads. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#replication?.unsubscribe();
      // Waiting without a deadline (the audit's), they would only delay the close: refused, and the audit retries them.
      this.#batcher.refuseWaiting(new PortalError(ErrorCode.Closed, `the ${this.name} evaluation pool is closed`));
      // What was submitted finishes (each by its deadline at the latest); nothing new is accepted.
      if (this.#piscina) await this.#batcher.drained();
      const piscina = this.#piscina;
      this.#piscina = undefined;
      // A thread terminated before now must exit before piscina closes, or its replacement may start after.
      await this.#dying?.(DYING_EXIT_MS);
      try {
        await piscina?.close();
      } catch (err) {
        this.#log.warn({ [LogKey.error]: toError(err) }, 'evaluation workers did not drain in time; terminated');
        await piscina?.destroy();
      }
      this.#replication?.close();
    })();
    return this.#closed;
  }

  /**
   * True once every worker of the pool holds the policies (latches: a
   * replacement starting later does not make the replica unready). Until
   * then tasks would spend their deadline waiting for threads to start, and
   * one stuck rule could hold the only worker started so far, so the
   * replica is not ready: admission denies "not ready" instead, as while
   * informers sync.
   */
  ready(): boolean {
    this.#ensure();
    this.#ready ||= (this.#replication?.everSynced ?? 0) >= this.#config.workers;
    return this.#ready;
  }

  notReadyReason(): string {
    return `the ${this.name} evaluation workers are starting`;
  }

  /** Resolves once `threads` distinct workers (default: the pool's size) have held a snapshot; rejects (Closed) if the pool closes first. */
  async whenReady(threads = this.#config.workers): Promise<void> {
    this.#ensure();
    if (!(await this.#replication?.whenSynced(threads))) throw new PortalError(ErrorCode.Closed, `the ${this.name} evaluation pool is closed`);
  }

  #ensure(): Piscina {
    if (this.#closed) throw new PortalError(ErrorCode.Closed, `the ${this.name} evaluation pool is closed`);
    if (this.#piscina) return this.#piscina;
    const s = this.#stores;
    const replication = new PolicyReplication(this.name, { rules: s.rules, vaps: s.vaps, params: s.params, namespaces: s.namespaces, poison: this.#poison });
    this.#replication = replication;
    const workerData = workerDataFor(this.#config, { channel: replication.channelName, progress: this.#progress, mirrorsNamespaces: s.namespaces !== undefined, ruleStats: this.#ruleStats });
    this.#piscina = startThreads({ workers: this.#config.workers, pipeline: this.#config.pipeline, workerData, memory: this.#config.memory }, {
      onError: (err) => this.#log.error({ [LogKey.error]: toError(err) }, 'evaluation worker failed'),
      onDestroy: (id) => {
        replication.workerDestroyed(id);
        this.#ruleStats?.workerGone(id);
      },
    });
    this.#dying = dyingThreads(this.#piscina);
    return this.#piscina;
  }

  // ---- evaluations -----------------------------------------------------------

  /**
   * A whole AdmissionReview, as its text, answered in a worker (read,
   * exemptions, namespace labels, decision, the answer's text): the main
   * thread parses nothing (adr/0013, "Reviews read in the worker"). Call it
   * only while the replica is ready. Rejects when the queue is full
   * (QueueFull) or the pool is closed (Closed).
   */
  review(body: string, peer?: string): Promise<AnsweredReview> {
    return this.#evaluate({ kind: 'review', body }, reviewFlow(body, peer), () => reviewWhat(body), (budget) => answerReview(body, this.#reviewContext, budget), this.#reportReview);
  }

  /** The rules' `error` verdicts of an answered review, to `onRuleError` (on this thread). */
  readonly #reportReview = (packed: TaskResults['review']): AnsweredReview => {
    const a = unpackReview(packed);
    const report = this.#onRuleError;
    const request = a.outcome.request;
    if (report !== undefined && a.ruleErrors !== undefined && request !== undefined) for (const v of a.ruleErrors) report(v, request);
    return a;
  };

  /** Every rule's verdict for an existing object (the audit). */
  audit(input: EvaluationInput): Promise<RuleVerdict[]> {
    return this.#evaluate({ kind: 'audit', input }, flowOf(input.namespace), () => input, (budget) => evaluate(this.#stores.rules, input, budget));
  }

  /** Every bound ValidatingAdmissionPolicy's evaluation for an existing object (the audit). */
  vap(attrs: VapAttributes, namespaceObject: KubeObject | null): Promise<BindingEvaluation[]> {
    const input = { kind: attrs.kind, namespace: attrs.namespace, name: attrs.name };
    return this.#evaluate({ kind: 'vap', attrs, namespaceObject }, flowOf(attrs.namespace), () => input, (budget) => {
      const vaps = this.#stores.vaps;
      const params = this.#stores.params;
      if (!vaps || !params) return [];
      return vaps.evaluate(attrs, { namespaceObject, params }, { deadline: { at: budget.deadline, now: budget.now, ms: budget.ms, abandoned: budget.abandoned } });
    });
  }

  /**
   * Runs a task to its deadline; when it is abandoned, evaluates again with the
   * rule that was running skipped, and after a second abandon settles every
   * rule left as `error` on this thread (`settle`, with a passed deadline: no
   * rule code runs). `done` sees the result, whichever way it came.
   *
   * The first attempt is one promise (the batcher's) and one `then`: at
   * thousands of reviews per second each async frame and microtask hop of the
   * common path is measurable (docs/benchmarks.md, "Session 6"); the retries
   * are rare and stay async.
   */
  #evaluate<K extends TaskBody['kind'], R = TaskResults[K]>(
    body: TaskBody & { kind: K },
    flowKey: string,
    what: What,
    settle: (budget: EvaluationBudget) => TaskResults[K],
    done?: (r: TaskResults[K]) => R,
  ): Promise<R> {
    const submitted = epochNow();
    const window = this.#firstWindow(submitted);
    const end = window.end;
    let first: Promise<Attempt>;
    try {
      first = this.#attempt(body, flowKey, window, undefined, true);
    } catch (err) {
      return Promise.reject(err);
    }
    return first.then((a) => {
      if (!a.ok) {
        // Someone waits for the answer: an evaluation that could not start in time is overload, answered as such.
        if (!a.started && end !== Number.POSITIVE_INFINITY) throw this.#shed(flowKey, submitted);
        return this.#retry(body, flowKey, end, what, settle, a).then(done) as Promise<R>;
      }
      const r = a.value as TaskResults[K];
      return done === undefined ? (r as R) : done(r);
    });
  }

  /** The first attempt starts in time to have its whole budget, or not at all. */
  #firstWindow(submitted: number): AttemptWindow {
    const { requestMs, timeoutMs, graceMs, startWithinMs } = this.#config;
    const end = submitted + requestMs;
    return { end, startBy: end === Number.POSITIVE_INFINITY ? submitted + startWithinMs : end - timeoutMs - graceMs };
  }

  /**
   * A rule's apply-time check (rule-check.ts) in `flowKey`: one attempt (one piece of work, nothing to skip). Resolves
   * to the answer or to how it failed (deadline, memory); rejects QueueFull (not queued or started in time) or Closed.
   */
  checkRule(body: RuleCheckBody, flowKey: string, what: What): Promise<Attempt> {
    const submitted = epochNow();
    // What #attempt throws (QueueFull, Closed) becomes the rejection.
    return Promise.resolve().then(() => this.#attempt(body, flowKey, this.#firstWindow(submitted), undefined, true)).then((a) => {
      if (!a.ok && !a.started) throw this.#shed(flowKey, submitted);
      if (!a.ok) this.#noteAbandoned(what, a);
      return a;
    });
  }

  async #retry<K extends TaskBody['kind']>(
    body: TaskBody & { kind: K },
    flowKey: string,
    end: number,
    what: What,
    settle: (budget: EvaluationBudget) => TaskResults[K],
    first: Extract<Attempt, { ok: false }>,
  ): Promise<TaskResults[K]> {
    const abandoned: string[] = [];
    // The rule that was running is skipped from now on: as remembered poison (its message says so) or as abandoned.
    const skip = (a: Extract<Attempt, { ok: false }>): void => {
      this.#noteAbandoned(what, a);
      const remembered = a.outOfMemory && a.running !== undefined && rememberPoison(this.#poison, this.#stores.rules.version(a.running), body, a.running, this.#config.memory?.maxOldGenerationSizeMb ?? 0);
      if (a.running !== undefined && !remembered) abandoned.push(a.running);
    };
    skip(first);
    if (first.running !== undefined) {
      // A retry is not refused: it replaces the attempt that was abandoned. It has what is left of the request's time,
      // and carries the policy revision that includes the pair just remembered, so the thread that takes it knows it.
      const startBy = end === Number.POSITIVE_INFINITY ? epochNow() + this.#config.startWithinMs : end - this.#config.graceMs;
      const second = await this.#attempt(body, flowKey, { end, startBy }, abandoned, false);
      if (second.ok) return second.value as TaskResults[K];
      skip(second);
    }
    return settle({ deadline: Number.NEGATIVE_INFINITY, now: epochNow, ms: this.#config.timeoutMs, abandoned: new Set(abandoned), poisoned: this.#poisoned });
  }

  #noteAbandoned(whatOf: What, a: Extract<Attempt, { ok: false }>): void {
    this.#abandoned++;
    this.#metrics?.abandoned.inc({ pool: this.name });
    if (a.outOfMemory) {
      this.#outOfMemory++;
      this.#metrics?.outOfMemory.inc({ pool: this.name });
    }
    logAbandoned(this.#log, whatOf(), a, this.#config.timeoutMs, this.#config.memory);
  }

  /** Throws (QueueFull, Closed) rather than rejects: #evaluate turns that into its rejection. */
  #attempt(body: TaskBody, flowKey: string, window: AttemptWindow, abandoned: string[] | undefined, bounded: boolean): Promise<Attempt> {
    this.#ensure();
    const flow = this.#batcher.flow(flowKey);
    // A retry is sent alone (it ran next to something slow once already) and is not refused: it replaces the attempt that was abandoned.
    if (bounded) {
      const { maxQueue, flowQueue } = this.#config;
      if (this.#batcher.inFlight >= maxQueue + this.#config.workers) throw this.#refused(queueFull(this.#workersName(), maxQueue));
      if (flow.pending >= flowQueue) throw this.#refused(flowFull(this.#workersName(), flowKey, flowQueue));
    }
    return this.#batcher.attempt(wireBody(body), flow, window, abandoned, !bounded);
  }

  #workersName(): string {
    const n = this.#config.workers;
    return `${n} ${this.name} evaluation worker${n === 1 ? '' : 's'}`;
  }

  /** A first attempt that no worker started in time for its whole budget (batcher.ts): overload in its flow. */
  #shed(flowKey: string, submitted: number): PortalError {
    return this.#refused(notStarted(this.#workersName(), flowKey, epochNow() - submitted));
  }

  #refused(err: PortalError): PortalError {
    this.#rejected++;
    this.#metrics?.rejected.inc({ pool: this.name });
    return err;
  }

  /** For /debug/vars. */
  stats(): Record<string, unknown> {
    return {
      workers: this.#config.workers,
      /** Batches sent to one worker at once (pool-config.ts, pipelineFor). */
      batchesPerWorker: this.#config.pipeline,
      threads: this.#piscina?.threads.length ?? 0,
      queued: this.#batcher.waiting(),
      maxQueue: this.#config.maxQueue,
      /** Workers holding the policies now (a replacement counts once it has its snapshot). */
      readyThreads: this.#replication?.liveSynced() ?? 0,
      completed: this.#piscina?.completed ?? 0,
      /** Tasks sent, and evaluations they carried (their ratio is the mean batch). */
      ...this.#batcher.stats(),
      abandoned: this.#abandoned,
      /** Of them, threads that exhausted their memory (resourceLimits), and the (rule, object) pairs remembered. */
      outOfMemory: this.#outOfMemory,
      poisonPairs: this.#poison.size,
      threadMemory: this.#config.memory,
      rejected: this.#rejected,
      policyRevision: this.#replication?.seq ?? 0,
      deadlineMs: this.#config.timeoutMs,
    };
  }
}
