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
