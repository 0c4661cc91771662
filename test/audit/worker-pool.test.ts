import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WorkQueue } from '../../src/audit/work-queue.ts';
import { WorkerPool } from '../../src/audit/worker-pool.ts';
import { ErrorCode, isPortalError } from '../../src/observability/errors.ts';

void test('runs at most `concurrency` handlers at once and processes every key', async () => {
  const q = new WorkQueue<number>();
  let running = 0;
  let peak = 0;
  const seen: string[] = [];
  const pool = new WorkerPool(q, async (w) => {
    running++;
    peak = Math.max(peak, running);
    await new Promise((r) => setTimeout(r, 5));
    seen.push(w.key);
    running--;
  }, { concurrency: 3 });
  for (let i = 0; i < 20; i++) q.add(`k${i}`, i);
  const ac = new AbortController();
  const done = pool.start(ac.signal);
  await q.close();
  await done;
  assert.equal(peak, 3);
  assert.equal(seen.length, 20);
  assert.equal(new Set(seen).size, 20);
});

void test('a failing handler is retried with backoff; success forgets the failures', async () => {
  const q = new WorkQueue<undefined>({ baseDelayMs: 5, maxDelayMs: 5 });
  const attempts: number[] = [];
  const ac = new AbortController();
  let resolveDone!: () => void;
  const finished = new Promise<void>((r) => (resolveDone = r));
  const pool = new WorkerPool(q, async (w) => {
    attempts.push(w.attempt);
    if (w.attempt < 2) throw new Error('transient');
    resolveDone();
  });
  const running = pool.start(ac.signal);
  q.add('k');
  await finished;
  ac.abort();
  await running;
  assert.deepEqual(attempts, [0, 1, 2]);
  q.destroy();
});

void test('requeueAfterMs runs the key again later without counting a failure', async () => {
  const q = new WorkQueue<undefined>({ maxRetries: 0 });
  const attempts: number[] = [];
  const ac = new AbortController();
  let resolveDone!: () => void;
  const finished = new Promise<void>((r) => (resolveDone = r));
  const pool = new WorkerPool(q, async (w) => {
    attempts.push(w.attempt);
    if (attempts.length < 3) return { requeueAfterMs: 5 };
    resolveDone();
    return undefined;
  });
  const running = pool.start(ac.signal);
  q.add('k');
  await finished;
  ac.abort();
  await running;
  assert.deepEqual(attempts, [0, 0, 0]);
  q.destroy();
});

void test('abort stops the workers and start() resolves only after in-flight handlers return', async () => {
  const q = new WorkQueue<undefined>();
  const ac = new AbortController();
  let handlerReturned = false;
  let started!: () => void;
  const inHandler = new Promise<void>((r) => (started = r));
  const pool = new WorkerPool(q, async (_w, signal) => {
    started();
    await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
    await new Promise((r) => setTimeout(r, 20)); // cleanup takes a moment
    handlerReturned = true;
  }, { concurrency: 2 });
  const running = pool.start(ac.signal);
  q.add('k');
  await inHandler;
  assert.equal(pool.inFlight, 1);
  ac.abort();
  await running;
  assert.equal(handlerReturned, true);
  assert.equal(pool.inFlight, 0);
  assert.equal(q.processing, 0, 'the key was handed back');
  q.destroy();
});

void test('rejects a non-positive concurrency and a second start', async () => {
  const q = new WorkQueue();
  assert.throws(() => new WorkerPool(q, async () => undefined, { concurrency: 0 }), (e) => isPortalError(e, ErrorCode.ConfigInvalid));
  const pool = new WorkerPool(q, async () => undefined);
  const ac = new AbortController();
  const running = pool.start(ac.signal);
  await assert.rejects(pool.start(ac.signal), (e) => isPortalError(e, ErrorCode.Internal));
  ac.abort();
  await running;
  q.destroy();
});
