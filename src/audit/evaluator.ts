/**
 * Audit evaluation (DESIGN §1, §5; issue 10 item 3): runs on EVERY replica.
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
import { Gauge, type Registry } from 'prom-client';
import type { KubeClient } from '../kube/client.ts';
import { ResilientInformer, type InformerEvent } from '../kube/informer.ts';
import { ErrorCode, isPortalError, toError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';
import { evaluate, exemptVerdicts, type RuleSet, type RuleState } from '../policy/index.ts';
import type { ExemptionTransition } from './exception-events.ts';
import type { EvaluationInput, GroupVersionKind, KubeObject, RuleAction, RuleVerdict } from '../policy/types.ts';
import { actionKey, IdempotencyStore } from './idempotency.ts';
import type { WebhookConfigurationView } from '../kube/webhook-config-source.ts';
import { ruleCoverage, type Coverage, type CoverageInputs } from './coverage.ts';
import { KindInformers } from './kind-informers.ts';
import { KindResolver, type KindResource, type Resolution } from './kind-resources.ts';
import { LEDGER_LABELS } from './ledger.ts';
import type { ReportWriter } from './report-writer.ts';
import { ruleDisplay } from './status-writer.ts';
import { objectKey, parseObjectKey, WorkQueue } from './work-queue.ts';
import { WorkerPool, type HandlerResult } from './worker-pool.ts';

export interface AuditEvaluatorConfig {
  /** Where the ledger ConfigMaps live. */
  installNamespace: string;
  /** Never evaluated (the install namespace is added). */
  exemptNamespaces: readonly string[];
  /** `--audit-interval`. */
  auditIntervalMs: number;
  /** `--audit-workers`. */
  workers: number;
  /** How often the rule set's revision is compared (rules have no change event yet). @default 100 */
  rulePollMs?: number;
  /** Informer silence bound (tests shorten it). */
  staleAfterMs?: number;
}

/**
 * A source of audit verdicts besides the RuleSet (the seam for other policy
 * kinds). `revision` changes when its policies change; `matchedKinds` adds
 * informers; `evaluate` must be pure and fast (it runs in the worker pool).
 */
export interface AuditPolicySource {
  readonly name: string;
  readonly revision: number;
  matchedKinds(): Iterable<{ group: string; kind: string }>;
  /** In the evaluation pool on a replica (adr/0013). */
  evaluate(request: EvaluationInput): RuleVerdict[] | Promise<RuleVerdict[]>;
  /** Audit actions of one of its policies (by verdict `rule`), for the actuator. */
  actionsFor?(rule: string): readonly RuleAction[] | undefined;
}

export interface AuditEvaluatorDeps {
  client: KubeClient;
  ruleSet: RuleSet;
  /**
   * Every rule's verdict for one object: the replica's audit evaluation pool
   * (worker threads with a deadline, adr/0013). @default evaluate(ruleSet, input) on this thread
   */
  evaluate?: ((input: EvaluationInput) => RuleVerdict[] | Promise<RuleVerdict[]>) | undefined;
  /** Further policy kinds evaluated next to the RuleSet (see AuditPolicySource). */
  policies?: readonly AuditPolicySource[];
  namespaceLabels: (namespace: string) => Record<string, string> | undefined;
  /** Subscribes to namespace changes (labels drive namespaceSelector); returns unsubscribe. */
  onNamespaceChange?: (handler: (namespace: string) => void) => () => void;
  /** Stored reports: watched here; written only by the actuator (through the FencedWriter). */
  reports: ReportWriter;
  /** An object started or stopped being exempted by a PortalException (every replica; Events are written by the leader). */
  onExemption?: (t: ExemptionTransition) => void;
  /** Sees each `error` verdict of a Portal rule (metric, Events); must not throw. */
  onRuleError?: (verdict: RuleVerdict, object: { kind: string; namespace: string; name: string }) => void;
  /** The webhook configuration Portal is served through, for the rules' coverage ('unchecked' when none is named). */
  webhookConfiguration?: () => WebhookConfigurationView | 'unchecked';
  logger: Logger;
  registry: Registry;
}

/** What evaluation knows about one object: the input of the side-effecting step. */
export interface ObjectState {
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
  /**
   * What a report says about it changed with the last evaluation (verdicts,
   * uid, or it went away): the leader marks its report dirty. Unchanged
   * objects (most of a full pass) cost their report nothing.
   */
  reportChanged: boolean;
  /** The uid of the object this one replaced under the same name (its resource report goes). */
  replacedUid?: string | undefined;
  /** PortalExceptions (`namespace/name`) exempting it now, with the rules each exempts it from. */
  exempted?: ReadonlyMap<string, readonly string[]>;
}

/**
 * The side-effecting step of the worker pool, attached by the actuator while
 * this replica leads. `act` runs after each evaluation; the hooks tell the
 * step what evaluation saw so it can keep rule status current.
 */
export interface AuditStep {
  act(key: string, state: ObjectState): Promise<HandlerResult>;
  /** After every handled key (acted on or not). */
  handled?(key: string): void;
  /** Rules (RuleState keys) whose violation count changed. */
  violationsChanged?(ruleKeys: string[]): void;
  /**
   * A full pass ended (every object enqueued by it was handled). `rules`: the
   * rules (RuleState keys) it evaluated — those in force when it started
   * whose kinds had all been listed.
   */
  passEnded?(at: Date, rules: ReadonlySet<string>): void;
  /** The coverage of these rules (RuleState keys) changed. */
  coverageChanged?(ruleKeys: string[]): void;
  /** The rule set changed. */
  rulesChanged?(): void;
  /** Exceptions (`namespace/name`) whose exempted count or expiry changed. */
  exceptionsChanged?(displays: string[]): void;
}

/** The exceptions in a verdict list, with the rules each exempts. */
function exemptionsOf(verdicts: readonly RuleVerdict[]): Map<string, string[]> | undefined {
  let out: Map<string, string[]> | undefined;
  for (const v of verdicts) {
    if (v.exception === undefined) continue;
    out ??= new Map();
    const rules = out.get(v.exception);
    const name = v.reportRule && v.reportRule !== v.rule ? `${v.rule}/${v.reportRule}` : v.rule;
    if (rules) rules.push(name);
    else out.set(v.exception, [name]);
  }
  return out;
}

/** The longest a timer can wait (setTimeout's 32-bit bound); a later expiry re-arms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const isViolation = (v: RuleVerdict): boolean => v.result === 'fail' || v.result === 'warn';

/** Same report content: the verdict fields a report carries, in the same order (evaluation order is deterministic). */
function sameVerdicts(a: readonly RuleVerdict[], b: readonly RuleVerdict[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (
      x.rule !== y.rule ||
      x.reportRule !== y.reportRule ||
      x.result !== y.result ||
      x.message !== y.message ||
      x.severity !== y.severity ||
      x.category !== y.category ||
      x.enforcement !== y.enforcement ||
      x.ruleKind !== y.ruleKind ||
      x.exception !== y.exception
    ) {
      return false;
    }
  }
  return true;
}

/**
 * One shared, frozen copy of each verdict that carries no violations (every
 * `pass`, most `skip`s): the audit keeps every object's verdicts, and the
 * evaluation pool hands back a fresh clone for each object, so at 50,000
 * Pods × 19 rules identical verdicts would hold ~140 MB (issue 20). Bounded:
 * the table starts over past {@link INTERNED_MAX} distinct verdicts.
 */
class VerdictInterner {
  readonly #table = new Map<string, RuleVerdict>();

  intern(v: RuleVerdict): RuleVerdict {
    if (v.violations.length > 0 || v.error !== undefined || v.result === 'fail' || v.result === 'warn') return v;
    // Every field but the two excluded above: a field added to RuleVerdict fails to typecheck here until it is keyed.
    const fields: Record<Exclude<keyof RuleVerdict, 'violations' | 'error'>, string | undefined> = {
      result: v.result,
      rule: v.rule,
      reportRule: v.reportRule,
      ruleKind: v.ruleKind,
      enforcement: v.enforcement,
      failurePolicy: v.failurePolicy,
      severity: v.severity,
      category: v.category,
      message: v.message,
      // A skip names the PortalException that exempted the object: skips by different exceptions are different verdicts.
      exception: v.exception,
    };
    const key = JSON.stringify(Object.values(fields));
    const known = this.#table.get(key);
    if (known) return known;
    if (this.#table.size >= INTERNED_MAX) this.#table.clear();
    const frozen = Object.freeze({ ...v, violations: NO_VIOLATIONS });
    this.#table.set(key, frozen);
    return frozen;
  }
}

/** Distinct pass/skip verdicts kept: rules × kinds × (for skips) namespaces, with room. */
const INTERNED_MAX = 50_000;
const NO_VIOLATIONS = Object.freeze([]) as unknown as RuleVerdict['violations'];

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
  readonly #resolver: KindResolver;
  readonly #ledger: ResilientInformer<KubeObject>;
  readonly #exempt: ReadonlySet<string>;
  readonly #objects = new Map<string, ObjectState>();
  readonly #verdicts = new VerdictInterner();
  /** Namespace ("" = cluster-scoped) → keys of the objects held in it (namespace reports read it). */
  readonly #byNamespace = new Map<string, Set<string>>();
  /** Rule display key → keys of objects violating it. */
  readonly #violators = new Map<string, Set<string>>();
  /** Exception `namespace/name` → keys of objects it exempts now. */
  readonly #exempting = new Map<string, Set<string>>();
  #expiryTimer: NodeJS.Timeout | undefined;
  readonly #passPending = new Set<string>();
  readonly #gauges: { objects: Gauge; violating: Gauge<'rule'>; passSeconds: Gauge };
  #signal: AbortSignal | undefined;
  #revision = '';
  #passStartedAt = 0;
  #lastPassTime: Date | undefined;
  /** Rules the running pass evaluates (see AuditStep.passEnded). */
  #passRules: ReadonlySet<string> = new Set();
  /** Per rule (RuleState key): the end of the last pass that evaluated it, on this replica. */
  readonly #ruleLastPass = new Map<string, Date>();
  /** Reports and ledger have listed once: passes may start (the actuator compares against them). */
  #passReady = false;
  /** Something changed during a pass (rules, a kind listed): another pass follows it. */
  #passAgain = false;
  readonly #resolutions = new Map<string, Resolution>();
  #coverage = new Map<string, Coverage>();
  #coverageSignature = '';
  #passes = 0;
  #completePasses = 0;
  /** The running pass began with every audited kind listed or forbidden (see {@link completePasses}). */
  #passComplete = false;
  #unresolved: string[] = [];
  #step: AuditStep | undefined;
  /** `act` calls in flight: detaching waits for them. */
  readonly #acting = new Set<Promise<unknown>>();

  constructor(config: AuditEvaluatorConfig, deps: AuditEvaluatorDeps) {
    this.#config = Object.freeze({ ...config });
    this.#deps = deps;
    this.#log = deps.logger.child({ [LogKey.subcomponent]: 'audit' });
    const { client } = deps;
    this.#exempt = new Set([...config.exemptNamespaces, config.installNamespace]);
    this.#queue = new WorkQueue({ name: 'audit', maxSize: AUDIT_QUEUE_MAX, logger: this.#log, registry: deps.registry });
    const staleOpt = config.staleAfterMs !== undefined ? { staleAfterMs: config.staleAfterMs } : {};
    // A kind that lists for the first time (start-up, or RBAC granted later) is audited by a pass of its own.
    this.#informers = new KindInformers(client, this.#log, (r, e) => this.#onObjectEvent(r, e), { ...staleOpt, onSynced: () => this.#requestPass() });
    this.#resolver = new KindResolver(client);
    this.reports = deps.reports;
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
    const pool = new WorkerPool(this.#queue, (w) => this.#handle(w.key), { concurrency: this.#config.workers, logger: this.#log });
    const background = [this.reports.start(signal), this.#ledger.start(signal), pool.start(signal)];
    const unsubscribe = this.#deps.onNamespaceChange?.((ns) => this.#enqueueNamespace(ns));
    const interval = setInterval(() => this.fullPass(), this.#config.auditIntervalMs);
    const poll = setInterval(() => void this.#tick(), this.#config.rulePollMs ?? 100);
    this.#armExpiry();
    try {
      await this.#tick();
      // Kind informers are not awaited: one that RBAC forbids would never sync. Each kind's
      // first list requests a pass of its own (onSynced), so every kind is audited once it can be.
      await Promise.race([Promise.all([this.reports.reports.waitForSync(signal), this.#ledger.waitForSync(signal)]), aborted(signal)]).catch(() => {});
      this.#passReady = true;
      if (!signal.aborted) this.fullPass();
      await aborted(signal);
    } finally {
      clearInterval(interval);
      clearInterval(poll);
      clearTimeout(this.#expiryTimer);
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
    return [...this.#objects];
  }

  get objectCount(): number {
    return this.#objects.size;
  }

  /** What evaluation holds about one object. */
  objectState(key: string): ObjectState | undefined {
    return this.#objects.get(key);
  }

  /** The objects held in `namespace` ("" = cluster-scoped ones). */
  *objectsIn(namespace: string): Iterable<ObjectState> {
    for (const key of this.#byNamespace.get(namespace) ?? []) {
      const st = this.#objects.get(key);
      if (st) yield st;
    }
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
    if (this.#statesRevision !== this.#deps.ruleSet.revision) {
      this.#statesByDisplay = new Map(this.#deps.ruleSet.states().map((s) => [ruleDisplay(s), s]));
      this.#statesRevision = this.#deps.ruleSet.revision;
    }
    return this.#statesByDisplay;
  }

  /**
   * The rules an object violates or once violated (whose alert may need
   * resolving), with their audit actions: a Portal rule's, else those a
   * policy source gives (a VAP's `policies.portal.dev/audit-actions`).
   */
  rulesOf(st: ObjectState): Array<{ display: string; state: RuleState | undefined; actions: readonly RuleAction[] }> {
    const byDisplay = this.ruleStates();
    const names = new Set([...st.seen, ...st.verdicts.map((v) => v.rule)]);
    return [...names].map((display) => {
      const state = byDisplay.get(display);
      const actions = state?.actions ?? this.#policyActions(display);
      return { display, state, actions };
    });
  }

  #policyActions(display: string): readonly RuleAction[] {
    for (const p of this.#deps.policies ?? []) {
      const a = p.actionsFor?.(display);
      if (a) return a;
    }
    return [];
  }

  /** Forgets resolved rules (no alert left to resolve) and, once clean, deleted objects. */
  prune(key: string, st: ObjectState): void {
    for (const display of [...st.seen]) {
      if (st.violating.has(display)) continue;
      const k = actionKey({ rule: display, gvk: st.gvk, namespace: st.object.metadata?.namespace ?? '', name: st.object.metadata?.name ?? '', actionType: 'alert' });
      if (!this.store.has(k)) st.seen.delete(display);
    }
    if (st.deleted && st.seen.size === 0 && this.#objects.get(key) === st) this.#forget(key);
  }

  #hold(key: string, st: ObjectState): void {
    if (!this.#objects.has(key)) {
      const ns = parseObjectKey(key).namespace;
      let set = this.#byNamespace.get(ns);
      if (!set) this.#byNamespace.set(ns, (set = new Set()));
      set.add(key);
    }
    this.#objects.set(key, st);
  }

  #forget(key: string): void {
    if (!this.#objects.delete(key)) return;
    const ns = parseObjectKey(key).namespace;
    const set = this.#byNamespace.get(ns);
    set?.delete(key);
    if (set?.size === 0) this.#byNamespace.delete(ns);
  }

  /** Reports and ledger have listed once (the actuator compares against them). */
  observedSynced(): boolean {
    return this.reports.synced() && this.#ledger.hasSynced();
  }

  get lastPassTime(): Date | undefined {
    return this.#lastPassTime;
  }

  /** The end of the last pass on this replica that evaluated the rule (RuleState key). */
  ruleLastPass(key: string): Date | undefined {
    return this.#ruleLastPass.get(key);
  }

  /** The rule's coverage (RuleState key), once computed. */
  coverage(key: string): Coverage | undefined {
    return this.#coverage.get(key);
  }

  // ---- rules and passes ------------------------------------------------------

  #statesRevision = -1;
  #statesByDisplay = new Map<string, RuleState>();

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
        await this.#syncKinds(signal);
        this.#step?.rulesChanged?.();
        this.#armExpiry();
        this.#requestPass();
      }
      this.#updateCoverage();
      this.#gauges.objects.set(this.#objects.size);
    } catch (err) {
      this.#log.warn({ [LogKey.error]: toError(err) }, 'audit tick failed, retrying');
      this.#revision = '';
    } finally {
      this.#ticking = false;
    }
  }

  async #syncKinds(signal: AbortSignal): Promise<void> {
    const wanted: KindResource[] = [];
    const unresolved: string[] = [];
    const kinds = new Map<string, { group: string; kind: string }>();
    for (const k of [this.#deps.ruleSet.matchedKinds(), ...(this.#deps.policies ?? []).map((p) => p.matchedKinds())].flatMap((i) => [...i])) kinds.set(`${k.group}/${k.kind}`, k);
    for (const { group, kind } of kinds.values()) {
      const r = await this.#resolver.resolve(group, kind, signal);
      this.#resolutions.set(KindInformers.key(group, kind), r);
      if (r.ok) wanted.push(r.resource);
      else unresolved.push(r.reason);
    }
    if (unresolved.join() !== this.#unresolved.join()) {
      for (const reason of unresolved) this.#log.warn({ [LogKey.reason]: reason }, 'a matched kind is not audited');
      this.#unresolved = unresolved;
    }
    if (unresolved.length > 0) this.#resolver.forget();
    const { started, stopped } = this.#informers.sync(wanted, signal);
    if (started.length || stopped.length) this.#log.info({ [LogKey.started]: started.map((r) => r.kind), [LogKey.stopped]: stopped.map((r) => r.kind) }, 'audited kinds changed');
    for (const r of stopped) {
      // Objects of a kind no rule matches any more: their reports go (nothing applies).
      for (const [key, st] of this.#objects) if (st.gvk.group === r.group && st.gvk.kind === r.kind) this.enqueue(key);
    }
  }

  /**
   * An exemption ends at its exception's expiresAt, on every replica, by a
   * timer rather than at the next pass: the objects it exempts are enqueued
   * then (the evaluation judges them at that time, so without it), and the
   * step learns it (the exception's status: Expired). Re-armed on every
   * rule-set change and after each expiry.
   */
  #armExpiry(): void {
    clearTimeout(this.#expiryTimer);
    this.#expiryTimer = undefined;
    if (this.#signal?.aborted) return;
    const now = Date.now();
    const next = this.#deps.ruleSet.nextExpiry(now);
    if (next === undefined) return;
    // +1: at `expiresAt` itself the exemption has ended (now >= expiresAt).
    this.#expiryTimer = setTimeout(() => this.#expired(), Math.min(next - now + 1, MAX_TIMER_MS));
    this.#expiryTimer.unref?.();
  }

  #expired(): void {
    const now = Date.now();
    const changed: string[] = [];
    for (const s of this.#deps.ruleSet.exceptionStates()) {
      if (s.expiresAt === undefined || s.expiresAt > now) continue;
      changed.push(s.display);
      for (const key of this.#exempting.get(s.display) ?? []) this.enqueue(key);
    }
    if (changed.length > 0) {
      this.#log.info({ [LogKey.exceptions]: changed }, 'exceptions expired: their objects are evaluated again');
      this.#step?.exceptionsChanged?.(changed);
    }
    this.#armExpiry();
  }

  /** Objects the exception (`namespace/name`) exempts right now, as computed on this replica. */
  exempted(display: string): number {
    return this.#exempting.get(display)?.size ?? 0;
  }

  /** Enqueues every object of every audited kind (a full pass). Returns how many. */
  fullPass(): number {
    if (this.#passPending.size > 0) return 0; // the previous pass is still running
    this.#passAgain = false;
    this.#passStartedAt = performance.now();
    this.#passComplete = this.#informers.all().every(({ resource }) => this.#informers.access(resource.group, resource.kind).state !== 'pending');
    this.#passRules = this.#evaluableRules();
    const n = this.#enqueueAll(true);
    if (n === 0) this.#finishPass();
    return n;
  }

  /**
   * A pass now, or right after the running one (rules changed, a kind listed
   * for the first time): what changed is evaluated at once either way (the
   * objects are enqueued), and a rule's lastAuditTime comes from a pass that
   * started after it was in force.
   */
  #requestPass(): void {
    if (this.#signal?.aborted) return;
    if (!this.#passReady || this.#passPending.size > 0) {
      this.#passAgain = true;
      this.#enqueueAll(false);
    } else this.fullPass();
  }

  /** Rules (RuleState keys) whose named kinds have all been listed: what a pass starting now evaluates. */
  #evaluableRules(): Set<string> {
    const out = new Set<string>();
    for (const state of this.#deps.ruleSet.states()) {
      const m = this.#deps.ruleSet.matchOf(state.key);
      if (!m) continue;
      let listed = true;
      let any = false;
      for (const k of m.match.kinds) {
        for (const group of k.apiGroups) {
          for (const kind of k.kinds) {
            if (group === '*' || kind === '*') continue;
            any = true;
            if (this.#informers.access(group, kind).state !== 'listed') listed = false;
          }
        }
      }
      if (any && listed) out.add(state.key);
    }
    return out;
  }

  #enqueueAll(pass: boolean): number {
    let n = 0;
    for (const { resource, informer } of this.#informers.all()) {
      for (const o of informer.list()) {
        const key = objectKey(resource.group, resource.kind, o.metadata?.namespace ?? '', o.metadata?.name ?? '');
        if (pass) this.#passPending.add(key);
        this.enqueue(key);
        n++;
      }
    }
    // Objects known but gone from every informer (kind dropped): evaluate to clean up.
    for (const key of this.#objects.keys()) this.enqueue(key);
    return n;
  }

  #finishPass(): void {
    this.#passes++;
    if (this.#passComplete) this.#completePasses++;
    const at = new Date();
    this.#lastPassTime = at;
    const rules = this.#passRules;
    for (const key of rules) this.#ruleLastPass.set(key, at);
    // Rules removed since: forget them.
    for (const key of this.#ruleLastPass.keys()) if (!this.#deps.ruleSet.state(key)) this.#ruleLastPass.delete(key);
    this.#gauges.passSeconds.set((performance.now() - this.#passStartedAt) / 1000);
    this.#step?.passEnded?.(at, rules);
    this.#log.info({ [LogKey.objects]: this.#objects.size, [LogKey.rules]: rules.size, [LogKey.seconds]: (performance.now() - this.#passStartedAt) / 1000 }, 'full audit pass done');
    if (this.#passAgain && this.#passReady) setImmediate(() => this.fullPass());
  }

  /** Recomputes every rule's coverage when one of its inputs moved (rules, kinds listed or forbidden, the webhook configuration). */
  #updateCoverage(): void {
    const webhook = this.#deps.webhookConfiguration?.() ?? 'unchecked';
    const access = this.#informers.all().map(({ resource }) => `${resource.group}/${resource.kind}=${this.#informers.access(resource.group, resource.kind).state}`);
    const signature = [this.#deps.ruleSet.revision, webhook === 'unchecked' ? 'unchecked' : webhook === undefined ? 'pending' : `${webhook.config ? 'present' : 'absent'}:${webhook.resourceVersion}`, ...access].join('|');
    if (signature === this.#coverageSignature) return;
    this.#coverageSignature = signature;
    const inputs: CoverageInputs = {
      resolve: (group, kind) => this.#resolutions.get(KindInformers.key(group, kind)),
      access: (group, kind) => this.#informers.access(group, kind),
      webhook,
    };
    const next = new Map<string, Coverage>();
    const changed: string[] = [];
    for (const state of this.#deps.ruleSet.states()) {
      const m = this.#deps.ruleSet.matchOf(state.key);
      if (!m) continue;
      const c = ruleCoverage({ enforcement: m.enforcement, kinds: m.match.kinds, operations: m.match.operations }, inputs);
      next.set(state.key, c);
      const before = this.#coverage.get(state.key);
      if (!before || before.reason !== c.reason || before.message !== c.message) changed.push(state.key);
    }
    this.#coverage = next;
    if (changed.length > 0) this.#step?.coverageChanged?.(changed);
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

  // ---- the work ------------------------------------------------------------

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
      if (this.#passPending.delete(key) && this.#passPending.size === 0) this.#finishPass();
      this.#step?.handled?.(key);
    }
  }

  /** Recomputes the desired state of one object (the queue hands a key to one worker at a time). */
  async #evaluate(key: string): Promise<void> {
    const { group, kind, namespace, name } = parseObjectKey(key);
    const resource = this.#informers.resource(group, kind);
    const object = resource ? this.#informers.informer(group, kind)?.get(name, namespace || undefined) : undefined;
    let verdicts: RuleVerdict[] = [];
    const exempt = this.#exempt.has(namespace) || (group === '' && kind === 'Namespace' && this.#exempt.has(name));
    if (object && resource && !exempt) {
      const request: EvaluationInput = {
        operation: 'AUDIT',
        kind: { group, version: resource.version, kind },
        namespace,
        name,
        object,
        oldObject: null,
        namespaceLabels: group === '' && kind === 'Namespace' ? (object.metadata?.labels ?? {}) : namespace ? this.#deps.namespaceLabels(namespace) : undefined,
        // One instant for every verdict of this object (expiry).
        now: Date.now(),
      };
      verdicts = [...(await (this.#deps.evaluate ?? ((i: EvaluationInput) => evaluate(this.#deps.ruleSet, i)))(request))];
      const onError = this.#deps.onRuleError;
      if (onError) for (const v of verdicts) if (v.result === 'error') onError(v, { kind, namespace, name });
      // Other policy kinds (VAPs) go through the same exceptions as the rules.
      for (const p of this.#deps.policies ?? []) verdicts.push(...exemptVerdicts(this.#deps.ruleSet, request, await p.evaluate(request)));
      verdicts = verdicts.map((v) => this.#verdicts.intern(v));
    }
    const prev = this.#objects.get(key);
    const exempted = exemptionsOf(verdicts);
    this.#trackExemptions(key, prev, exempted, object && resource ? object : undefined, resource?.version ?? prev?.gvk.version ?? '');
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
    if (changed.size > 0 && this.#step?.violationsChanged) {
      const states = this.ruleStates();
      this.#step.violationsChanged([...changed].map((r) => states.get(r)?.key).filter((k): k is string => k !== undefined));
    }
    const seen = new Set([...(prev?.seen ?? []), ...violating]);
    if (object && resource) {
      const uid = object.metadata?.uid;
      const reportChanged = !prev || prev.deleted || prev.uid !== uid || !sameVerdicts(prev.verdicts, verdicts);
      const replacedUid = prev?.uid !== undefined && prev.uid !== uid ? prev.uid : undefined;
      this.#hold(key, { gvk: { group, version: resource.version, kind }, object, uid, verdicts, violating, seen, deleted: false, reportChanged, replacedUid, ...(exempted ? { exempted } : {}) });
    } else if (prev) {
      // Gone: keep it until its leader-only clean-up (alert resolution) is done.
      const { exempted: _gone, ...rest } = prev;
      this.#hold(key, { ...rest, verdicts: [], violating: new Set(), seen, deleted: true, reportChanged: !prev.deleted });
    }
  }

  /**
   * Keeps exception → exempted objects current, tells the step whose count
   * changed, and reports each start and end of an exemption (not the end
   * that comes from the object's deletion).
   */
  #trackExemptions(key: string, prev: ObjectState | undefined, now: ReadonlyMap<string, readonly string[]> | undefined, object: KubeObject | undefined, version: string): void {
    const before = prev?.exempted;
    if (!before && !now) return;
    const changed: string[] = [];
    const ruleSet = this.#deps.ruleSet;
    const target = object ?? prev?.object;
    const { group, kind, namespace, name } = parseObjectKey(key);
    const transition = (display: string, rules: readonly string[], started: boolean, why?: string): void => {
      if (!this.#deps.onExemption || !target) return;
      const st = ruleSet.exceptionState(`PortalException/${display}`);
      const slash = display.indexOf('/');
      this.#deps.onExemption({
        exception: { namespace: display.slice(0, slash), name: display.slice(slash + 1), uid: st?.uid, generation: st?.generation ?? 0 },
        object: { gvk: { group, version, kind }, namespace, name, uid: target.metadata?.uid },
        rules,
        started,
        ...(why ? { why } : {}),
      });
    };
    for (const [display, rules] of now ?? []) {
      if (before?.has(display)) continue;
      let set = this.#exempting.get(display);
      if (!set) this.#exempting.set(display, (set = new Set()));
      set.add(key);
      changed.push(display);
      transition(display, rules, true);
    }
    for (const [display, rules] of before ?? []) {
      if (now?.has(display)) continue;
      const set = this.#exempting.get(display);
      set?.delete(key);
      if (set?.size === 0) this.#exempting.delete(display);
      changed.push(display);
      if (object) transition(display, rules, false, this.#endReason(display));
    }
    if (changed.length > 0) this.#step?.exceptionsChanged?.(changed);
  }

  #endReason(display: string): string {
    const st = this.#deps.ruleSet.exceptionState(`PortalException/${display}`);
    if (!st) return 'the exception was deleted';
    if (!st.valid) return 'the exception is invalid';
    if (st.expiresAt !== undefined && st.expiresAt <= Date.now()) return `the exception expired at ${new Date(st.expiresAt).toISOString()}`;
    return 'the exception or the object changed and it no longer applies';
  }

  // ---- introspection -------------------------------------------------------

  /** Objects violating `rule` (display key) right now, as computed on this replica. */
  violations(rule: string): number {
    return this.#violators.get(rule)?.size ?? 0;
  }

  get passes(): number {
    return this.#passes;
  }

  /**
   * Full passes that began with every audited kind listed (or forbidden).
   * The first pass can start before a kind's first list (kind informers are
   * not awaited) and so evaluate nothing of it; a namespace report, which
   * sums up every object, waits for a complete pass.
   */
  get completePasses(): number {
    return this.#completePasses;
  }

  /** Every informer (kinds, reports, ledger) has listed once. */
  synced(): boolean {
    return this.#informers.synced() && this.observedSynced();
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
      completePasses: this.#completePasses,
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
