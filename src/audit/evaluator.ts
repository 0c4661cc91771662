/**
 * Audit evaluation (docs/design.md §1, §5; issue 10 item 3): runs on EVERY replica.
 *
 * Pipeline: informers for every kind some rule matches (started/stopped as
 * rules come and go) feed a WorkQueue keyed by object; rule changes and the
 * periodic full pass (`--audit-interval`) enqueue everything; a WorkerPool
 * (`--audit-workers`) evaluates each object with the RuleSet (operation
 * `AUDIT`) and keeps the desired state warm: per-object verdicts and per-rule
 * violating objects. It also learns what the leader did (provenance
 * annotations, the ledger ConfigMaps, the stored reports) into the
 * idempotency store.
 *
 * The pool's side-effecting step is not here: it is an {@link AuditStep} that
 * the leader-only {@link AuditActuator} attaches for the length of a term (the
 * Manager starts it when leadership is won and cancels it when it is lost).
 * With no step attached — a follower — a worker evaluates and stops there.
 * Nothing in this file knows about leadership.
 *
 * Another kind of policy (e.g. ValidatingAdmissionPolicy) plugs in as an
 * {@link AuditPolicySource}: its verdicts join the RuleSet's in
 * `ObjectState.verdicts`, its kinds join the informers, and the actuator
 * writes them into the same reports without knowing where they came from.
 */
import { setMaxListeners } from 'node:events';
import type { Logger } from 'pino';
import { Gauge } from 'prom-client';
import type { InformerEvent, ResilientInformer } from '../kube/informer.ts';
import { ErrorCode, isPortalError, toError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';
import { evaluate, exemptVerdicts, type RuleState } from '../policy/index.ts';
import type { EvaluationInput, KubeObject, RuleVerdict } from '../policy/types.ts';
import type { AuditEvaluatorConfig, AuditEvaluatorDeps, AuditStep, ObjectState } from './audit-step.ts';
import { AuditedKinds } from './audited-kinds.ts';
import { AuditRules, type AuditRule } from './audit-rules.ts';
import type { Coverage } from './coverage.ts';
import { ExemptionTracker } from './exemption-tracker.ts';
import { FullPasses } from './full-pass.ts';
import { actionKey, IdempotencyStore } from './idempotency.ts';
import { KindInformers } from './kind-informers.ts';
import type { KindResource } from './kind-resources.ts';
import { ledgerInformer } from './ledger-informer.ts';
import { ObjectIndex } from './object-index.ts';
import type { ReportWriter } from './report-writer.ts';
import { auditInput, nextObjectState } from './object-state.ts';
import { exemptionsOf, VerdictInterner } from './verdicts.ts';
import { objectKey, parseObjectKey, WorkQueue } from './work-queue.ts';
import { WorkerPool, type HandlerResult } from './worker-pool.ts';

export type { AuditEvaluatorConfig, AuditEvaluatorDeps, AuditPolicySource, AuditStep, ObjectState } from './audit-step.ts';

/**
 * Most keys the audit queue holds. The evaluation work queue's own default
 * (50,000) is the 10,000-Pod sizing of issue 5 with room; issue 20 measures
 * 50,000 Pods, whose first pass enqueues every one of them plus their
 * owners (ReplicaSets, Deployments): four times that.
 */
const AUDIT_QUEUE_MAX = 200_000;

export class AuditEvaluator {
  readonly name = 'audit-evaluation';
  readonly store = new IdempotencyStore();
  /** Stored reports (watched on every replica); the actuator writes through it. */
  readonly reports: ReportWriter;
  readonly #config: Readonly<AuditEvaluatorConfig>;
  readonly #deps: AuditEvaluatorDeps;
  readonly #log: Logger;
  readonly #queue: WorkQueue<undefined>;
  readonly #informers: KindInformers;
  readonly #kinds: AuditedKinds;
  readonly #ledger: ResilientInformer<KubeObject>;
  readonly #exempt: ReadonlySet<string>;
  readonly #objects = new ObjectIndex();
  readonly #rules: AuditRules;
  readonly #verdicts = new VerdictInterner();
  readonly #exemptions: ExemptionTracker;
  readonly #passes: FullPasses;
  readonly #gauges: { objects: Gauge; violating: Gauge<'rule'>; passSeconds: Gauge };
  #signal: AbortSignal | undefined;
  #revision = '';
  #step: AuditStep | undefined;
  /** `act` calls in flight: detaching waits for them. */
  readonly #acting = new Set<Promise<unknown>>();
  #handled = 0; // keys handled since start (the bench's rate)

  constructor(config: AuditEvaluatorConfig, deps: AuditEvaluatorDeps) {
    this.#config = Object.freeze({ ...config });
    this.#deps = deps;
    this.#log = deps.logger.child({ [LogKey.subcomponent]: 'audit' });
    const { client } = deps;
    this.#exempt = new Set([...config.exemptNamespaces, config.installNamespace]);
    this.#rules = new AuditRules(deps.ruleSet, deps.policies ?? []);
    this.#queue = new WorkQueue({ name: 'audit', maxSize: AUDIT_QUEUE_MAX, logger: this.#log, registry: deps.registry });
    const staleOpt = config.staleAfterMs !== undefined ? { staleAfterMs: config.staleAfterMs } : {};
    // A kind that lists for the first time (start-up, or RBAC granted later) is audited by a pass of its own.
    this.#informers = new KindInformers(client, this.#log, (r, e) => this.#onObjectEvent(r, e), { ...staleOpt, onSynced: () => this.#passes.request(this.#signal) });
    this.#kinds = new AuditedKinds(client, this.#informers, deps.ruleSet, deps.policies ?? [], this.#log);
    this.reports = deps.reports;
    this.#ledger = ledgerInformer(client, config.installNamespace, this.store, this.#log, staleOpt);
    const gauge = <L extends string>(name: string, help: string, labelNames: L[] = []) =>
      (deps.registry.getSingleMetric(name) as Gauge<L> | undefined) ?? new Gauge<L>({ name, help, labelNames, registers: [deps.registry] });
    this.#gauges = {
      objects: gauge('portal_audit_objects', 'Objects held by the audit (every matched kind).'),
      violating: gauge('portal_audit_violating_objects', 'Objects violating a rule now, by rule.', ['rule']),
      passSeconds: gauge('portal_audit_full_pass_duration_seconds', 'Duration of the last full audit pass (enqueue to drained).'),
    };
    this.#passes = new FullPasses({
      informers: this.#informers,
      ruleSet: deps.ruleSet,
      logger: this.#log,
      passSeconds: this.#gauges.passSeconds,
      enqueue: (key) => this.enqueue(key),
      heldKeys: () => this.#objects.keys(),
      heldCount: () => this.#objects.size,
      ended: (at, rules) => this.#step?.passEnded?.(at, rules),
    });
    this.#exemptions = new ExemptionTracker({
      ruleSet: deps.ruleSet,
      logger: this.#log,
      onExemption: deps.onExemption,
      enqueue: (key) => this.enqueue(key),
      changed: (displays) => this.#step?.exceptionsChanged?.(displays),
    });
  }

  // ---- lifecycle -------------------------------------------------------

  async start(signal: AbortSignal): Promise<void> {
    this.#signal = signal;
    // One listener per informer (kinds, reports, ledger) and per in-flight list request: more than Node's default 10.
    setMaxListeners(0, signal);
    const pool = new WorkerPool(this.#queue, (w) => this.#handle(w.key), { concurrency: this.#config.workers, logger: this.#log });
    const background = [this.reports.start(signal), this.#ledger.start(signal), pool.start(signal)];
    const unsubscribe = this.#deps.onNamespaceChange?.((ns) => this.#enqueueNamespace(ns));
    const interval = setInterval(() => this.#passes.start(), this.#config.auditIntervalMs);
    const poll = setInterval(() => void this.#tick(), this.#config.rulePollMs ?? 100);
    this.#exemptions.arm(this.#signal);
    try {
      await this.#tick();
      // Kind informers are not awaited: one that RBAC forbids would never sync. Each kind's
      // first list requests a pass of its own (onSynced), so every kind is audited once it can be.
      await Promise.race([Promise.all([this.reports.reports.waitForSync(signal), this.#ledger.waitForSync(signal)]), aborted(signal)]).catch(() => {});
      this.#passes.ready(signal);
      await aborted(signal);
    } finally {
      clearInterval(interval);
      clearInterval(poll);
      this.#exemptions.disarm();
      unsubscribe?.();
      this.#queue.destroy();
      await Promise.allSettled([...background, this.#informers.stopAll()]);
    }
  }

  /**
   * Attaches the side-effecting step (one at a time); returns `detach`,
   * which resolves once no `act` of this step is running any more.
   */
  attach(step: AuditStep): () => Promise<void> {
    if (this.#step) throw new Error('an audit step is already attached');
    this.#step = step;
    return async () => {
      if (this.#step === step) this.#step = undefined;
      while (this.#acting.size > 0) await Promise.allSettled([...this.#acting]);
    };
  }

  // ---- what the actuator reads and asks for ----------------------------------

  /** Every object evaluation holds (a snapshot: safe to iterate across awaits). */
  objects(): Array<[string, ObjectState]> {
    return [...this.#objects.entries()];
  }

  /** What evaluation holds about one object. */
  objectState(key: string): ObjectState | undefined {
    return this.#objects.get(key);
  }

  /** The objects held in `namespace` ("" = cluster-scoped ones). */
  objectsIn(namespace: string): Iterable<ObjectState> {
    return this.#objects.in(namespace);
  }

  /** Every object change seen before this time has been evaluated (and acted on while leading). */
  currentAsOf(): Date {
    return new Date(Date.now() - this.#queue.lagMs());
  }

  enqueue(key: string): void {
    try {
      this.#queue.add(key);
    } catch (err) {
      if (isPortalError(err, ErrorCode.Closed)) return;
      this.#log.warn({ [LogKey.key]: key, [LogKey.error]: toError(err) }, 'audit queue rejected a key; the next full pass retries it');
    }
  }

  enqueueAfter(key: string, ms: number): void {
    this.#queue.addAfter(key, undefined, ms);
  }

  /** Rules with their display key, cached per rule set revision. */
  ruleStates(): Map<string, RuleState> {
    return this.#rules.states();
  }

  /**
   * The rules an object violates or once violated (whose alert may need
   * resolving), with their audit actions: a Portal rule's, else those a
   * policy source gives (a VAP's `policies.portal.dev/audit-actions`).
   */
  rulesOf(st: ObjectState): AuditRule[] {
    return this.#rules.of(st);
  }

  /** Forgets resolved rules (no alert left to resolve) and, once clean, deleted objects. */
  prune(key: string, st: ObjectState): void {
    for (const display of [...st.seen]) {
      if (st.violating.has(display)) continue;
      const k = actionKey({ rule: display, gvk: st.gvk, namespace: st.object.metadata?.namespace ?? '', name: st.object.metadata?.name ?? '', actionType: 'alert' });
      if (!this.store.has(k)) st.seen.delete(display);
    }
    if (st.deleted && st.seen.size === 0 && this.#objects.get(key) === st) this.#objects.forget(key);
  }

  /** Reports and ledger have listed once (the actuator compares against them). */
  observedSynced(): boolean {
    return this.reports.synced() && this.#ledger.hasSynced();
  }

  get lastPassTime(): Date | undefined {
    return this.#passes.lastPassTime;
  }

  /** The end of the last pass on this replica that evaluated the rule (RuleState key). */
  ruleLastPass(key: string): Date | undefined {
    return this.#passes.ruleLastPass(key);
  }

  /** The rule's coverage (RuleState key), once computed. */
  coverage(key: string): Coverage | undefined {
    return this.#kinds.coverage(key);
  }

  /** Objects the exception (`namespace/name`) exempts right now, as computed on this replica. */
  exempted(display: string): number {
    return this.#exemptions.exempted(display);
  }

  // ---- rules and passes ------------------------------------------------------

  #revisionNow(): string {
    return [this.#deps.ruleSet.revision, ...(this.#deps.policies ?? []).map((p) => p.revision)].join('/');
  }

  #ticking = false;
  async #tick(): Promise<void> {
    const signal = this.#signal;
    if (!signal || signal.aborted || this.#ticking) return;
    this.#ticking = true;
    try {
      const revision = this.#revisionNow();
      if (revision !== this.#revision) {
        this.#revision = revision;
        for (const r of await this.#kinds.sync(signal)) {
          // Objects of a kind no rule matches any more: their reports go (nothing applies).
          for (const [key, st] of this.#objects.entries()) if (st.gvk.group === r.group && st.gvk.kind === r.kind) this.enqueue(key);
        }
        this.#step?.rulesChanged?.();
        this.#exemptions.arm(this.#signal);
        this.#passes.request(signal);
      }
      const coverageChanged = this.#kinds.updateCoverage(this.#deps.webhookConfiguration?.() ?? 'unchecked');
      if (coverageChanged.length > 0) this.#step?.coverageChanged?.(coverageChanged);
      this.#gauges.objects.set(this.#objects.size);
    } catch (err) {
      this.#log.warn({ [LogKey.error]: toError(err) }, 'audit tick failed, retrying');
      this.#revision = '';
    } finally {
      this.#ticking = false;
    }
  }

  #enqueueNamespace(namespace: string): void {
    for (const { resource, informer } of this.#informers.all()) {
      for (const o of informer.list(namespace)) this.enqueue(objectKey(resource.group, resource.kind, namespace, o.metadata?.name ?? ''));
    }
  }

  #onObjectEvent(resource: KindResource, event: InformerEvent<KubeObject>): void {
    const o = event.object;
    if (event.type !== 'delete') this.store.observeObject({ group: resource.group, version: resource.version, kind: resource.kind }, o);
    this.enqueue(objectKey(resource.group, resource.kind, o.metadata?.namespace ?? '', o.metadata?.name ?? ''));
  }

  async #handle(key: string): Promise<HandlerResult> {
    const step = this.#step;
    try {
      await this.#evaluate(key);
      const st = this.#objects.get(key);
      if (!st) return;
      // A follower: evaluated, nothing to act on.
      if (!step || this.#step !== step) return this.prune(key, st);
      const acting = step.act(key, st);
      this.#acting.add(acting);
      try {
        return await acting;
      } finally {
        this.#acting.delete(acting);
      }
    } finally {
      this.#handled++;
      this.#passes.handled(key);
      this.#step?.handled?.(key);
    }
  }

  /** Recomputes the desired state of one object (the queue hands a key to one worker at a time). */
  async #evaluate(key: string): Promise<void> {
    const { group, kind, namespace, name } = parseObjectKey(key);
    const resource = this.#informers.resource(group, kind);
    const object = resource ? this.#informers.informer(group, kind)?.get(name, namespace || undefined) : undefined;
    const current = object && resource ? { gvk: { group, version: resource.version, kind }, object } : undefined;
    const exempt = this.#exempt.has(namespace) || (group === '' && kind === 'Namespace' && this.#exempt.has(name));
    const verdicts = current && !exempt ? await this.#verdictsOf(auditInput(current.gvk, namespace, name, current.object, this.#deps.namespaceLabels)) : [];
    const prev = this.#objects.get(key);
    const exempted = exemptionsOf(verdicts);
    this.#exemptions.track(key, prev, exempted, current?.object, resource?.version ?? prev?.gvk.version ?? '');
    const next = nextObjectState(prev, current, verdicts, exempted);
    if (next) this.#violationsChanged(this.#objects.hold(key, next));
  }

  /** Every policy's verdicts for one object: the rules' (errors reported), then other sources' (VAPs) through the same exceptions. */
  async #verdictsOf(request: EvaluationInput): Promise<RuleVerdict[]> {
    const verdicts = [...(await (this.#deps.evaluate ?? ((i: EvaluationInput) => evaluate(this.#deps.ruleSet, i)))(request))];
    const onError = this.#deps.onRuleError;
    if (onError) for (const v of verdicts) if (v.result === 'error') onError(v, { kind: request.kind.kind, namespace: request.namespace, name: request.name });
    for (const p of this.#deps.policies ?? []) verdicts.push(...exemptVerdicts(this.#deps.ruleSet, request, await p.evaluate(request)));
    return verdicts.map((v) => this.#verdicts.intern(v));
  }

  #violationsChanged(changed: ReadonlySet<string>): void {
    for (const r of changed) this.#gauges.violating.set({ rule: r }, this.#objects.violations(r));
    if (changed.size > 0 && this.#step?.violationsChanged) {
      const states = this.ruleStates();
      this.#step.violationsChanged([...changed].map((r) => states.get(r)?.key).filter((k): k is string => k !== undefined));
    }
  }

  /** Objects violating `rule` (display key) right now, as computed on this replica. */
  violations(rule: string): number {
    return this.#objects.violations(rule);
  }

  /** Enqueues every object of every audited kind (a full pass). Returns how many. */
  fullPass(): number {
    return this.#passes.start();
  }

  get passes(): number {
    return this.#passes.passes;
  }

  /** Full passes that began with every audited kind listed (or forbidden); see FullPasses.completePasses. */
  get completePasses(): number {
    return this.#passes.completePasses;
  }

  /** Every informer (kinds, reports, ledger) has listed once. */
  synced(): boolean {
    return this.#informers.synced() && this.observedSynced();
  }

  /** Nothing waiting or in flight (delayed re-sends excluded). */
  idle(): boolean {
    return this.#queue.length === 0 && this.#queue.processing === 0 && !this.#passes.running;
  }

  stats(): Record<string, unknown> {
    return {
      objects: this.#objects.size,
      kinds: this.#informers.all().map((i) => i.resource.kind),
      unresolvedKinds: this.#kinds.unresolved,
      queue: { waiting: this.#queue.length, processing: this.#queue.processing, delayed: this.#queue.delayed, lagSeconds: Number((this.#queue.lagMs() / 1000).toFixed(3)) },
      handled: this.#handled,
      passes: this.#passes.passes,
      completePasses: this.#passes.completePasses,
      acting: this.#step !== undefined,
      idempotencyKeys: this.store.size,
      reportWrites: { ...this.reports.writes },
    };
  }
}

export function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
