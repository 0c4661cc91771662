/**
 * A scripted election for Manager-level tests: it reports on the same channel
 * as the LeaderElector (BecameLeader with a fresh Term, LostLeadership), and
 * the test decides when leadership is won and lost.
 */
import type { LeaderEventMap } from '../../src/leader/events.ts';
import { Term } from '../../src/leader/term.ts';
import type { Election } from '../../src/manager/manager.ts';
import { EventBus } from '../../src/observability/event-bus.ts';

/** An election the test drives: `win()` / `lose()` emit on the channel like the elector does. */
export function scriptedElection() {
  const events = new EventBus<LeaderEventMap>((_e, err) => {
    throw err;
  });
  let transitions = 0;
  let term: Term | undefined;
  let running!: () => void;
  const started = new Promise<void>((r) => (running = r));
  const election: Election & { win(): Term; lose(): void; started: Promise<void> } = {
    events,
    started,
    async run(signal) {
      running();
      await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
      this.lose();
    },
    win() {
      term = new Term({ leaseUid: 'lease', transitions: ++transitions }, performance.now(), 60_000);
      events.emit('BecameLeader', { identity: 'me', epoch: term.epochString, leaseUid: 'lease', term });
      return term;
    },
    lose() {
      if (!term || term.ended) return;
      term.end('lost');
      events.emit('LostLeadership', { identity: 'me', epoch: term.epochString, leaseUid: 'lease', reason: 'lost' });
    },
  };
  return election;
}

