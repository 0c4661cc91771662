/**
 * The Manager owns the Runnables of one replica (controller-runtime's
 * manager): it starts probes/metrics → webhook → informers (waiting for their
 * sync) → others → the leader election, runs the leader-only group while this
 * replica leads (stopping it — abort, then await — when the term ends), and on
 * stop shuts everything down in reverse order within a bounded grace period.
 * The webhook group is never touched by leadership changes.
 */
import type { Logger } from 'pino';
import { DEFAULTS } from '../config/options.ts';
import { Backoff, sleep, type BackoffOptions } from '../util/backoff.ts';
import type { LeaderEventBus } from '../leader/events.ts';
import type { LeaderTerm } from '../util/leader-term.ts';
import { ErrorCode, PortalError, toError } from '../observability/errors.ts';
import { GROUPS, type Runnable, type RunnableGroup } from '../util/runnable.ts';
import { LogKey } from '../observability/log-keys.ts';

/**
 * What the manager needs from the elector (LeaderElector satisfies it): a
 * campaign that runs until its signal aborts, and the one channel it reports
 * on. The manager subscribes to BecameLeader / LostLeadership; it is the only
 * place where leadership turns into starting and stopping work.
 */
export interface Election {
  readonly events: LeaderEventBus;
  run(signal: AbortSignal): Promise<void>;
}

export interface ManagerConfig {
  /** Upper bound for a graceful shutdown (and for stopping the leader group). @default `--shutdown-grace-period`'s default (20 s) */
  gracefulShutdownMs: number;
  /** A failing runnable is restarted with backoff, or stops the whole manager. @default "restart" */
  onRunnableFailure: 'restart' | 'stop';
  /** @default { initialMs: 500, maxMs: 30000 } */
  restartBackoff?: BackoffOptions;
}

// One graceful-shutdown default for the whole program: the flag's (config/options.ts).
export const MANAGER_DEFAULTS: Readonly<ManagerConfig> = Object.freeze({ gracefulShutdownMs: DEFAULTS.shutdownGracePeriod, onRunnableFailure: 'restart' });

export interface ManagerDeps {
  logger: Logger;
  /** Without an election the leader-only group never runs. */
  election?: Election;
}

/** Resolves true when `work` settles within `ms` (and before `force` aborts), else false. Leaves no timer behind. */
async function within(work: Promise<unknown>, ms: number, force?: AbortSignal): Promise<boolean> {
  const stop = new AbortController();
  try {
    return await Promise.race([work.then(() => true), sleep(ms, stop.signal, force).then(() => false)]);
  } finally {
    stop.abort();
  }
}

/**
 * How a Manager's shutdown ended: every runnable stopped within the grace
 * period; the grace period passed first (the runnables still running are
 * abandoned: what they hold may keep the process alive); or `force` aborted.
 */
export type ShutdownOutcome = 'stopped' | 'timed-out' | 'forced';

interface Running {
  controller: AbortController;
  done: Promise<void>[];
}

export class Manager {
  readonly #config: Readonly<ManagerConfig>;
  readonly #logger: Logger;
  readonly #election: Election | undefined;
  readonly #groups = new Map<RunnableGroup, Runnable[]>(GROUPS.map((g) => [g, []]));
  readonly #leaderOnly: Runnable[] = [];
  readonly #failure = new AbortController();
  #failedWith: unknown;
  #started = false;
  #startupComplete = false;
  #leader: (Running & { term: LeaderTerm }) | undefined;
  /** The previous term's leader group while it stops: the next one starts after it. */
  #leaderStopping: Promise<void> | undefined;

  constructor(config: Partial<ManagerConfig>, deps: ManagerDeps) {
    this.#config = Object.freeze({ ...MANAGER_DEFAULTS, ...config });
    // The caller names the component (componentLogger(root, 'manager')).
    this.#logger = deps.logger;
    this.#election = deps.election;
  }

  /** Adds a runnable; leader-only runnables (needLeaderElection) go to the leader group. */
  add(runnable: Runnable, group: RunnableGroup = 'others'): this {
    if (this.#started) throw new PortalError(ErrorCode.Internal, `cannot add ${runnable.name}: manager already started`);
    if (runnable.needLeaderElection?.() === true) this.#leaderOnly.push(runnable);
    else this.#groups.get(group)!.push(runnable);
    return this;
  }

  /** Started through the informers group and every runnable reports ready. */
  ready(): boolean {
    if (!this.#startupComplete) return false;
    for (const list of this.#groups.values()) for (const r of list) if (r.ready && !r.ready()) return false;
    return true;
  }

  /**
   * Who starts what, in start order (for /debug/vars and docs): each group's
   * runnables, then the leader-only group that runs with the term.
   */
  describe(): { groups: Record<RunnableGroup, string[]>; leaderOnly: string[]; leading: string | null } {
    const groups = Object.fromEntries(GROUPS.map((g) => [g, this.#groups.get(g)!.map((r) => r.name)])) as Record<RunnableGroup, string[]>;
    return { groups, leaderOnly: this.#leaderOnly.map((r) => r.name), leading: this.#leader?.term.epochString ?? null };
  }

  /** The current leader term, while the leader group runs. */
  leaderTerm(): LeaderTerm | undefined {
    return this.#leader?.term;
  }

  /**
   * Runs until `signal` aborts (or a runnable fails under `onRunnableFailure:
   * "stop"`), then stops everything in reverse order. `force` aborting during
   * that shutdown (a second SIGTERM) stops waiting at once. Resolves to how
   * the shutdown ended; rejects only when a runnable failure stopped the manager.
   */
  async start(signal: AbortSignal, options: { force?: AbortSignal } = {}): Promise<ShutdownOutcome> {
    if (this.#started) throw new PortalError(ErrorCode.Internal, 'manager started twice');
    this.#started = true;
    const stop = AbortSignal.any([signal, this.#failure.signal]);
    const running: Array<[string, Running]> = [];
    let outcome: ShutdownOutcome;
    try {
      for (const group of GROUPS) {
        if (stop.aborted) break;
        const r = this.#startGroup(group, this.#groups.get(group)!);
        running.push([group, r]);
        if (group === 'informers') await this.#waitForSync(this.#groups.get(group)!, AbortSignal.any([stop, r.controller.signal]));
      }
      if (!stop.aborted) this.#startupComplete = true;
      if (!stop.aborted && this.#election) {
        const controller = new AbortController();
        const election = this.#election;
        const unsubscribe = [
          election.events.on('BecameLeader', (e) => this.#startLeading(e.term, stop)),
          election.events.on('LostLeadership', () => void this.#stopLeading()),
        ];
        const done = election
          .run(controller.signal)
          .catch((err: unknown) => this.#logger.error({ [LogKey.error]: toError(err) }, 'leader election failed'))
          .finally(() => unsubscribe.forEach((off) => off()));
        running.push(['election', { controller, done: [done] }]);
      }
      if (!stop.aborted) this.#logger.info('manager started');
      await new Promise<void>((resolve) => (stop.aborted ? resolve() : stop.addEventListener('abort', () => resolve(), { once: true })));
    } catch (err) {
      if (!stop.aborted) throw err;
    } finally {
      this.#startupComplete = false;
      outcome = await this.#shutdown(running, options.force);
    }
    if (this.#failedWith !== undefined) {
      throw new PortalError(ErrorCode.Internal, `manager stopped after a runnable failed: ${(this.#failedWith as Error).message ?? String(this.#failedWith)}`, {
        cause: this.#failedWith,
      });
    }
    return outcome;
  }

  async #shutdown(running: Array<[string, Running]>, force: AbortSignal | undefined): Promise<ShutdownOutcome> {
    this.#logger.info({ [LogKey.graceMs]: this.#config.gracefulShutdownMs }, 'shutting down');
    // The group being waited for: what an operator needs to know when the grace period passes.
    let stopping = 'leader';
    const stopAll = async () => {
      // The leader group first (LostLeadership also stops it, but the
      // election may be stuck releasing), then each group in reverse.
      await this.#stopLeading();
      for (const [name, r] of [...running].reverse()) {
        stopping = name;
        r.controller.abort();
        await Promise.all(r.done);
        this.#logger.debug({ [LogKey.group]: name }, 'group stopped');
      }
    };
    const finished = await within(stopAll(), this.#config.gracefulShutdownMs, force);
    if (finished) {
      this.#logger.info('manager stopped');
      return 'stopped';
    }
    if (force?.aborted) {
      this.#logger.warn({ [LogKey.group]: stopping }, 'forced stop: not waiting for runnables');
      return 'forced';
    }
    this.#logger.warn({ [LogKey.group]: stopping, [LogKey.graceMs]: this.#config.gracefulShutdownMs }, 'graceful shutdown timed out; abandoning runnables still running');
    return 'timed-out';
  }

  /** Each group has its own controller (not tied to the stop signal) so shutdown can go group by group. */
  #startGroup(group: string, runnables: Runnable[], term?: LeaderTerm): Running {
    const controller = new AbortController();
    const signal = term ? AbortSignal.any([controller.signal, term.signal]) : controller.signal;
    return { controller, done: runnables.map((r) => this.#supervise(r, group, signal, term)) };
  }

  async #waitForSync(runnables: Runnable[], signal: AbortSignal): Promise<void> {
    const waits = runnables.filter((r) => r.waitForSync).map((r) => r.waitForSync!(signal));
    if (waits.length === 0) return;
    this.#logger.info({ [LogKey.informers]: waits.length }, 'waiting for informers to sync');
    await Promise.all(waits);
  }

  /** Runs one runnable, restarting it with backoff (or failing the manager) if it throws. */
  async #supervise(r: Runnable, group: string, signal: AbortSignal, term?: LeaderTerm): Promise<void> {
    const backoff = new Backoff({ initialMs: 500, maxMs: 30_000, ...this.#config.restartBackoff });
    const log = this.#logger.child({ [LogKey.runnable]: r.name, [LogKey.group]: group });
    while (!signal.aborted) {
      try {
        await r.start(signal, term);
        if (!signal.aborted) log.info('runnable finished');
        return;
      } catch (err) {
        if (signal.aborted) return;
        if (this.#config.onRunnableFailure === 'stop') {
          log.error({ [LogKey.error]: toError(err) }, 'runnable failed; stopping the manager');
          this.#failedWith ??= err;
          this.#failure.abort();
          return;
        }
        const delay = backoff.next();
        log.error({ [LogKey.error]: toError(err), [LogKey.restartInMs]: Math.round(delay) }, 'runnable failed; restarting');
        await sleep(delay, signal);
      }
    }
  }

  /**
   * Starts the leader-only group with the term — at once (synchronously, in
   * the elector's BecameLeader event) unless the previous term's group is
   * still stopping, in which case right after it: two terms' groups never
   * run side by side.
   */
  #startLeading(term: LeaderTerm, stop: AbortSignal): void {
    const begin = () => {
      if (stop.aborted || term.signal.aborted) return;
      if (this.#leader) void this.#stopLeading();
      this.#logger.info({ [LogKey.epoch]: term.epochString, [LogKey.runnables]: this.#leaderOnly.length }, 'starting leader-only group');
      this.#leader = { ...this.#startGroup('leader', this.#leaderOnly, term), term };
    };
    if (this.#leaderStopping) void this.#leaderStopping.then(begin);
    else begin();
  }

  /** Aborts the leader-only group and resolves once it stopped (bounded by the grace period). */
  #stopLeading(): Promise<void> {
    const leader = this.#leader;
    if (!leader) return this.#leaderStopping ?? Promise.resolve();
    this.#leader = undefined;
    leader.controller.abort();
    const stopping = within(Promise.all(leader.done), this.#config.gracefulShutdownMs).then((ok) => {
      if (ok) this.#logger.info({ [LogKey.epoch]: leader.term.epochString }, 'leader-only group stopped');
      else this.#logger.warn({ [LogKey.epoch]: leader.term.epochString }, 'leader-only group did not stop within the grace period');
      if (this.#leaderStopping === stopping) this.#leaderStopping = undefined;
    });
    this.#leaderStopping = stopping;
    return stopping;
  }
}
