/** Manager lifecycle with real runnables and real electors. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { sleep } from '../../src/util/backoff.ts';
import { leaderElectionConfig } from '../../src/leader/config.ts';
import { LeaderElector } from '../../src/leader/elector.ts';
import type { LeaderTerm } from '../../src/util/leader-term.ts';
import { Manager } from '../../src/manager/manager.ts';
import type { Runnable } from '../../src/util/runnable.ts';
import { ErrorCode, isPortalError } from '../../src/observability/errors.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { FAST, apiServer, clientFor, until } from '../leader/cluster.ts';

/** A runnable that records its lifecycle into `log`. */
function recorder(log: string[], name: string, extra: Partial<Runnable> = {}): Runnable {
  return {
    name,
    async start(signal) {
      log.push(`start:${name}`);
      await sleep(1e9, signal);
      log.push(`stop:${name}`);
    },
    ...extra,
  };
}

function aloneElector(): LeaderElector {
  return new LeaderElector(leaderElectionConfig({ leaderElect: false, leaseNamespace: 'default' }), {
    client: undefined as never, // never used when leading alone
    identity: 'solo_1',
    logger: silentLogger(),
    registry: new Registry(),
    recorder: false,
  });
}

test('starts groups in order (waiting for informer sync) and stops them in reverse', async () => {
  const log: string[] = [];
  let synced!: () => void;
  const syncGate = new Promise<void>((r) => (synced = r));
  let waiting!: () => void;
  const managerWaits = new Promise<void>((r) => (waiting = r));
  const m = new Manager({}, { logger: silentLogger(), election: aloneElector() });
  m.add(recorder(log, 'audit'), 'others');
  m.add(recorder(log, 'reports', { needLeaderElection: () => true }));
  m.add(
    recorder(log, 'informer', {
      waitForSync: () => {
        waiting();
        return syncGate;
      },
    }),
    'informers',
  );
  m.add(recorder(log, 'webhook'), 'webhook');
  m.add(recorder(log, 'probes'), 'probes');
  const controller = new AbortController();
  const done = m.start(controller.signal);
  await until('informers to start', 1000, () => log.includes('start:informer'));
  // The manager is now blocked on the sync promise, so nothing later can have started.
  await managerWaits;
  assert.deepEqual(log, ['start:probes', 'start:webhook', 'start:informer'], 'others wait for the sync');
  assert.equal(m.ready(), false);
  synced();
  await until('the leader group', 1000, () => log.includes('start:reports'));
  assert.deepEqual(log.slice(3), ['start:audit', 'start:reports']);
  assert.equal(m.ready(), true);
  assert.equal(m.leaderTerm()?.isValid(), true);
  controller.abort();
  await done;
  assert.deepEqual(log.slice(5), ['stop:reports', 'stop:audit', 'stop:informer', 'stop:webhook', 'stop:probes']);
});

test('a failing runnable is restarted with backoff; other runnables keep running', async () => {
  const log: string[] = [];
  let attempts = 0;
  const m = new Manager({ restartBackoff: { initialMs: 10, maxMs: 20 } }, { logger: silentLogger() });
  m.add(recorder(log, 'webhook'), 'webhook');
  m.add({
    name: 'flaky',
    async start(signal) {
      attempts++;
      if (attempts < 3) throw new Error('boom');
      await sleep(1e9, signal);
    },
  });
  const controller = new AbortController();
  const done = m.start(controller.signal);
  await until('three attempts', 2000, () => attempts >= 3);
  assert.deepEqual(log, ['start:webhook']);
  controller.abort();
  await done;
});

test('onRunnableFailure "stop" stops the manager and reports the failure', async () => {
  const log: string[] = [];
  const m = new Manager({ onRunnableFailure: 'stop' }, { logger: silentLogger() });
  m.add(recorder(log, 'webhook'), 'webhook');
  m.add({ name: 'broken', start: () => Promise.reject(new Error('cannot bind')) });
  await assert.rejects(m.start(new AbortController().signal), (e: unknown) => isPortalError(e, ErrorCode.Internal) && /cannot bind/.test((e as Error).message));
  assert.deepEqual(log, ['start:webhook', 'stop:webhook']);
});

/** A runnable that never stops by itself; reports when it started and when it was asked to stop. */
function stubborn() {
  let started!: () => void;
  let asked!: () => void;
  const events = { started: new Promise<void>((r) => (started = r)), askedToStop: new Promise<void>((r) => (asked = r)) };
  const runnable: Runnable = {
    name: 'stubborn',
    start: (signal) => {
      started();
      signal.addEventListener('abort', () => asked(), { once: true });
      return new Promise(() => {});
    },
  };
  return { runnable, ...events };
}

test('shutdown is bounded by the grace period, a second stop is immediate, and start() says which ended it', async () => {
  const s1 = stubborn();
  const m1 = new Manager({ gracefulShutdownMs: 200 }, { logger: silentLogger() });
  m1.add(s1.runnable);
  const c1 = new AbortController();
  const done1 = m1.start(c1.signal);
  await s1.started;
  let t0 = performance.now();
  c1.abort();
  // The caller (portal serve) learns the grace period passed: it exits 1 saying so.
  assert.equal(await done1, 'timed-out');
  const graceful = performance.now() - t0;
  assert.ok(graceful >= 190 && graceful < 600, `took ${graceful}ms`);

  const s2 = stubborn();
  const m2 = new Manager({ gracefulShutdownMs: 10_000 }, { logger: silentLogger() });
  m2.add(s2.runnable);
  const c2 = new AbortController();
  const force = new AbortController();
  const done2 = m2.start(c2.signal, { force: force.signal });
  await s2.started;
  t0 = performance.now();
  c2.abort();
  // The graceful shutdown is under way (the runnable was asked to stop) when the second stop comes.
  await s2.askedToStop;
  force.abort();
  assert.equal(await done2, 'forced');
  assert.ok(performance.now() - t0 < 300);

  const log: string[] = [];
  const m3 = new Manager({ gracefulShutdownMs: 10_000 }, { logger: silentLogger() });
  m3.add(recorder(log, 'a'));
  const c3 = new AbortController();
  const done3 = m3.start(c3.signal);
  await until('a started', 5000, () => (log.includes('start:a') ? true : undefined));
  c3.abort();
  assert.equal(await done3, 'stopped');
  assert.deepEqual(log, ['start:a', 'stop:a']);
});

test('leadership moves between two managers; leader-only work follows the term, the webhook never stops', async (t) => {
  const api = await apiServer(t);
  const events: string[] = [];
  const make = (name: string) => {
    const elector = new LeaderElector(leaderElectionConfig({ leaseNamespace: 'default', ...FAST }), {
      client: clientFor(api, name),
      identity: `${name}_1`,
      logger: silentLogger(),
      registry: new Registry(),
    });
    const m = new Manager({ gracefulShutdownMs: 2000 }, { logger: silentLogger(), election: elector });
    m.add(recorder(events, `${name}-webhook`), 'webhook');
    m.add({
      name: `${name}-reports`,
      needLeaderElection: () => true,
      async start(signal, term?: LeaderTerm) {
        assert.ok(term, 'leader-only runnables get the term');
        term.assertValid();
        events.push(`lead:${name}:${term.epochString.split('/')[1]}`);
        await sleep(1e9, signal);
        events.push(`unlead:${name}`);
      },
    });
    const controller = new AbortController();
    const done = m.start(controller.signal);
    t.after(() => {
      controller.abort();
      return done;
    });
    return { m, elector, controller, done };
  };
  const a = make('a');
  await until('a to lead', 2000, () => events.includes('lead:a:0'));
  const b = make('b');
  await until('b webhook', 1000, () => events.includes('start:b-webhook'));
  a.controller.abort();
  await a.done;
  await until('b to lead after a released', 1000, () => events.includes('lead:b:1'));
  assert.ok(events.indexOf('unlead:a') < events.indexOf('lead:b:1'), 'a stopped leader work before b started');
  assert.ok(events.indexOf('stop:a-webhook') > events.indexOf('unlead:a'), 'a webhook stopped last');
  assert.ok(!events.includes('stop:b-webhook'));
  assert.equal(b.elector.isLeader(), true);
});
