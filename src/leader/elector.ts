/**
 * LeaderElector: a port of client-go's tools/leaderelection on a
 * coordination.k8s.io/v1 Lease, plus fencing (see term.ts).
 *
 * Differences from client-go, on purpose:
 * - Followers also WATCH the Lease: a change refreshes observedTime at once and
 *   a released (holder "") or deleted Lease wakes the acquire loop, so a
 *   graceful handover takes one round trip instead of up to 2.2 × retryPeriod.
 * - Every term is a distinct epoch: re-acquiring a Lease that still names this
 *   identity after a demotion counts as a transition (client-go keeps the
 *   count), so a write from the earlier term is never mistaken for the new one.
 * - A leader demotes as soon as a renewal finds another holder, instead of
 *   retrying until the renew deadline.
 * - Leadership is lost, never fatal: `run()` campaigns again until its signal
 *   aborts.
 * All timing decisions use performance.now(); Lease timestamps are only
 * written (MicroTime, six digits), never compared with the local clock.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { Backoff, sleep } from '../util/backoff.ts';
import { apiStatusCode, describeApiError, type KubeClient } from '../kube/client.ts';
import { ResilientInformer } from '../kube/informer.ts';
import type { KubeObject } from '../types/kubernetes.ts';
import { JITTER_FACTOR, safetyMarginMs, validateLeaderElectionConfig, type LeaderElectionConfig } from './config.ts';
import { EventBus } from '../observability/event-bus.ts';
import type { LeaderEventBus, LeaderEventMap } from './events.ts';
import { ElectionState, SYSTEM_CLOCK, type ElectionClock } from './election-state.ts';
import { LeaseLock, observeLease, type ObservedLease } from './lease-lock.ts';
import { createLeaderMetrics, type LeaderMetrics } from './metrics.ts';
import { LeaseEventRecorder, subscribeRecorder, type LeaderEventRecorder } from './recorder.ts';
import { Term } from './term.ts';
import type { LeaderTerm } from '../util/leader-term.ts';
import { LogKey } from '../observability/log-keys.ts';
import { toError } from '../observability/errors.ts';

export interface LeaderElectorDeps {
  client: KubeClient;
  /** `<POD_NAME or hostname>_<random>` (see makeIdentity). */
  identity: string;
  logger: Logger;
  registry: Registry;
  /** The channel the elector reports on (default: its own); see `events`. */
  bus?: LeaderEventBus;
  /** Kubernetes Events on the Lease (subscribed to the channel); default: a LeaseEventRecorder; false: none. */
  recorder?: LeaderEventRecorder | false;
  /** Monotonic and wall clocks for the state machine (tests inject fakes). @default performance.now / Date */
  clock?: ElectionClock;
}

export interface LeaderDebugVars {
  enabled: boolean;
  is_leader: boolean;
  identity: string;
  lease_name: string;
  lease_namespace: string;
  lease_holder: string;
  epoch: string | null;
  time_as_leader: number;
  /** Times this replica became leader (= portal_leader_transitions_total). */
  transitions: number;
  /** The Lease's spec.leaseTransitions: leader changes in the whole cluster, as last observed. */
  lease_transitions: number;
}

type TryResult = { ok: true } | { ok: false; reason: string; heldBy?: string };

export class LeaderElector {
  readonly identity: string;
  readonly config: Readonly<LeaderElectionConfig>;
  /** The one channel every leadership fact goes out on (events.ts). */
  readonly events: LeaderEventBus;
  readonly #deps: LeaderElectorDeps;
  readonly #logger: Logger;
  readonly #lock: LeaseLock;
  readonly #metrics: LeaderMetrics;
  readonly #recorder: LeaderEventRecorder | undefined;
  /** Observations in, decisions out (election-state.ts); this class is the I/O loop around it. */
  readonly #state: ElectionState;
  readonly #clock: ElectionClock;
  #term: Term | undefined;
  #heldMs = 0;
  /** Times this replica became leader: portal_leader_transitions_total and /debug/vars read it. */
  #transitions = 0;
  #reportedLeader: string | undefined;
  #wake = new AbortController();
  #running = false;
  /** Counters for tests and debugging. */
  readonly counters = { fastPathFallbacks: 0, releaseConflicts: 0, releases: 0 };

  constructor(config: Readonly<LeaderElectionConfig>, deps: LeaderElectorDeps) {
    validateLeaderElectionConfig(config, deps.identity);
    this.config = config;
    this.identity = deps.identity;
    this.#deps = deps;
    this.#logger = deps.logger.child({ [LogKey.subcomponent]: 'leader-election', [LogKey.identity]: deps.identity, [LogKey.lease]: `${config.leaseNamespace}/${config.leaseName}` });
    this.#lock = new LeaseLock(deps.client, config.leaseNamespace, config.leaseName);
    this.#clock = deps.clock ?? SYSTEM_CLOCK;
    this.#state = new ElectionState({ identity: deps.identity, leaseDurationMs: config.leaseDurationMs, healthTimeoutMs: config.healthTimeoutMs, retryPeriodMs: config.retryPeriodMs, renewDeadlineMs: config.renewDeadlineMs }, this.#clock);
    this.events = deps.bus ?? new EventBus<LeaderEventMap>((event, err) => this.#logger.error({ [LogKey.error]: toError(err), [LogKey.event]: event }, 'leader event listener failed'));
    this.#metrics = createLeaderMetrics(deps.registry, { isLeader: () => this.isLeader(), heldSeconds: () => this.#heldSecondsNow(), transitions: () => this.#transitions });
    this.events.on('BecameLeader', () => this.#transitions++);
    this.#recorder =
      deps.recorder === false
        ? undefined
        : (deps.recorder ?? new LeaseEventRecorder(deps.client, { namespace: config.leaseNamespace, name: config.leaseName }, deps.identity, this.#logger));
    // Leading alone has no Lease to put Events on.
    if (this.#recorder && config.leaderElect) subscribeRecorder(this.events, this.#recorder);
  }

  /** True only while this replica holds a term that is still valid. */
  isLeader(): boolean {
    return this.#term?.isValid() ?? false;
  }

  /** The current term (possibly already invalid), if leading. */
  term(): LeaderTerm | undefined {
    return this.#term && !this.#term.ended ? this.#term : undefined;
  }

  /** The holder last observed on the Lease ("" when released or unknown). */
  leaderIdentity(): string {
    if (!this.config.leaderElect) return this.identity;
    return this.#state.holder();
  }

  /**
   * client-go's HealthzAdaptor: a leader whose last successful renewal is
   * older than leaseDuration + healthTimeout is wedged; followers are healthy.
   * Returns the problem, or undefined when healthy.
   */
  healthError(): string | undefined {
    const problem = this.#state.healthError(this.config.leaderElect && this.#term !== undefined && !this.#term.ended);
    return problem === undefined ? undefined : `leader failed to renew lease ${this.config.leaseNamespace}/${this.config.leaseName} (${problem})`;
  }

  healthy(): boolean {
    return this.healthError() === undefined;
  }

  debugVars(): LeaderDebugVars {
    const term = this.#term && !this.#term.ended ? this.#term : undefined;
    const valid = this.isLeader();
    return {
      enabled: this.config.leaderElect,
      is_leader: valid,
      identity: this.identity,
      lease_name: this.config.leaseName,
      lease_namespace: this.config.leaseNamespace,
      lease_holder: this.leaderIdentity(),
      epoch: term?.epochString ?? null,
      time_as_leader: valid && term ? (performance.now() - term.startedAt) / 1000 : 0,
      transitions: this.#transitions,
      lease_transitions: this.#state.observed?.record.leaseTransitions ?? 0,
    };
  }

  /**
   * Campaigns, leads, demotes and campaigns again until `signal` aborts; then
   * ends the term, releases the Lease (if configured) and resolves.
   */
  async run(signal: AbortSignal): Promise<void> {
    if (this.#running) throw new Error('LeaderElector.run called twice');
    this.#running = true;
    this.events.emit('LeaderElectionStarted', { identity: this.identity, lease: `${this.config.leaseNamespace}/${this.config.leaseName}` });
    if (!this.config.leaderElect) return this.#runAlone(signal);
    this.#logger.info('leader election started');
    const watchStop = new AbortController();
    const watch = this.#watchLease(watchStop.signal);
    try {
      while (!signal.aborted) {
        const acquired = await this.#acquire(signal);
        if (!acquired) break;
        const term = this.#beginTerm();
        const reason = await this.#renewLoop(signal, term);
        this.#endTerm(term, reason);
        if (signal.aborted && this.config.releaseOnCancel) await this.#release();
      }
    } finally {
      watchStop.abort();
      await watch;
      await this.#recorder?.flush(2000);
      this.#running = false;
    }
  }

  async #runAlone(signal: AbortSignal): Promise<void> {
    this.#logger.info('leader election disabled: leading alone');
    const term = new Term({ leaseUid: 'local', transitions: 0 }, performance.now(), Number.POSITIVE_INFINITY);
    this.#term = term;
    this.#reportLeader();
    this.events.emit('BecameLeader', { identity: this.identity, epoch: term.epochString, leaseUid: term.epoch.leaseUid, term });
    await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
    this.#endTerm(term, 'shutdown');
    this.#running = false;
  }

  #heldSecondsNow(): number {
    const current = this.#term && !this.#term.ended ? performance.now() - this.#term.startedAt : 0;
    return (this.#heldMs + current) / 1000;
  }

  #beginTerm(): Term {
    const observed = this.#state.observed!;
    const validity = this.config.leaseDurationMs - safetyMarginMs(this.config);
    const term = new Term({ leaseUid: observed.metadata.uid, transitions: observed.record.leaseTransitions }, this.#state.lastRenewSentAt, validity, (t) =>
      // Backstop: the renew loop normally ends the term first (renewDeadline < leaseDuration).
      this.#endTerm(t, 'term validity ran out without a renewal'),
    );
    this.#term = term;
    this.#logger.info({ [LogKey.epoch]: term.epochString }, 'became leader');
    this.events.emit('BecameLeader', { identity: this.identity, epoch: term.epochString, leaseUid: observed.metadata.uid, term });
    return term;
  }

  #endTerm(term: Term, reason: string): void {
    if (term.ended) return;
    term.end(reason);
    this.#heldMs += performance.now() - term.startedAt;
    const log = reason === 'shutdown' ? this.#logger.info.bind(this.#logger) : this.#logger.warn.bind(this.#logger);
    log({ epoch: term.epochString, reason }, 'stopped leading');
    this.events.emit('LostLeadership', { identity: this.identity, epoch: term.epochString, leaseUid: term.epoch.leaseUid, reason });
  }

  /** Tries until it holds the Lease; false when `signal` aborted first. */
  async #acquire(signal: AbortSignal): Promise<boolean> {
    const startedAt = performance.now();
    this.#logger.debug('campaigning');
    while (!signal.aborted) {
      this.#wake = new AbortController();
      const result = await this.#tryAcquireOrRenew(this.#requestSignal(signal, this.config.renewDeadlineMs), false);
      this.#reportLeader();
      if (result.ok) {
        this.#metrics.acquireDuration.observe((performance.now() - startedAt) / 1000);
        return true;
      }
      if (signal.aborted) break;
      this.#logger.debug({ [LogKey.reason]: result.reason }, 'lease not acquired');
      // client-go: wait.JitterUntil(retryPeriod, JitterFactor 1.2); the Lease
      // watch cuts the wait short when the Lease is released or deleted.
      await sleep(this.config.retryPeriodMs * (1 + Math.random() * JITTER_FACTOR), signal, this.#wake.signal);
    }
    return false;
  }

  /** Renews every retryPeriod; returns why leadership ended. */
  async #renewLoop(signal: AbortSignal, term: Term): Promise<string> {
    for (;;) {
      await sleep(this.config.retryPeriodMs, signal, term.signal);
      if (signal.aborted) return 'shutdown';
      if (term.ended) return (term.signal.reason as Error).message;
      // The deadline and the retry/demote rules are the state machine's (election-state.ts).
      const deadline = this.#state.renewDeadline(term.validUntil());
      for (;;) {
        const result = await this.#tryAcquireOrRenew(this.#requestSignal(AbortSignal.any([signal, term.signal]), this.#state.remaining(deadline)), true);
        if (signal.aborted) return 'shutdown';
        if (term.ended) return (term.signal.reason as Error).message;
        if (result.ok) {
          term.renewed(this.#state.lastRenewSentAt);
          break;
        }
        const next = this.#state.renewFailed(result, deadline);
        if (next.type === 'demote') return next.reason;
        this.#logger.warn({ [LogKey.reason]: result.reason }, 'lease renewal failed, retrying');
        await sleep(next.afterMs, signal, term.signal);
        if (this.#state.pastDeadline(deadline) && !signal.aborted && !term.ended) return `failed to renew within renew deadline (${result.reason})`;
      }
    }
  }

  #requestSignal(parent: AbortSignal, timeoutMs: number): AbortSignal {
    return AbortSignal.any([parent, AbortSignal.timeout(Math.max(1, Math.floor(timeoutMs)))]);
  }

  /** client-go's tryAcquireOrRenew: I/O around the state machine's decisions. `renewing`: we lead and want to extend the same term. */
  async #tryAcquireOrRenew(signal: AbortSignal, renewing: boolean): Promise<TryResult> {
    const sentAt = this.#clock.now();
    const fast = renewing ? this.#state.fastRenew() : undefined;
    if (fast) {
      try {
        this.#state.succeeded(await this.#lock.update(fast.base, fast.record, signal), sentAt);
        return { ok: true };
      } catch (err) {
        if (signal.aborted) return { ok: false, reason: `renew aborted: ${describeApiError(err)}` };
        this.counters.fastPathFallbacks++;
        this.#logger.debug({ [LogKey.error]: toError(err) }, 'fast-path renew failed, falling back to the slow path');
      }
    }
    let current: ObservedLease | undefined;
    try {
      current = await this.#lock.get(signal);
      this.#state.observe(current);
    } catch (err) {
      if (apiStatusCode(err) !== 404) return { ok: false, reason: `get lease: ${describeApiError(err)}` };
    }
    const decision = this.#state.decide(current, renewing, sentAt);
    switch (decision.type) {
      case 'lost':
        return { ok: false, reason: decision.reason, heldBy: decision.heldBy };
      case 'wait':
        return { ok: false, reason: decision.reason, heldBy: decision.heldBy };
      case 'create':
        try {
          this.#state.succeeded(await this.#lock.create(decision.record, signal), sentAt);
          return { ok: true };
        } catch (err) {
          return { ok: false, reason: `create lease: ${describeApiError(err)}` };
        }
      case 'update':
        try {
          this.#state.succeeded(await this.#lock.update(decision.base, decision.record, signal), sentAt);
          return { ok: true };
        } catch (err) {
          return { ok: false, reason: `update lease: ${describeApiError(err)}` };
        }
    }
  }

  #reportLeader(): void {
    const holder = this.config.leaderElect ? this.#state.holder() : this.identity;
    if (holder === this.#reportedLeader) return;
    const previous = this.#reportedLeader ?? '';
    this.#reportedLeader = holder;
    this.#logger.info({ [LogKey.leader]: holder, [LogKey.previous]: previous }, 'new leader observed');
    this.events.emit('NewLeaderObserved', { new: holder, previous });
  }

  /** Followers watch the Lease: changes refresh observedTime, a release wakes the campaign. */
  async #watchLease(signal: AbortSignal): Promise<void> {
    const informer = new ResilientInformer<KubeObject>(
      this.#deps.client,
      {
        name: `lease/${this.config.leaseName}`,
        path: `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.config.leaseNamespace)}/leases`,
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        fieldSelector: `metadata.name=${this.config.leaseName}`,
        // A held Lease changes every retryPeriod; an unheld one may be silent.
        staleAfterMs: Math.max(60_000, 3 * this.config.leaseDurationMs),
        backoff: { initialMs: Math.min(1000, this.config.retryPeriodMs), maxMs: Math.max(5000, this.config.leaseDurationMs) },
      },
      this.#logger,
    );
    informer.onEvent((event) => {
      if (event.type === 'delete') {
        if (!this.#term || this.#term.ended) this.#wake.abort();
        return;
      }
      this.#state.observe(observeLease(event.object));
      this.#reportLeader();
      if (this.#state.observed?.record.holderIdentity === '' && (!this.#term || this.#term.ended)) this.#wake.abort();
    });
    try {
      await informer.start(signal);
    } catch (err) {
      this.#logger.error({ [LogKey.error]: toError(err) }, 'lease watch stopped');
    }
  }

  /** Graceful release: fresh Get, holder "", duration 1 s, retry on 409 (bounded by renewDeadline); the decisions are the state machine's. */
  async #release(): Promise<void> {
    const deadline = this.#state.releaseDeadline();
    const backoff = new Backoff({ initialMs: 10, maxMs: this.config.retryPeriodMs });
    while (!this.#state.pastDeadline(deadline)) {
      const signal = AbortSignal.timeout(Math.max(1, Math.floor(this.#state.remaining(deadline))));
      try {
        const current = await this.#lock.get(signal);
        this.#state.observe(current);
        const decision = this.#state.decideRelease(current);
        if (decision.type === 'not-ours') {
          this.#logger.info({ [LogKey.holder]: decision.holder }, 'lease no longer ours; nothing to release');
          return;
        }
        this.#state.observe(await this.#lock.update(decision.base, decision.record, signal));
        this.counters.releases++;
        this.#logger.info('lease released');
        return;
      } catch (err) {
        if (this.#state.releaseFailed(apiStatusCode(err)) === 'retry') {
          this.counters.releaseConflicts++;
          this.#logger.debug('release conflicted, retrying with a fresh read');
          await sleep(backoff.next());
          continue;
        }
        this.#logger.warn({ [LogKey.error]: toError(err) }, 'could not release lease; others take over after it expires');
        return;
      }
    }
    this.#logger.warn('could not release lease within renew deadline; others take over after it expires');
  }
}
