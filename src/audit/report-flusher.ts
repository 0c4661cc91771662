/**
 * Coalesced, paced report writes (issue 20, adr/0012): the leader marks a
 * report dirty after each evaluation ({@link ReportFlusher.touch}); the
 * flusher writes it later, so
 * - a report is written at most once per `--report-flush` interval: a touch
 *   within the interval after its last write waits for the interval's end,
 *   and touches while it waits or is being written are one write (the
 *   work queue deduplicates keys);
 * - writes are paced by a budget of their own (`--report-qps`), a token
 *   bucket that nothing else takes from: a backlog of reports never delays
 *   rule status, labels, evictions or the ledger (`--kube-api-qps`), and
 *   never the Lease, which takes no token and has its own connections (the
 *   reports go through the FencedWriter's transport);
 * - a report whose content did not change is not written: the desired
 *   report is built when its turn comes, from evaluation's current state,
 *   and compared with the observed one before a token is taken.
 *
 * Leader-only: {@link ReportFlusher.run} runs for one term; its queue (and
 * the record of recent writes) is dropped when the term ends. The next
 * leader finds the differences itself (the actuator's takeover reconcile).
 */
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { TokenBucket } from '../kube/rate-limiter.ts';
import type { LeaderTerm } from '../util/leader-term.ts';
import { LogKey } from '../observability/log-keys.ts';
import { reportKey, type ReportIdentity } from '../policy/report.ts';
import { reportContentEqual } from '../policy/report-compare.ts';
import type { Report } from '../policy/report-shape.ts';
import type { ReportWrite, ReportWriter } from './report-writer.ts';
import { WorkQueue } from './work-queue.ts';
import { WorkerPool, type HandlerResult } from './worker-pool.ts';
import { toError } from '../observability/errors.ts';

export interface ReportFlusherOptions {
  /** `--report-flush`: each report is written at most once per interval. */
  flushMs: number;
  /** `--report-qps`: report writes per second. */
  qps: number;
  /**
   * Report writes in flight at once. At 10 writes/s and the 50-100 ms a
   * write takes, one or two suffice; four keep the budget usable against an
   * API server answering in 400 ms. @default 4
   */
  concurrency?: number;
  /**
   * Most reports waiting at once. Resource granularity has one per audited
   * object: 500,000 is ten times the largest cluster measured (50,000 Pods)
   * at ~100 bytes a key. @default 500000
   */
  maxBacklog?: number;
}

/** What the flusher asks the audit about. */
export interface ReportSource {
  /**
   * The report to store under `id`, built now against `previous` (the
   * stored one, to keep unchanged results' timestamps) by the term `epoch`,
   * or undefined when none should exist. `hint`: what touched it (an
   * object key), if known.
   */
  desired(id: ReportIdentity, hint: string | undefined, previous: Report | undefined, epoch: string): Report | undefined;
  /** Whether reports may be written yet (observed state synced, evaluation complete enough). */
  ready(): boolean;
}

interface Task {
  id: ReportIdentity;
  hint: string | undefined;
}

export class ReportFlusher {
  readonly #options: Required<ReportFlusherOptions>;
  readonly #writer: ReportWriter;
  readonly #source: ReportSource;
  readonly #log: Logger;
  readonly #registry: Registry;
  /** The replica's report budget: it outlives terms, so a quick re-election does not refill it. */
  readonly budget: TokenBucket;
  readonly #metrics: { writes: Counter<'outcome'>; backlog: Gauge };
  #queue: WorkQueue<Task> | undefined;
  /** When each report was last written in this term (monotonic ms). */
  readonly #lastWrite = new Map<string, number>();
  #inFlight = 0;

  constructor(options: ReportFlusherOptions, deps: { writer: ReportWriter; source: ReportSource; logger: Logger; registry: Registry }) {
    this.#options = { concurrency: 4, maxBacklog: 500_000, ...options };
    this.#writer = deps.writer;
    this.#source = deps.source;
    this.#log = deps.logger.child({ [LogKey.subcomponent]: 'report-flusher' });
    this.#registry = deps.registry;
    // A burst of one second's worth: a new term starts writing at once, then at the budget's rate.
    this.budget = new TokenBucket({ qps: options.qps, burst: Math.max(1, Math.ceil(options.qps)) });
    const existing = <M>(name: string): M | undefined => deps.registry.getSingleMetric(name) as M | undefined;
    const backlog = () => this.backlog;
    this.#metrics = {
      writes:
        existing<Counter<'outcome'>>('portal_report_writes_total') ??
        new Counter({ name: 'portal_report_writes_total', help: 'Report writes by the leader, outcome=created|updated|deleted|unchanged (a write found already done).', labelNames: ['outcome'], registers: [deps.registry] }),
      backlog:
        existing<Gauge>('portal_report_backlog') ??
        new Gauge({
          name: 'portal_report_backlog',
          help: 'Reports waiting to be written (dirty, waiting for their flush interval or the write budget, or in flight).',
          registers: [deps.registry],
          collect(this: Gauge) {
            this.set(backlog());
          },
        }),
    };
  }

  /** Reports waiting (queued, delayed) or being written. */
  get backlog(): number {
    const q = this.#queue;
    return q ? q.length + q.delayed + q.processing : 0;
  }

  /** Writes sent and not answered yet. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Marks the report `id` dirty (no-op while not leading). */
  touch(id: ReportIdentity, hint?: string): void {
    const queue = this.#queue;
    if (!queue || queue.closed) return;
    const key = reportKey(id);
    const task: Task = { id, hint };
    const last = this.#lastWrite.get(key);
    const since = last === undefined ? Infinity : performance.now() - last;
    try {
      if (since < this.#options.flushMs) queue.addAfter(key, task, this.#options.flushMs - since);
      else queue.add(key, task);
    } catch (err) {
      // Full: the next touch or full pass marks it again.
      this.#log.warn({ [LogKey.report]: key, [LogKey.error]: toError(err) }, 'report backlog full; the report is written on a later change or pass');
    }
  }

  /**
   * Writes dirty reports under `term` until `signal` aborts; resolves once
   * no write of this term is in flight. `onWrite` is told about each write
   * that changed something.
   */
  async run(term: LeaderTerm, signal: AbortSignal, onWrite: (outcome: ReportWrite) => void): Promise<void> {
    const queue = new WorkQueue<Task>({ name: 'reports', maxSize: this.#options.maxBacklog, logger: this.#log, registry: this.#registry });
    this.#lastWrite.clear();
    this.#queue = queue;
    const pool = new WorkerPool(queue, (w, s) => this.#flush(w.key, w.item, term, s, onWrite), { concurrency: this.#options.concurrency, logger: this.#log });
    try {
      await pool.start(signal);
    } finally {
      queue.destroy();
      if (this.#queue === queue) this.#queue = undefined;
    }
  }

  async #flush(key: string, task: Task, term: LeaderTerm, signal: AbortSignal, onWrite: (outcome: ReportWrite) => void): Promise<HandlerResult> {
    if (!this.#source.ready()) return { requeueAfterMs: 500 };
    const last = this.#lastWrite.get(key);
    if (last !== undefined) {
      const wait = this.#options.flushMs - (performance.now() - last);
      if (wait > 0) return { requeueAfterMs: wait };
    }
    const { id, hint } = task;
    const build = () => this.#source.desired(id, hint, this.#writer.observed(id.namespace, id.name), term.epochString);
    let desired = build();
    // Compared before a token is taken: an unchanged report costs no budget.
    if (reportContentEqual(this.#writer.observed(id.namespace, id.name), desired)) return;
    if (!this.budget.tryTake()) {
      await this.budget.take(signal);
      // Built again: evaluation may have moved on while this write waited for the budget.
      desired = build();
    }
    this.#lastWrite.set(key, performance.now());
    this.#inFlight++;
    try {
      const outcome = await this.#writer.apply(id, desired, term, signal);
      this.#metrics.writes.inc({ outcome });
      if (outcome !== 'unchanged') onWrite(outcome);
    } finally {
      this.#inFlight--;
    }
    return undefined;
  }

  stats(): Record<string, unknown> {
    return { backlog: this.backlog, inFlight: this.#inFlight, qps: this.#options.qps, flushMs: this.#options.flushMs, ...(this.#queue ? { delayed: this.#queue.delayed } : {}) };
  }
}
