/**
 * The elector's one channel (issue 10 item 3): every leadership fact is
 * emitted here once, and the Manager (start/stop of the leader-only group),
 * the metrics, the Kubernetes Events on the Lease and /debug/vars subscribe.
 * There are no callbacks besides it.
 */
import type { EventBus } from '../observability/event-bus.ts';
import type { LeaderTerm } from '../util/leader-term.ts';

// A type alias (not an interface) so it satisfies EventBus's index signature.
export type LeaderEventMap = {
  LeaderElectionStarted: { identity: string; lease: string };
  /** A term began: leader-only work starts under `term` (its signal fires when it ends). */
  BecameLeader: { identity: string; epoch: string; leaseUid: string; term: LeaderTerm };
  /** The term ended (lost, expired or shut down); emitted before the Lease is released. */
  LostLeadership: { identity: string; epoch: string; leaseUid: string; reason: string };
  /** The observed holder changed (also to this replica, and to "" on release). */
  NewLeaderObserved: { new: string; previous: string };
};

export type LeaderEventBus = EventBus<LeaderEventMap>;
