/** The lifecycle contract of every long-running piece (controller-runtime's Runnable). */
import type { LeaderTerm } from './leader-term.ts';

export interface Runnable {
  /** For logs and errors. */
  readonly name: string;
  /**
   * Runs until `signal` aborts and resolves only after cleanup. Leader-only
   * runnables also get the term: `signal` fires when it ends, and every side
   * effect calls `term.assertValid()` right before it is sent.
   */
  start(signal: AbortSignal, term?: LeaderTerm): Promise<void>;
  /** true = runs only on the leader, stopped when leadership ends. @default false */
  needLeaderElection?(): boolean;
  /** Contributes to the manager's readiness. */
  ready?(): boolean;
  /** Informers: resolves once the cache has synced (awaited before later groups start). */
  waitForSync?(signal: AbortSignal): Promise<void>;
}

/** Start order; the stop order is the reverse (the leader-only group stops first). */
export const GROUPS = ['probes', 'webhook', 'informers', 'others'] as const;
export type RunnableGroup = (typeof GROUPS)[number];
