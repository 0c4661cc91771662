/** Leader-election metrics on an injected prom-client Registry. */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export interface LeaderMetricsSource {
  isLeader(): boolean;
  /** Seconds led so far, including the current term. */
  heldSeconds(): number;
  /** Times this replica became the leader (the count /debug/vars shows too). */
  transitions(): number;
}

export interface LeaderMetrics {
  acquireDuration: Histogram;
}

/** A counter that shows a number kept elsewhere, read at scrape time (it only goes up). */
function mirroredCounter(registry: Registry, name: string, help: string, read: () => number): void {
  let reported = 0;
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      const now = read();
      if (now > reported) this.inc(now - reported);
      reported = Math.max(reported, now);
    },
  });
}

export function createLeaderMetrics(registry: Registry, source: LeaderMetricsSource): LeaderMetrics {
  new Gauge({
    name: 'portal_leader_is_leader',
    help: '1 while this replica holds a valid leader term, else 0.',
    registers: [registry],
    collect() {
      this.set(source.isLeader() ? 1 : 0);
    },
  });
  mirroredCounter(registry, 'portal_leader_held_seconds_total', 'Total seconds this replica has been the leader.', () => source.heldSeconds());
  // The same count as /debug/vars leader_election.transitions (issue 33: they disagreed).
  mirroredCounter(registry, 'portal_leader_transitions_total', 'Times this replica became the leader.', () => source.transitions());
  return {
    acquireDuration: new Histogram({
      name: 'portal_leader_acquire_duration_seconds',
      help: 'Time from starting to campaign until the Lease was acquired.',
      // From sub-second watch handovers up to several production lease durations (15 s).
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120],
      registers: [registry],
    }),
  };
}
