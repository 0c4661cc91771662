/** Leadership notifications published on the internal event bus. */
import type { EventBus } from '../observability/event-bus.ts';

// A type alias (not an interface) so it satisfies EventBus's index signature.
export type LeaderEventMap = {
  LeaderElectionStarted: { identity: string; lease: string };
  BecameLeader: { identity: string; epoch: string };
  LostLeadership: { identity: string; epoch: string; reason: string };
  NewLeaderObserved: { new: string; previous: string };
};

export type LeaderEventBus = EventBus<LeaderEventMap>;
