/**
 * The elector's decisions as a pure state machine (issue 10 item 4):
 * observations go in (a Lease read or watched, our own write accepted), and
 * decisions come out (create, update, wait, demote, fast-path renew, healthy
 * or not). No I/O and no timers: time comes from the injected monotonic
 * clock, so every rule of client-go's tryAcquireOrRenew is unit-tested on a
 * fake clock (test/leader/election-state.test.ts). elector.ts is the thin
 * I/O loop around it: it reads and writes the Lease, sleeps, and emits on
 * its channel.
 *
 * Lease timestamps are only written (MicroTime from `wall()`), never compared
 * with the local clock: expiry is judged from when *this* replica observed
 * the record change (client-go's observedTime).
 */
import { newerResourceVersion, sameRecord, type LeaseRecord, type ObservedLease } from './lease-lock.ts';
import { microTime } from './lease-lock.ts';

export interface ElectionStateConfig {
  identity: string;
  leaseDurationMs: number;
  healthTimeoutMs: number;
  /** Pause between renewals (a renewal cycle starts this long after the last success). */
  retryPeriodMs: number;
  /** How long a renewal cycle may keep retrying before the leader gives up. */
  renewDeadlineMs: number;
}

export interface ElectionClock {
  /** Monotonic ms (performance.now() in production). */
  now(): number;
  /** Wall time for the MicroTime stamps written to the Lease. */
  wall(): Date;
}

export const SYSTEM_CLOCK: ElectionClock = { now: () => performance.now(), wall: () => new Date() };

/** What to do with the Lease just read (or found missing). */
export type AcquireDecision =
  | { type: 'create'; record: LeaseRecord }
  | { type: 'update'; base: ObservedLease; record: LeaseRecord }
  /** Someone else holds an unexpired Lease (campaigning: try again later). */
  | { type: 'wait'; reason: string; heldBy: string }
  /** We were renewing and the Lease is gone or someone else's: demote now. */
  | { type: 'lost'; reason: string; heldBy: string };

/** What a leader does after a renewal attempt failed. */
export type RenewFailureDecision =
  /** Leadership is over (another holder, or the renew deadline passed). */
  | { type: 'demote'; reason: string }
  /** Try again after `afterMs` (never past the deadline). */
  | { type: 'retry'; afterMs: number };

/** What to do with the Lease on a graceful shutdown, after a fresh Get. */
export type ReleaseDecision =
  | { type: 'release'; base: ObservedLease; record: LeaseRecord }
  /** Someone else holds it now (or nobody): leave it alone. */
  | { type: 'not-ours'; holder: string };

export class ElectionState {
  readonly #config: Readonly<ElectionStateConfig>;
  readonly #clock: ElectionClock;
  #observed: ObservedLease | undefined;
  /** Monotonic time at which #observed last changed (client-go's observedTime). */
  #observedTime = 0;
  /** Monotonic send time of the last successful acquire/renew. */
  #lastRenewSentAt = 0;
  /** Monotonic time of the last successful acquire/renew response. */
  #lastRenewedAt = 0;

  constructor(config: ElectionStateConfig, clock: ElectionClock = SYSTEM_CLOCK) {
    this.#config = Object.freeze({ ...config });
    this.#clock = clock;
  }

  get observed(): ObservedLease | undefined {
    return this.#observed;
  }

  get observedTime(): number {
    return this.#observedTime;
  }

  get lastRenewSentAt(): number {
    return this.#lastRenewSentAt;
  }

  /** The holder last observed ("" when released or unknown). */
  holder(): string {
    return this.#observed?.record.holderIdentity ?? '';
  }

  // ---- observations --------------------------------------------------------

  /** A record seen on the server (Get or watch); observedTime moves only when it changed. Returns whether it was taken. */
  observe(lease: ObservedLease): boolean {
    const prev = this.#observed;
    if (prev && prev.metadata.uid === lease.metadata.uid && !newerResourceVersion(lease.metadata.resourceVersion, prev.metadata.resourceVersion) && lease.metadata.resourceVersion !== prev.metadata.resourceVersion) {
      return false; // an older view (e.g. a watch event overtaken by our own write)
    }
    this.#observed = lease;
    if (!sameRecord(prev?.record, lease.record) || prev?.metadata.uid !== lease.metadata.uid) this.#observedTime = this.#clock.now();
    return true;
  }

  /** Our create/update that was sent at `sentAt` succeeded with `lease`. */
  succeeded(lease: ObservedLease, sentAt: number): void {
    this.#observed = lease;
    this.#observedTime = this.#clock.now();
    this.#lastRenewSentAt = sentAt;
    this.#lastRenewedAt = this.#observedTime;
  }

  // ---- decisions -------------------------------------------------------------

  /** The record we want on the Lease, stamped now. */
  desired(): LeaseRecord {
    const stamp = microTime(this.#clock.wall());
    return {
      holderIdentity: this.#config.identity,
      // Whole seconds on the wire; rounding up only makes others wait longer.
      leaseDurationSeconds: Math.max(1, Math.ceil(this.#config.leaseDurationMs / 1000)),
      acquireTime: stamp,
      renewTime: stamp,
      leaseTransitions: 0,
    };
  }

  /**
   * client-go's fast path: we lead and our view is current, so renew with an
   * update of what we last wrote, without a Get. Undefined when a Get is needed.
   */
  fastRenew(): { base: ObservedLease; record: LeaseRecord } | undefined {
    const observed = this.#observed;
    if (!observed || observed.record.holderIdentity !== this.#config.identity) return undefined;
    if (this.#observedTime + observed.record.leaseDurationSeconds * 1000 <= this.#clock.now()) return undefined;
    return { base: observed, record: { ...this.desired(), acquireTime: observed.record.acquireTime, leaseTransitions: observed.record.leaseTransitions } };
  }

  /**
   * The slow path of tryAcquireOrRenew, after a Get: `current` is what the
   * server holds (undefined: no Lease). `renewing`: we lead and want to
   * extend the same term. Call observe(current) first. `at`: when the
   * attempt began (client-go judges expiry against that instant, before the Get).
   */
  decide(current: ObservedLease | undefined, renewing: boolean, at: number = this.#clock.now()): AcquireDecision {
    const desired = this.desired();
    if (!current) return renewing ? { type: 'lost', reason: 'lease was deleted', heldBy: '' } : { type: 'create', record: desired };
    const record = current.record;
    if (renewing && record.holderIdentity !== this.#config.identity) return { type: 'lost', reason: 'lease changed hands', heldBy: record.holderIdentity };
    const held = record.holderIdentity !== '' && record.holderIdentity !== this.#config.identity;
    if (held && this.#observedTime + record.leaseDurationSeconds * 1000 > at) {
      return { type: 'wait', reason: `lease held by "${record.holderIdentity}"`, heldBy: record.holderIdentity };
    }
    return {
      type: 'update',
      base: current,
      record: renewing
        ? { ...desired, acquireTime: record.acquireTime, leaseTransitions: record.leaseTransitions }
        : // Every term is a distinct epoch, also re-acquiring a Lease that still names us.
          { ...desired, leaseTransitions: record.leaseTransitions + 1 },
    };
  }

  /**
   * When the current renewal cycle gives up. client-go polls every
   * retryPeriod under a renewDeadline timeout that starts with the cycle,
   * i.e. retryPeriod after the last success (wait.Until, sliding): a leader
   * that cannot renew gives up R + D after its last success at the latest.
   * Anchored at the last renewal's *send* time, as the term's validity is,
   * not at whenever the loop's timer fired: a late timer (a loaded machine, a
   * GC pause) used to push the deadline past the term's validity, so the
   * backstop ended the term before the renew loop did. Never later than the
   * term's validity either (`validUntil`; a config with R + D close to L).
   */
  renewDeadline(validUntil: number): number {
    return Math.min(this.#lastRenewSentAt + this.#config.retryPeriodMs + this.#config.renewDeadlineMs, validUntil);
  }

  /** Whether the renew `deadline` has passed. */
  pastDeadline(deadline: number): boolean {
    return this.#clock.now() >= deadline;
  }

  /** Time left before `deadline` (bounds each request of the cycle, a hanging one included). */
  remaining(deadline: number): number {
    return deadline - this.#clock.now();
  }

  /**
   * A renewal attempt failed (`heldBy` set: the Lease names another holder).
   * Demote at once on another holder (on purpose, unlike client-go) or once
   * the deadline has passed; otherwise retry within the deadline.
   */
  renewFailed(failure: { reason: string; heldBy?: string | undefined }, deadline: number): RenewFailureDecision {
    if (failure.heldBy !== undefined) return { type: 'demote', reason: `lease is now held by "${failure.heldBy}"` };
    const left = this.remaining(deadline);
    if (left <= 0) return { type: 'demote', reason: `failed to renew within renew deadline (${failure.reason})` };
    return { type: 'retry', afterMs: Math.min(this.#config.retryPeriodMs, left) };
  }

  /** A graceful release keeps retrying (on conflicts) until this monotonic time. */
  releaseDeadline(): number {
    return this.#clock.now() + this.#config.renewDeadlineMs;
  }

  /**
   * Graceful release, on the Lease just read: only while it still names us
   * (never clear someone else's hold); holder "" and 1 s so others take over
   * at once; the transition count stays (the next holder's acquire bumps it).
   */
  decideRelease(current: ObservedLease): ReleaseDecision {
    const holder = current.record.holderIdentity;
    if (holder !== this.#config.identity) return { type: 'not-ours', holder };
    const stamp = microTime(this.#clock.wall());
    return {
      type: 'release',
      base: current,
      record: { holderIdentity: '', leaseDurationSeconds: 1, acquireTime: stamp, renewTime: stamp, leaseTransitions: current.record.leaseTransitions },
    };
  }

  /**
   * A release write or read failed with `statusCode` (undefined: no HTTP
   * status). A 409 means the Lease changed under us (e.g. our own last
   * renewal raced the read): read again and retry. Anything else: give up,
   * others take over once the Lease expires.
   */
  releaseFailed(statusCode: number | undefined): 'retry' | 'give-up' {
    return statusCode === 409 ? 'retry' : 'give-up';
  }

  /**
   * client-go's HealthzAdaptor: a leader whose last successful renewal is
   * older than leaseDuration + healthTimeout is wedged; followers are
   * healthy. Returns the problem, or undefined when healthy.
   */
  healthError(leading: boolean): string | undefined {
    if (!leading) return undefined;
    const overdue = this.#clock.now() - (this.#lastRenewedAt + this.#config.leaseDurationMs + this.#config.healthTimeoutMs);
    return overdue > 0 ? `overdue by ${Math.round(overdue)}ms` : undefined;
  }
}
