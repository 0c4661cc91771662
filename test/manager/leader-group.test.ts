/**
 * The Manager is the one place where leadership turns into work (issue 10
 * item 3): it subscribes to the elector's channel, starts the leader-only
 * group with the term on BecameLeader and stops it on LostLeadership (or when
 * the term's signal fires), and never runs two terms' groups side by side.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Manager } from '../../src/manager/manager.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { scriptedElection } from '../support/election.ts';

test('BecameLeader starts the leader-only group at once, with the term; LostLeadership stops it', async () => {
  const election = scriptedElection();
  const log: string[] = [];
  const m = new Manager({}, { logger: silentLogger(), election });
  m.add({
    name: 'actuator',
    needLeaderElection: () => true,
    async start(signal, term) {
      log.push(`start ${term?.epochString}`);
      await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
      log.push(`stop ${term?.epochString}`);
    },
  });
  const stop = new AbortController();
  const done = m.start(stop.signal);
  await election.started;
  election.win();
  // Synchronously: no poll between the event and the start.
  assert.deepEqual(log, ['start lease/1']);
  election.lose();
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(log, ['start lease/1', 'stop lease/1']);
  stop.abort();
  await done;
});

test('a new term whose predecessor group is still stopping starts only after it stopped (never two groups at once)', async () => {
  const election = scriptedElection();
  const log: string[] = [];
  let release!: () => void;
  const slowStop = new Promise<void>((r) => (release = r));
  let running = 0;
  const m = new Manager({}, { logger: silentLogger(), election });
  m.add({
    name: 'actuator',
    needLeaderElection: () => true,
    async start(signal, term) {
      running++;
      log.push(`start ${term?.epochString} (running ${running})`);
      await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
      // The first term's in-flight writes take a while to return.
      if (term?.epochString === 'lease/1') await slowStop;
      running--;
      log.push(`stop ${term?.epochString}`);
    },
  });
  const stop = new AbortController();
  const done = m.start(stop.signal);
  await election.started;
  election.win();
  election.lose();
  election.win();
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(log, ['start lease/1 (running 1)'], 'the second term waits for the first group');
  release();
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(log, ['start lease/1 (running 1)', 'stop lease/1', 'start lease/2 (running 1)']);
  stop.abort();
  await done;
  assert.equal(log.at(-1), 'stop lease/2');
});
