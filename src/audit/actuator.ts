/**
 * Audit actuation (docs/design.md §1, §5; issue 10 item 3): the leader-only Runnable.
 *
 * The Manager starts it with the term when this replica wins the Lease and
 * aborts its signal when the term ends; nothing here asks whether it leads.
 * While it runs it is the worker pool's side-effecting step (attached to the
 * {@link AuditEvaluator}): for each evaluated object it marks the object's
 * report dirty (written by the {@link ReportFlusher}: coalesced, paced by
 * `--report-qps`), dispatches label/annotate/evict/alert and keeps the rules'
 * `.status` current — each write behind `term.assertValid()` right before it
 * is sent and carrying the epoch.
 *
 * On start it first does the takeover scan: it compares, from memory, what
 * evaluation computed as a follower with what it observed the previous leader
 * do, and enqueues only the objects whose actions are missing and marks only
 * the reports that differ — no re-list. After a switch of `--report-api` it
 * deletes the reports Portal wrote in the other API. On stop it detaches and
 * resolves only after its in-flight writes have returned (the term's signal
 * aborts them), so when the Manager's leader group has stopped no write of
 * the old term is still running here.
 */
import { setMaxListeners } from 'node:events';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { KubeClient } from '../kube/client.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import type { LeaderTerm } from '../util/leader-term.ts';
import type { Runnable } from '../util/runnable.ts';
import { ErrorCode, isPortalError, PortalError, toError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';
import type { ExceptionState, RuleSet, RuleState } from '../policy/index.ts';
import { ExceptionStatusWriter } from './exception-status.ts';
import { AuditRules } from './audit-rules.ts';
import type { AuditPolicySource } from './audit-step.ts';
import type { KubeObject } from '../policy/types.ts';
import { aborted, type AuditEvaluator, type AuditStep, type ObjectState } from './evaluator.ts';
import { ObjectActions } from './object-actions.ts';
import { ReportFlusher } from './report-flusher.ts';
import { ReportPlanner, type ReportConfig } from './report-planner.ts';
import { purgeOtherApi } from './report-purge.ts';
import { StatusWriter, type StatusInputs } from './status-writer.ts';
import type { TypeCheckStatus } from './type-check-status.ts';
import type { HandlerResult } from './worker-pool.ts';

export interface AuditActuatorConfig {
  /** Where the ledger ConfigMaps live. */
  installNamespace: string;
  /** Never acted on (the install namespace is added). */
  exemptNamespaces: readonly string[];
  /** `--max-evictions-per-minute` (0 disables evictions). */
  maxEvictionsPerMinute: number;
  /** `--alertmanager-url`. */
  alertmanagerUrls: readonly string[];
  /** `--alert-resend-interval`. */
  alertResendIntervalMs: number;
  /** Status write debounce. @default 1000 */
  statusDebounceMs?: number;
  /** How long a rule's stored lastAuditTime stands when nothing else in its status changed (status-writer.ts). @default 30 s */
  auditTimeRefreshMs?: number;
  /** Reports: API, granularity, flush interval, write budget, limits (adr/0012). */
  reports: ReportConfig;
}

export interface AuditActuatorDeps {
  client: KubeClient;
  /** The replica's one leader-only writer: reports, status, ledger, label/annotate, evictions and alerts. */
  writer: FencedWriter;
  ruleSet: RuleSet;
  evaluator: AuditEvaluator;
  /** The stored rule object of a RuleSet entry (for status comparisons). */
  ruleObject?: (state: RuleState) => KubeObject | undefined;
  /** The object that exhausted an evaluation thread's memory with this rule version, for its status (adr/0018). */
  memoryExhausted?: StatusInputs['memoryExhausted'];
  /** The stored PortalException of a RuleSet entry (its status is written against it). */
  exceptionObject?: (state: ExceptionState) => KubeObject | undefined;
  /** The rules' TypeChecked condition (absent: not shown). */
  typeCheck?: TypeCheckStatus | undefined;
  /** The policy sources beside the RuleSet (VAPs): an exception naming one of theirs names a rule that exists. */
  policies?: readonly AuditPolicySource[];
  logger: Logger;
  registry: Registry;
}

/** A term's reconciliation of what its follower time computed but did not act on. */
interface Takeover {
  /** Keys enqueued as pending and not handled yet. */
  keys: Set<string>;
  /** Every object has been looked at (the scan finished). */
  scanned: boolean;
  /** Rules of the full passes that ended during the takeover: their lastAuditTime waits for the drain. */
  passRules: Set<string>;
}

/** The term a running actuator acts under. */
interface Acting {
  term: LeaderTerm;
  /** The runnable's signal (term end or shutdown): every write listens on it. */
  signal: AbortSignal;
  takeover: Takeover | undefined;
  /** The reports were compared with evaluation once in this term (takeover, or the first full pass). */
  reconciled: boolean;
}

export class AuditActuator implements Runnable {
  readonly name = 'audit-actuator';
  readonly status: StatusWriter;
  readonly exceptionStatus: ExceptionStatusWriter;
  readonly #evaluator: AuditEvaluator;
  readonly #log: Logger;
  readonly #actions: ObjectActions;
  readonly #planner: ReportPlanner;
  readonly flusher: ReportFlusher;
  #acting: Acting | undefined;
  /** Per rule (RuleState key): the end of the last pass that evaluated it and ended while leading. */
  readonly #lastAuditTime = new Map<string, Date>();
  #running = false;
  /** Wall-clock ms of the start of the current term and of its first side effect (bench/failover figures). */
  termStartedAt: number | undefined;
  firstSideEffectAt: number | undefined;

  constructor(config: AuditActuatorConfig, deps: AuditActuatorDeps) {
    this.#evaluator = deps.evaluator;
    this.#log = deps.logger.child({ [LogKey.subcomponent]: 'audit-actuator' });
    const { client, writer } = deps;
    this.#actions = new ObjectActions({
      client,
      writer,
      evaluator: this.#evaluator,
      installNamespace: config.installNamespace,
      exemptNamespaces: config.exemptNamespaces,
      maxEvictionsPerMinute: config.maxEvictionsPerMinute,
      alertmanagerUrls: config.alertmanagerUrls,
      resendIntervalMs: config.alertResendIntervalMs,
      touchReport: (key, st) => this.#planner.touch(key, st),
      onSideEffect: () => this.#sideEffect(),
      logger: this.#log,
      registry: deps.registry,
    });
    this.#planner = new ReportPlanner(config.reports, { evaluator: this.#evaluator, writer: this.#evaluator.reports });
    this.flusher = new ReportFlusher(
      { flushMs: config.reports.flushMs, qps: config.reports.qps },
      { writer: this.#evaluator.reports, source: this.#planner, logger: this.#log, registry: deps.registry },
    );
    this.#planner.attach(this.flusher);
    this.status = new StatusWriter(
      client,
      writer,
      {
        states: () => deps.ruleSet.states(),
        violations: (display) => this.#evaluator.violations(display),
        ruleObject: (s) => deps.ruleObject?.(s),
        lastAuditTime: (state) => this.#lastAuditTime.get(state.key),
        lastPassTime: (state) => this.#evaluator.ruleLastPass(state.key),
        coverage: (state) => this.#evaluator.coverage(state.key),
        typeChecked: (_state, object) => deps.typeCheck?.condition(object),
        memoryExhausted: (state) => deps.memoryExhausted?.(state),
      },
      this.#log,
      {
        ...(config.statusDebounceMs !== undefined ? { debounceMs: config.statusDebounceMs } : {}),
        ...(config.auditTimeRefreshMs !== undefined ? { auditTimeRefreshMs: config.auditTimeRefreshMs } : {}),
      },
    );
    const known = new AuditRules(deps.ruleSet, deps.policies ?? []);
    this.exceptionStatus = new ExceptionStatusWriter(
      client,
      writer,
      {
        states: () => deps.ruleSet.exceptionStates(),
        exempted: (display) => this.#evaluator.exempted(display),
        knownRules: () => known.knownKeys(),
        exceptionObject: (s) => deps.exceptionObject?.(s),
        maxLifetimeMs: deps.ruleSet.options.maxLifetimeMs,
      },
      this.#log,
      config.statusDebounceMs !== undefined ? { debounceMs: config.statusDebounceMs } : {},
    );
  }

  needLeaderElection(): boolean {
    return true;
  }

  /** A rule's status changed outside the audit's own verdicts (an object exhausted an evaluation thread's memory): written soon when leading. */
  ruleChanged(ruleKey: string): void {
    this.status.markDirty([ruleKey]);
    if (this.#acting) this.#scheduleStatus(this.#acting);
  }

  /** Runs for one term: takeover scan, then the writes, until `signal` (the term's end or shutdown) aborts. */
  async start(signal: AbortSignal, term?: LeaderTerm): Promise<void> {
    if (!term) throw new PortalError(ErrorCode.Internal, 'the audit actuator runs only with a leader term (add it to the Manager as leader-only)');
    if (this.#running) throw new PortalError(ErrorCode.Internal, 'the audit actuator is already running');
    this.#running = true;
    const termSignal = AbortSignal.any([signal, term.signal]);
    // Each in-flight write (limiter wait, HTTP request) adds a listener; workers × writes exceeds Node's default of 10.
    setMaxListeners(0, termSignal);
    const acting: Acting = { term, signal: termSignal, takeover: { keys: new Set(), scanned: false, passRules: new Set() }, reconciled: false };
    this.#acting = acting;
    this.termStartedAt = Date.now();
    this.firstSideEffectAt = undefined;
    const detach = this.#evaluator.attach(this.#step(acting));
    // A new leader writes every rule's and exception's status it finds wrong at once; followers kept no dirty set.
    this.status.markDirty();
    this.exceptionStatus.markDirty();
    this.#scheduleStatus(acting);
    const flushing = this.flusher.run(term, termSignal, () => this.#sideEffect());
    const purging = purgeOtherApi(this.#evaluator.reports, acting.term, acting.signal, (sig) => this.flusher.budget.take(sig), this.#log, () => this.#sideEffect());
    try {
      await this.#takeoverScan(acting);
      // A cold leader (no complete pass yet) compares at the end of its next pass instead.
      if (this.#evaluator.completePasses > 0) await this.#reconcileReports(acting);
      await aborted(termSignal);
    } finally {
      if (this.#acting === acting) this.#acting = undefined;
      await detach();
      await Promise.allSettled([flushing, purging]);
      await Promise.all([this.status.close(), this.exceptionStatus.close()]);
      this.#running = false;
      this.#log.info({ [LogKey.epoch]: term.epochString }, 'audit actuation stopped');
    }
  }

  #step(acting: Acting): AuditStep {
    return {
      act: (key, st) => this.#act(acting, key, st),
      handled: (key) => {
        if (acting.takeover?.keys.has(key)) this.#takeoverProgress(acting, key);
      },
      violationsChanged: (ruleKeys) => {
        this.status.markDirty(ruleKeys);
        this.#scheduleStatus(acting);
      },
      passEnded: (at, rules) => this.#passEnded(acting, at, rules),
      rulesChanged: () => {
        this.status.markDirty();
        // An exception added, edited or removed: its status (Ready, message) may change.
        this.exceptionStatus.markDirty();
        this.#scheduleStatus(acting);
      },
      exceptionsChanged: (displays) => {
        this.exceptionStatus.markDirty(displays);
        this.#scheduleStatus(acting);
      },
      coverageChanged: (ruleKeys) => {
        this.status.markDirty(ruleKeys);
        this.#scheduleStatus(acting);
      },
    };
  }

  #scheduleStatus(acting: Acting): void {
    const termOf = (): LeaderTerm | undefined => (this.#acting === acting ? acting.term : undefined);
    this.status.schedule(termOf, acting.signal);
    this.exceptionStatus.schedule(termOf, acting.signal);
  }

  // ---- takeover ------------------------------------------------------------

  /**
   * Enqueues objects whose side effects are not observed done, in slices
   * that yield to the event loop: building and comparing 10,000 desired
   * reports takes ~1 s of CPU, which must stall neither admission on this
   * replica nor the workers that already act on the first keys.
   */
  async #takeoverScan(acting: Acting): Promise<void> {
    // 500 objects ≈ 50 ms of work at ~100 µs each: short enough not to stall admission noticeably.
    const SLICE = 500;
    let pending = 0;
    let seen = 0;
    const { term, takeover } = acting;
    const objects = this.#evaluator.objects();
    for (const [key, st] of objects) {
      if (acting.signal.aborted) return;
      if (this.#actions.pending(key, st)) {
        takeover?.keys.add(key);
        this.#evaluator.enqueue(key);
        pending++;
      }
      if (++seen % SLICE === 0) await new Promise((r) => setImmediate(r));
    }
    this.#log.info({ [LogKey.epoch]: term.epochString, [LogKey.objects]: objects.length, [LogKey.pending]: pending }, 'leading: pending audit side effects enqueued');
    if (takeover) {
      takeover.scanned = true;
      this.#takeoverProgress(acting);
    }
  }

  /**
   * The takeover is reconciled once every key it enqueued was handled: the
   * world then matches this replica's complete, warm evaluation. A full pass
   * that ended while leading but before that moment sets lastAuditTime now.
   */
  #takeoverProgress(acting: Acting, key?: string): void {
    const takeover = acting.takeover;
    if (!takeover) return;
    if (key !== undefined) takeover.keys.delete(key);
    if (!takeover.scanned || takeover.keys.size > 0) return;
    acting.takeover = undefined;
    if (takeover.passRules.size > 0 && acting.term.isValid()) this.#setLastAuditTime(acting, new Date(), takeover.passRules);
  }

  /**
   * lastAuditTime (docs/architecture.md, "Rule status") is the leader's
   * audit: the end of a full pass that ENDS while this replica leads. Keys
   * the pass handled before leadership arrived (as a follower: evaluated,
   * side effects skipped) are covered by the takeover reconciliation, so
   * until that has drained the time waits for it. The takeover itself
   * moves nothing, so a failover rewrites no rule status that is right.
   */
  #passEnded(acting: Acting, at: Date, rules: ReadonlySet<string>): void {
    if (!acting.term.isValid()) return;
    // Every pass ends with the reports compared with evaluation: a write dropped after its retries is found again.
    void this.#reconcileReports(acting);
    if (acting.takeover) for (const key of rules) acting.takeover.passRules.add(key);
    else this.#setLastAuditTime(acting, at, rules);
    // lastPassTime moved either way.
    this.status.markDirty(rules);
    this.#scheduleStatus(acting);
  }

  /** Only the rules the pass evaluated move: one added after it started, or whose kinds were not listed, keeps its time. */
  #setLastAuditTime(acting: Acting, at: Date, rules: ReadonlySet<string>): void {
    for (const key of rules) this.#lastAuditTime.set(key, at);
    this.status.markDirty(rules);
    this.#scheduleStatus(acting);
  }

  /** Compares every report with evaluation and marks those that differ (once per term, then after each pass). */
  async #reconcileReports(acting: Acting): Promise<void> {
    if (acting.signal.aborted) return;
    let marked: number;
    try {
      marked = await this.#planner.reconcile(acting.term.epochString, acting.signal);
    } catch (err) {
      this.#log.error({ [LogKey.error]: toError(err) }, 'comparing the reports with evaluation failed; the next full pass compares again');
      return;
    }
    if (!acting.reconciled) {
      acting.reconciled = true;
      this.#log.info({ [LogKey.epoch]: acting.term.epochString, [LogKey.reports]: this.#evaluator.reports.size, [LogKey.marked]: marked }, 'leading: reports that differ from evaluation marked for writing');
    }
  }

  // ---- the side-effecting step -------------------------------------------------

  /** Leader-only side effects for one freshly evaluated object. */
  async #act(acting: Acting, key: string, st: ObjectState): Promise<HandlerResult> {
    const { term, signal } = acting;
    if (signal.aborted) return;
    if (!this.#evaluator.observedSynced()) return { requeueAfterMs: 500 };
    try {
      return await this.#actions.act(key, st, term, signal);
    } catch (err) {
      if (isPortalError(err, ErrorCode.TermExpired) || signal.aborted) {
        // Not this key's fault: the next leader (maybe us again) picks it up as pending.
        this.#log.debug({ [LogKey.key]: key }, 'side effects stopped: the leader term ended');
        return;
      }
      throw err;
    }
  }

  #sideEffect(): void {
    this.firstSideEffectAt ??= Date.now();
  }

  // ---- introspection -------------------------------------------------------

  /** Acting under a term right now. */
  get leading(): string | undefined {
    return this.#acting?.term.epochString;
  }

  /** This term compared every report with evaluation once (what differed is marked for the flusher). */
  get reportsReconciled(): boolean {
    return this.#acting?.reconciled ?? false;
  }

  stats(): Record<string, unknown> {
    return {
      leading: this.leading ?? null,
      lastAuditTime: Object.fromEntries([...this.#lastAuditTime].map(([k, d]) => [k, d.toISOString()])),
      statusWrites: this.status.writes,
      reports: { ...this.flusher.stats(), reconciled: this.reportsReconciled, purgedOtherApi: this.#evaluator.reports.purged },
      exceptionStatusWrites: this.exceptionStatus.writes,
    };
  }
}
