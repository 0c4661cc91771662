/**
 * The attacker of test/hostile/connection-floods.test.ts, in a process of its
 * own (floods.ts `attack`): its thousand sockets and 400 KB writes would
 * otherwise share the test's event loop, and the victim's latencies would
 * measure the attacker's CPU instead of Portal's. Started with fork(): takes
 * its plan as the first message, answers `stop` with its counts and exits.
 */
import { bigReview, flood, slowSenders, type AttackPlan, type AttackReport, type Flood, type Holders } from './floods.ts';

process.once('message', (plan: AttackPlan) => {
  const holders: Holders[] = plan.slow.map((s) => slowSenders(s));
  const floods: Flood[] = plan.floods.map((f) => flood(f.url, f.peer, f.concurrency, bigReview('flood', f.namespace, f.bytes)));
  process.send?.('started');
  process.once('message', () => {
    holders.forEach((h) => h.stop());
    void Promise.all(floods.map((f) => f.stop())).then(() => {
      const report: AttackReport = { slowOpened: holders.map((h) => h.opened()), floodAnswers: floods.map((f) => Object.fromEntries(f.answers)) };
      process.send?.(report, () => process.exit(0));
    });
  });
});
