/**
 * The AuditController (DESIGN §1, §5; issue 5): runs on EVERY replica.
 *
 * Pipeline: informers for every kind some rule matches (started/stopped as
 * rules come and go) feed a WorkQueue keyed by object; rule changes and the
 * periodic full pass (`--audit-interval`) enqueue everything; a WorkerPool
 * (`--audit-workers`) evaluates each object with the RuleSet (operation
 * `AUDIT`) and keeps the desired state warm: per-object verdicts and per-rule
 * violating objects.
 *
 * Side effects (PolicyReports, rule status, label/annotate/evict/alert) run
 * only while `currentTerm()` returns a valid LeaderTerm, each behind
 * `term.assertValid()` right before it is sent and carrying the epoch.
 * Followers run the same pipeline and skip only the side effects; they learn
 * what the leader did (provenance annotations on objects, the ledger
 * ConfigMaps, the stored reports), so when leadership arrives the controller
 * re-enqueues only objects whose desired side effects are not yet observed
 * done — from memory, without re-listing anything.
 */
import { setMaxListeners } from 'node:events';
import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import type { KubeClient } from '../kube/client.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import { ResilientInformer, type InformerEvent } from '../kube/informer.ts';
import { TokenBucket } from '../kube/rate-limiter.ts';
import type { LeaderTerm } from '../leader/term.ts';
import type { Runnable } from '../manager/runnable.ts';
import { ErrorCode, isPortalError } from '../observability/errors.ts';
import { evaluate, type RuleSet, type RuleState } from '../policy/index.ts';
import type { GroupVersionKind, KubeObject, RuleVerdict } from '../policy/types.ts';
import { ActionExecutor, type ActionOutcome, type ActionTarget } from './actions.ts';
import { decideAlert } from './alert-scheduler.ts';
import { AlertmanagerClient } from './alertmanager.ts';
import { actionKey, IdempotencyStore } from './idempotency.ts';
import { KindInformers } from './kind-informers.ts';
import { KindResolver, type KindResource } from './kind-resources.ts';
import { LEDGER_LABELS } from './ledger.ts';
import { LedgerWriter } from './ledger-writer.ts';
import { buildPolicyReport, reportContentEqual, reportIdentity, resourceReference } from './policy-report.ts';
import { ReportWriter } from './report-writer.ts';
import { ruleDisplay, StatusWriter } from './status-writer.ts';
import { objectKey, parseObjectKey, WorkQueue } from './work-queue.ts';
import { WorkerPool } from './worker-pool.ts';
import { LogKey } from '../observability/log-keys.ts';

export interface AuditControllerConfig {
  /** Where the ledger ConfigMaps live. */
  installNamespace: string;
  /** Never evaluated (the install namespace is added). */
  exemptNamespaces: readonly string[];
  /** `--audit-interval`. */
  auditIntervalMs: number;
  /** `--audit-workers`. */
  workers: number;
  /** `--max-evictions-per-minute` (0 disables evictions). */
  maxEvictionsPerMinute: number;
  /** `--alertmanager-url`. */
  alertmanagerUrls: readonly string[];
  /** `--alert-resend-interval`. */
  alertResendIntervalMs: number;
  /** Status write debounce. @default 1000 */
  statusDebounceMs?: number;
  /** How often rule revisions and the leader term are checked. @default 100 */
  pollMs?: number;
  /** Informer silence bound (tests shorten it). */
  staleAfterMs?: number;
}

export interface AuditControllerDeps {
  client: KubeClient;
  /** The replica's one leader-only writer: every report, status, ledger, label/annotate, eviction and alert write goes through it. */
  writer: FencedWriter;
  ruleSet: RuleSet;
  namespaceLabels: (namespace: string) => Record<string, string> | undefined;
  /** The current leader term, or undefined on a follower (from the elector's callbacks). */
  currentTerm: () => LeaderTerm | undefined;
  /** The stored rule object of a RuleSet entry (for status comparisons). */
  ruleObject?: (state: RuleState) => KubeObject | undefined;
  /** Subscribes to namespace changes (labels drive namespaceSelector); returns unsubscribe. */
  onNamespaceChange?: (handler: (namespace: string) => void) => () => void;
  logger: Logger;
  registry: Registry;
}

interface ObjectState {
  gvk: GroupVersionKind;
  /** Last known object (the informer's own reference; for actions after a delete). */
  object: KubeObject;
  uid: string | undefined;
  verdicts: RuleVerdict[];
  /** Rules (display keys) the object violates now (fail or warn). */
  violating: Set<string>;
  /** Rules the object violated at some point and whose alert may still need resolving. */
  seen: Set<string>;
  deleted: boolean;
}

/** A new term's reconciliation of what its follower time computed but did not act on. */
interface Takeover {
  epoch: string;
  /** Keys enqueued as pending and not handled yet. */
  keys: Set<string>;
  /** Every object has been looked at (#enqueuePending finished). */
  scanned: boolean;
  /** A full pass ended during the takeover: its lastAuditTime waits for the drain. */
  passEnded: boolean;
}

const isViolation = (v: RuleVerdict): boolean => v.result === 'fail' || v.result === 'warn';

export class AuditController implements Runnable {
  readonly name = 'audit-controller';
  readonly store = new IdempotencyStore();
  readonly reports: ReportWriter;
  readonly status: StatusWriter;
  readonly #config: Readonly<AuditControllerConfig>;
  readonly #deps: AuditControllerDeps;
  readonly #log: Logger;
  readonly #queue: WorkQueue<undefined>;
  readonly #informers: KindInformers;
  readonly #resolver: KindResolver;
  readonly #ledger: ResilientInformer<KubeObject>;
  readonly #executor: ActionExecutor;
  readonly #alertmanager: AlertmanagerClient;
  readonly #exempt: ReadonlySet<string>;
  readonly #objects = new Map<string, ObjectState>();
  /** Rule display key → keys of objects violating it. */
  readonly #violators = new Map<string, Set<string>>();
  readonly #passPending = new Set<string>();
  readonly #gauges: { objects: Gauge; violating: Gauge<'rule'>; passSeconds: Gauge };
  #signal: AbortSignal | undefined;
  #revision = -1;
  #epoch: string | undefined;
  #lastAuditTime: Date | undefined;
  #passStartedAt = 0;
  #lastPassTime: Date | undefined;
  /** The current term's takeover reconciliation (see #enqueuePending); lastAuditTime waits for it. */
  #takeover: Takeover | undefined;
  #passes = 0;
  /** Wall-clock ms of the first side effect of the current term (bench/failover figures). */
  firstSideEffectAt: number | undefined;
  termStartedAt: number | undefined;
  #unresolved: string[] = [];

  constructor(config: AuditControllerConfig, deps: AuditControllerDeps) {
    this.#config = Object.freeze({ ...config });
    this.#deps = deps;
    this.#log = deps.logger.child({ [LogKey.subcomponent]: 'audit' });
    const { client, writer } = deps;
    this.#exempt = new Set([...config.exemptNamespaces, config.installNamespace]);
    this.#queue = new WorkQueue({ name: 'audit', logger: this.#log, registry: deps.registry });
    const staleOpt = config.staleAfterMs !== undefined ? { staleAfterMs: config.staleAfterMs } : {};
    this.#informers = new KindInformers(client, this.#log, (r, e) => this.#onObjectEvent(r, e), staleOpt);
    this.#resolver = new KindResolver(client);
    this.reports = new ReportWriter(client, writer, this.#log, staleOpt);
    this.#ledger = new ResilientInformer(
      client,
      {
        name: 'audit-ledger',
        path: `/api/v1/namespaces/${encodeURIComponent(config.installNamespace)}/configmaps`,
        apiVersion: 'v1',
        kind: 'ConfigMap',
        labelSelector: Object.entries(LEDGER_LABELS).map(([k, v]) => `${k}=${v}`).join(','),
        ...staleOpt,
      },
      this.#log,
    );
    this.#ledger.onEvent((e) => {
      const data = (o: KubeObject | undefined) => (o as { data?: Record<string, string> } | undefined)?.data;
      if (e.type === 'add') this.store.observeLedger(data(e.object));
      else if (e.type === 'update') this.store.observeLedger(data(e.object), data(e.old));
      else this.store.observeLedger(undefined, data(e.object));
    });
    this.#alertmanager = new AlertmanagerClient({ urls: config.alertmanagerUrls, writer, logger: this.#log, registry: deps.registry });
    this.#executor = new ActionExecutor({
      writer,
      writeLimiter: client.writeLimiter,
      // N per minute, burst 1: evictions spread evenly (see ActionExecutorOptions).
      evictionLimiter: new TokenBucket({ qps: Math.max(config.maxEvictionsPerMinute, 1e-6) / 60, burst: 1 }),
      ledger: new LedgerWriter({ writer, namespace: config.installNamespace, writeLimiter: client.writeLimiter }),
      alertmanager: this.#alertmanager,
      store: this.store,
      exemptNamespaces: this.#exempt,
      resendIntervalMs: config.alertResendIntervalMs,
      logger: this.#log,
      registry: deps.registry,
    });
    this.status = new StatusWriter(
      client,
      writer,
      {
        states: () => deps.ruleSet.states(),
        violations: (display) => this.#violators.get(display)?.size ?? 0,
        ruleObject: (s) => deps.ruleObject?.(s),
        lastAuditTime: () => this.#lastAuditTime,
        lastPassTime: () => this.#lastPassTime,
      },
      this.#log,
      config.statusDebounceMs !== undefined ? { debounceMs: config.statusDebounceMs } : {},
    );
    const gauge = <L extends string>(name: string, help: string, labelNames: L[] = []) =>
      (deps.registry.getSingleMetric(name) as Gauge<L> | undefined) ?? new Gauge<L>({ name, help, labelNames, registers: [deps.registry] });
    this.#gauges = {
      objects: gauge('portal_audit_objects', 'Objects held by the audit (every matched kind).'),
      violating: gauge('portal_audit_violating_objects', 'Objects violating a rule now, by rule.', ['rule']),
      passSeconds: gauge('portal_audit_full_pass_duration_seconds', 'Duration of the last full audit pass (enqueue to drained).'),
    };
  }

  // ---- lifecycle -------------------------------------------------------

  async start(signal: AbortSignal): Promise<void> {
    this.#signal = signal;
    // One listener per informer (kinds, reports, ledger) and per in-flight list request: more than Node's default 10.
    setMaxListeners(0, signal);
    const pool = new WorkerPool(this.#queue, (w, s) => this.#handle(w.key, s), { concurrency: this.#config.workers, logger: this.#log });
    const background = [this.reports.start(signal), this.#ledger.start(signal), pool.start(signal)];
    const unsubscribe = this.#deps.onNamespaceChange?.((ns) => this.#enqueueNamespace(ns));
    const interval = setInterval(() => this.fullPass(), this.#config.auditIntervalMs);
    const poll = setInterval(() => void this.#tick(), this.#config.pollMs ?? 100);
    try {
      await this.#tick();
      await Promise.race([Promise.all([this.#informers.waitForSync(signal), this.reports.reports.waitForSync(signal), this.#ledger.waitForSync(signal)]), aborted(signal)]).catch(() => {});
      if (!signal.aborted) this.fullPass();
      await aborted(signal);
    } finally {
      clearInterval(interval);
      clearInterval(poll);
      unsubscribe?.();
      this.#queue.destroy();
      await Promise.allSettled([...background, this.#informers.stopAll(), this.status.close()]);
    }
  }

  /** Call from the elector's onStartedLeading for an immediate takeover (the poll would find it within pollMs). */
  leadershipChanged(): void {
    void this.#tick();
  }

  // ---- rules, term, passes ------------------------------------------------

  #ticking = false;
  async #tick(): Promise<void> {
    const signal = this.#signal;
    if (!signal || signal.aborted || this.#ticking) return;
    this.#ticking = true;
    try {
      const term = this.#deps.currentTerm();
      const epoch = term?.isValid() ? term.epochString : undefined;
      if (epoch !== this.#epoch) {
        this.#epoch = epoch;
        if (term && epoch) this.#becameLeader(term);
      }
      if (this.#deps.ruleSet.revision !== this.#revision) {
        this.#revision = this.#deps.ruleSet.revision;
        await this.#syncKinds(signal);
        this.status.markDirty();
        this.#enqueueAll(false);
      }
      this.status.schedule(() => this.#validTerm(), signal);
      this.#gauges.objects.set(this.#objects.size);
    } catch (err) {
      this.#log.warn({ err: (err as Error).message }, 'audit tick failed, retrying');
      this.#revision = -1;
    } finally {
      this.#ticking = false;
    }
  }

  async #syncKinds(signal: AbortSignal): Promise<void> {
    const wanted: KindResource[] = [];
    const unresolved: string[] = [];
    for (const { group, kind } of this.#deps.ruleSet.matchedKinds()) {
      const r = await this.#resolver.resolve(group, kind, signal);
      if (r.ok) wanted.push(r.resource);
      else unresolved.push(r.reason);
    }
    if (unresolved.join() !== this.#unresolved.join()) {
      for (const reason of unresolved) this.#log.warn({ reason }, 'a matched kind is not audited');
      this.#unresolved = unresolved;
    }
    if (unresolved.length > 0) this.#resolver.forget();
    const { started, stopped } = this.#informers.sync(wanted, signal);
    if (started.length || stopped.length) this.#log.info({ started: started.map((r) => r.kind), stopped: stopped.map((r) => r.kind) }, 'audited kinds changed');
    for (const r of stopped) {
      // Objects of a kind no rule matches any more: their reports go (nothing applies).
      for (const [key, st] of this.#objects) if (st.gvk.group === r.group && st.gvk.kind === r.kind) this.#enqueue(key);
    }
  }

  #validTerm(): LeaderTerm | undefined {
    const t = this.#deps.currentTerm();
    return t?.isValid() ? t : undefined;
  }

  #becameLeader(term: LeaderTerm): void {
    this.termStartedAt = Date.now();
    this.firstSideEffectAt = undefined;
    this.#takeover = { epoch: term.epochString, keys: new Set(), scanned: false, passEnded: false };
    this.status.markDirty();
    void this.#enqueuePending(term);
  }

  /**
   * Enqueues objects whose side effects are not observed done, in slices
   * that yield to the event loop: building and comparing 10,000 desired
   * reports takes ~1 s of CPU, which must stall neither admission on this
   * replica nor the workers that already act on the first keys.
   */
  async #enqueuePending(term: LeaderTerm): Promise<void> {
    // 500 objects ≈ 50 ms of work at ~100 µs each: short enough not to stall admission noticeably.
    const SLICE = 500;
    let pending = 0;
    let seen = 0;
    const takeover = this.#takeover;
    for (const [key, st] of [...this.#objects]) {
      if (term.signal.aborted || this.#epoch !== term.epochString) return;
      if (this.#pending(key, st, term)) {
        takeover?.keys.add(key);
        this.#enqueue(key);
        pending++;
      }
      if (++seen % SLICE === 0) await new Promise((r) => setImmediate(r));
    }
    this.#log.info({ epoch: term.epochString, objects: this.#objects.size, pending }, 'leading: pending audit side effects enqueued');
    if (takeover) {
      takeover.scanned = true;
      this.#takeoverProgress(takeover);
    }
  }

  /**
   * The takeover is reconciled once every key it enqueued was handled: the
   * world then matches this replica's complete, warm evaluation. A full pass
   * that ended while leading but before that moment sets lastAuditTime now.
   */
  #takeoverProgress(takeover: Takeover, key?: string): void {
    if (key !== undefined) takeover.keys.delete(key);
    if (!takeover.scanned || takeover.keys.size > 0 || this.#takeover !== takeover) return;
    this.#takeover = undefined;
    if (takeover.passEnded && this.#validTerm()?.epochString === takeover.epoch) this.#setLastAuditTime(new Date());
  }

  #setLastAuditTime(at: Date): void {
    this.#lastAuditTime = at;
    this.status.markDirty();
    if (this.#signal) this.status.schedule(() => this.#validTerm(), this.#signal);
  }

  /** Does this object still need a side effect (as far as this replica has observed)? */
  #pending(key: string, st: ObjectState, term: LeaderTerm): boolean {
    const ref = st.deleted ? undefined : resourceReference(st.object);
    if (ref) {
      const id = reportIdentity(ref);
      const desired = buildPolicyReport(ref, st.verdicts, { epoch: term.epochString, now: new Date() });
      if (!reportContentEqual(this.reports.observed(id.namespace, id.name), desired)) return true;
    }
    const now = Date.now();
    for (const rule of this.#rulesWithAlertsOrMarks(st, key)) {
      const violating = st.violating.has(rule.display);
      const k = (type: 'label' | 'annotate' | 'alert' | 'evict') => actionKey({ rule: rule.display, gvk: st.gvk, namespace: st.object.metadata?.namespace ?? '', name: st.object.metadata?.name ?? '', actionType: type });
      for (const a of rule.state?.actions ?? []) {
        if (!violating || st.deleted) continue;
        if ((a.type === 'label' || a.type === 'annotate') && !this.store.has(k(a.type))) return true;
        // An unconfirmed eviction intent is settled by the executor (it reads the pod).
        if (a.type === 'evict' && this.#config.maxEvictionsPerMinute > 0 && this.store.get(k('evict'))?.state !== 'done') return true;
      }
      if (this.#alertmanager.configured) {
        const wants = violating && !st.deleted && (rule.state?.actions ?? []).some((a) => a.type === 'alert');
        const record = this.store.get(k('alert'));
        // An unconfirmed intent (its sender died or was fenced) is settled with Alertmanager by the executor.
        if (wants && record?.state === 'intent') return true;
        const d = decideAlert(record, wants, now, this.#config.alertResendIntervalMs);
        if (d.type === 'fire' || d.type === 'resolve') return true;
        if (d.type === 'wait') this.#queue.addAfter(key, undefined, d.dueAt - now);
      }
    }
    return false;
  }

  #rulesWithAlertsOrMarks(st: ObjectState, _key: string): Array<{ display: string; state: RuleState | undefined }> {
    const byDisplay = this.#ruleStates();
    const names = new Set([...st.seen, ...st.verdicts.map((v) => v.rule)]);
    return [...names].map((display) => ({ display, state: byDisplay.get(display) }));
  }

  #statesRevision = -1;
  #statesByDisplay = new Map<string, RuleState>();
  #ruleStates(): Map<string, RuleState> {
    if (this.#statesRevision !== this.#deps.ruleSet.revision) {
      this.#statesByDisplay = new Map(this.#deps.ruleSet.states().map((s) => [ruleDisplay(s), s]));
      this.#statesRevision = this.#deps.ruleSet.revision;
    }
    return this.#statesByDisplay;
  }

  /** Enqueues every object of every audited kind (a full pass). Returns how many. */
  fullPass(): number {
    if (this.#passPending.size > 0) return 0; // the previous pass is still running
    this.#passStartedAt = performance.now();
    const n = this.#enqueueAll(true);
    if (n === 0) this.#finishPass();
    return n;
  }

  #enqueueAll(pass: boolean): number {
    let n = 0;
    for (const { resource, informer } of this.#informers.all()) {
      for (const o of informer.list()) {
        const key = objectKey(resource.group, resource.kind, o.metadata?.namespace ?? '', o.metadata?.name ?? '');
        if (pass) this.#passPending.add(key);
        this.#enqueue(key);
        n++;
      }
    }
    // Objects known but gone from every informer (kind dropped): evaluate to clean up.
    for (const key of this.#objects.keys()) this.#enqueue(key);
    return n;
  }

  #finishPass(): void {
    this.#passes++;
    // lastAuditTime (docs/architecture.md, "Rule status") is the leader's
    // audit: the end of a full pass that ENDS while this replica leads. Keys
    // the pass handled before leadership arrived (as a follower: evaluated,
    // side effects skipped) are covered by the takeover reconciliation, so
    // until that has drained the time waits for it. The takeover itself
    // moves nothing, so a failover rewrites no rule status that is right.
    this.#lastPassTime = new Date();
    const term = this.#validTerm();
    if (term && this.#takeover?.epoch === term.epochString) this.#takeover.passEnded = true;
    else if (term && term.epochString === this.#epoch) this.#lastAuditTime = this.#lastPassTime;
    this.#gauges.passSeconds.set((performance.now() - this.#passStartedAt) / 1000);
    this.status.markDirty();
    if (this.#signal) this.status.schedule(() => this.#validTerm(), this.#signal);
    this.#log.info({ objects: this.#objects.size, seconds: (performance.now() - this.#passStartedAt) / 1000 }, 'full audit pass done');
  }

  #enqueueNamespace(namespace: string): void {
    for (const { resource, informer } of this.#informers.all()) {
      for (const o of informer.list(namespace)) this.#enqueue(objectKey(resource.group, resource.kind, namespace, o.metadata?.name ?? ''));
    }
  }

  #enqueue(key: string): void {
    try {
      this.#queue.add(key);
    } catch (err) {
      if (isPortalError(err, ErrorCode.Closed)) return;
      this.#log.warn({ key, err: (err as Error).message }, 'audit queue rejected a key; the next full pass retries it');
    }
  }

  #onObjectEvent(resource: KindResource, event: InformerEvent<KubeObject>): void {
    const o = event.object;
    if (event.type !== 'delete') this.store.observeObject({ group: resource.group, version: resource.version, kind: resource.kind }, o);
    this.#enqueue(objectKey(resource.group, resource.kind, o.metadata?.namespace ?? '', o.metadata?.name ?? ''));
  }

  // ---- the work ------------------------------------------------------------

  async #handle(key: string, signal: AbortSignal): Promise<{ requeueAfterMs: number } | void> {
    try {
      this.#evaluate(key);
      return await this.#act(key, signal);
    } finally {
      if (this.#passPending.delete(key) && this.#passPending.size === 0) this.#finishPass();
      if (this.#takeover?.keys.has(key)) this.#takeoverProgress(this.#takeover, key);
    }
  }

  /** Recomputes the desired state of one object (every replica). */
  #evaluate(key: string): void {
    const { group, kind, namespace, name } = parseObjectKey(key);
    const resource = this.#informers.resource(group, kind);
    const object = resource ? this.#informers.informer(group, kind)?.get(name, namespace || undefined) : undefined;
    const prev = this.#objects.get(key);
    let verdicts: RuleVerdict[] = [];
    const exempt = this.#exempt.has(namespace) || (group === '' && kind === 'Namespace' && this.#exempt.has(name));
    if (object && resource && !exempt) {
      verdicts = evaluate(this.#deps.ruleSet, {
        operation: 'AUDIT',
        kind: { group, version: resource.version, kind },
        namespace,
        name,
        object,
        oldObject: null,
        namespaceLabels: group === '' && kind === 'Namespace' ? (object.metadata?.labels ?? {}) : namespace ? this.#deps.namespaceLabels(namespace) : undefined,
      });
    }
    const violating = new Set(verdicts.filter(isViolation).map((v) => v.rule));
    const changed = new Set<string>();
    for (const r of prev?.violating ?? []) if (!violating.has(r)) changed.add(r);
    for (const r of violating) if (!prev?.violating.has(r)) changed.add(r);
    for (const r of changed) {
      let set = this.#violators.get(r);
      if (violating.has(r)) {
        if (!set) this.#violators.set(r, (set = new Set()));
        set.add(key);
      } else set?.delete(key);
      this.#gauges.violating.set({ rule: r }, this.#violators.get(r)?.size ?? 0);
    }
    if (changed.size > 0) {
      const states = this.#ruleStates();
      this.status.markDirty([...changed].map((r) => states.get(r)?.key).filter((k): k is string => k !== undefined));
    }
    const seen = new Set([...(prev?.seen ?? []), ...violating]);
    if (object && resource) {
      this.#objects.set(key, { gvk: { group, version: resource.version, kind }, object, uid: object.metadata?.uid, verdicts, violating, seen, deleted: false });
    } else if (prev) {
      // Gone: keep it until its leader-only clean-up (alert resolution) is done.
      this.#objects.set(key, { ...prev, verdicts: [], violating: new Set(), seen, deleted: true });
    }
  }

  /** Leader-only side effects for one object; followers return at once. */
  async #act(key: string, poolSignal: AbortSignal): Promise<{ requeueAfterMs: number } | void> {
    const st = this.#objects.get(key);
    if (!st) return;
    const term = this.#validTerm();
    if (!term) {
      this.#prune(key, st);
      return;
    }
    if (!this.reports.synced() || !this.#ledger.hasSynced()) return { requeueAfterMs: 500 };
    const signal = this.#termSignal(poolSignal, term);
    const outcomes: ActionOutcome[] = [];
    try {
      // 1. The report (desired vs observed; GC removes it with the object too).
      const ref = resourceReference(st.object);
      if (ref) {
        const id = reportIdentity(ref);
        const desired = st.deleted ? undefined : buildPolicyReport(ref, st.verdicts, { epoch: term.epochString, now: new Date(), previous: this.reports.observed(id.namespace, id.name) });
        if (!(st.deleted && !this.reports.observed(id.namespace, id.name))) {
          const w = await this.reports.apply(id, desired, term, signal);
          if (w !== 'unchanged') this.#sideEffect();
        }
      }
      // 2. Actions of every rule the object violates; alert resolution for the others.
      const target: ActionTarget = { gvk: st.gvk, object: st.object };
      const states = this.#ruleStates();
      const meta = st.object.metadata ?? {};
      for (const { display, state } of this.#rulesWithAlertsOrMarks(st, key)) {
        const actions = state?.actions ?? [];
        const verdict = st.verdicts.find((v) => v.rule === display);
        const violating = !st.deleted && st.violating.has(display);
        if (violating && verdict) {
          if (actions.some((a) => a.type === 'label' || a.type === 'annotate')) outcomes.push(await this.#counted(this.#executor.mark(target, display, actions, term, signal)));
          if (actions.some((a) => a.type === 'evict') && this.#config.maxEvictionsPerMinute > 0) outcomes.push(await this.#counted(this.#executor.evict(target, display, term, signal)));
        }
        const wantsAlert = actions.some((a) => a.type === 'alert');
        const alertKey = actionKey({ rule: display, gvk: st.gvk, namespace: meta.namespace ?? '', name: meta.name ?? '', actionType: 'alert' });
        if ((wantsAlert && violating) || this.store.has(alertKey)) {
          if (!this.#alertmanager.configured) {
            if (wantsAlert && violating) outcomes.push({ status: 'skipped', reason: 'no --alertmanager-url configured' });
            continue;
          }
          const violation = {
            rule: display,
            severity: verdict?.severity ?? states.get(display)?.severity ?? 'medium',
            kind: st.gvk.kind,
            namespace: meta.namespace ?? '',
            name: meta.name ?? '',
            message: verdict?.message ?? `${display}: violation resolved`,
            epoch: term.epochString,
          };
          outcomes.push(await this.#counted(this.#executor.alert(target, violation, wantsAlert && violating, term, signal)));
        }
      }
    } catch (err) {
      if (isPortalError(err, ErrorCode.TermExpired) || term.signal.aborted) {
        // Not this key's fault: the next leader (maybe us again) picks it up as pending.
        this.#log.debug({ key }, 'side effects stopped: the leader term ended');
        return;
      }
      throw err;
    }
    this.#prune(key, st);
    const errors = outcomes.filter((o): o is Extract<ActionOutcome, { status: 'error' }> => o.status === 'error');
    if (errors.length > 0) throw new Error(errors.map((e) => e.reason).join('; '));
    let after: number | undefined;
    for (const o of outcomes) {
      const ms = o.status === 'retry' ? o.afterMs : o.status === 'done' ? o.requeueAfterMs : undefined;
      if (ms !== undefined && (after === undefined || ms < after)) after = ms;
    }
    return after !== undefined ? { requeueAfterMs: Math.max(0, after) } : undefined;
  }

  #combined: { term: LeaderTerm; signal: AbortSignal } | undefined;
  /** One combined signal per term (not per key): every worker's writes listen on it. */
  #termSignal(poolSignal: AbortSignal, term: LeaderTerm): AbortSignal {
    if (this.#combined?.term !== term) {
      const signal = AbortSignal.any([poolSignal, term.signal]);
      // Each in-flight write (limiter wait, HTTP request) adds a listener; workers × writes exceeds Node's default of 10.
      setMaxListeners(0, signal);
      this.#combined = { term, signal };
    }
    return this.#combined.signal;
  }

  /** Forgets resolved rules (no alert left to resolve) and, once clean, deleted objects. */
  #prune(key: string, st: ObjectState): void {
    for (const display of [...st.seen]) {
      if (st.violating.has(display)) continue;
      const k = actionKey({ rule: display, gvk: st.gvk, namespace: st.object.metadata?.namespace ?? '', name: st.object.metadata?.name ?? '', actionType: 'alert' });
      if (!this.store.has(k)) st.seen.delete(display);
    }
    if (st.deleted && st.seen.size === 0) this.#objects.delete(key);
  }

  async #counted(p: Promise<ActionOutcome>): Promise<ActionOutcome> {
    const o = await p;
    if (o.status === 'done') this.#sideEffect();
    return o;
  }

  #sideEffect(): void {
    this.firstSideEffectAt ??= Date.now();
  }

  // ---- introspection -------------------------------------------------------

  /** Objects violating `rule` (display key) right now, as computed on this replica. */
  violations(rule: string): number {
    return this.#violators.get(rule)?.size ?? 0;
  }

  get passes(): number {
    return this.#passes;
  }

  /** Every informer (kinds, reports, ledger) has listed once. */
  synced(): boolean {
    return this.#informers.synced() && this.reports.synced() && this.#ledger.hasSynced();
  }

  /** Nothing waiting or in flight (delayed re-sends excluded). */
  idle(): boolean {
    return this.#queue.length === 0 && this.#queue.processing === 0 && this.#passPending.size === 0;
  }

  stats(): Record<string, unknown> {
    return {
      objects: this.#objects.size,
      kinds: this.#informers.all().map((i) => i.resource.kind),
      unresolvedKinds: this.#unresolved,
      queue: { waiting: this.#queue.length, processing: this.#queue.processing, delayed: this.#queue.delayed },
      passes: this.#passes,
      lastAuditTime: this.#lastAuditTime?.toISOString() ?? null,
      leading: this.#epoch ?? null,
      idempotencyKeys: this.store.size,
      reportWrites: { ...this.reports.writes },
      statusWrites: this.status.writes,
    };
  }
}

function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
