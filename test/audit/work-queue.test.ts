import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { isPortalError, ErrorCode } from '../../src/observability/errors.ts';
import { objectKey, parseObjectKey, WorkQueue } from '../../src/audit/work-queue.ts';

void test('objectKey round-trips group/kind/namespace/name, core group and cluster scope as ""', () => {
  assert.equal(objectKey('', 'Pod', 'default', 'web'), '/Pod/default/web');
  assert.deepEqual(parseObjectKey(objectKey('apps', 'Deployment', '', 'x')), { group: 'apps', kind: 'Deployment', namespace: '', name: 'x' });
  assert.throws(() => parseObjectKey('a/b'), (e) => isPortalError(e, ErrorCode.InputInvalid));
});

void test('a key queued twice is processed once, with the latest payload', async () => {
  const q = new WorkQueue<number>();
  assert.equal(q.add('k', 1), true);
  assert.equal(q.add('k', 2), false);
  q.add('other', 3);
  const first = await q.get();
  assert.deepEqual(first, { key: 'k', item: 2, attempt: 0 });
  const second = await q.get();
  assert.equal(second?.key, 'other');
  assert.equal(q.length, 0);
  q.done('k');
  q.done('other');
  assert.equal(q.length, 0, 'nothing re-queued');
  q.destroy();
});

void test('a key re-added while processing is processed again afterwards, never concurrently', async () => {
  const q = new WorkQueue<string>();
  q.add('k', 'v1');
  const w = await q.get();
  assert.equal(w?.item, 'v1');
  q.add('k', 'v2');
  assert.equal(q.length, 0, 'not handed out while in flight');
  let second: string | undefined;
  const pending = q.get().then((x) => (second = x?.item));
  await new Promise((r) => setImmediate(r));
  assert.equal(second, undefined, 'a waiting worker does not get the key in flight');
  q.done('k');
  await pending;
  assert.equal(second, 'v2');
  q.done('k');
  q.destroy();
});

void test('retries back off exponentially and drop after maxRetries with a metric', async () => {
  const registry = new Registry();
  const q = new WorkQueue<undefined>({ maxRetries: 3, baseDelayMs: 20, maxDelayMs: 50, registry });
  q.add('k');
  const seenAt: number[] = [];
  const attempts: number[] = [];
  const t0 = performance.now();
  for (;;) {
    const w = await q.get();
    assert.ok(w);
    seenAt.push(performance.now() - t0);
    attempts.push(w.attempt);
    const outcome = q.retry(w.key, undefined, new Error('boom'));
    q.done(w.key);
    if (outcome === 'dropped') break;
  }
  assert.deepEqual(attempts, [0, 1, 2, 3]);
  // delays 20, 40, 50 (capped): each gap at least its delay (timers never fire early).
  const gaps = seenAt.slice(1).map((t, i) => t - seenAt[i]!);
  assert.ok(gaps[0]! >= 19 && gaps[1]! >= 39 && gaps[2]! >= 49, `gaps ${gaps.join(',')}`);
  assert.equal(q.delayed, 0);
  const metrics = await registry.getMetricsAsJSON();
  const drops = metrics.find((m) => m.name === 'portal_audit_queue_drops_total');
  assert.deepEqual(drops?.values.map((v) => [v.labels.reason, v.value]), [['max_retries', 1]]);
  q.destroy();
});

void test('forget() resets the failure count after a success', async () => {
  const q = new WorkQueue<undefined>({ baseDelayMs: 1, maxDelayMs: 1 });
  q.add('k');
  await q.get();
  q.retry('k', undefined);
  q.done('k');
  let w = await q.get();
  assert.equal(w?.attempt, 1);
  q.forget('k');
  q.done('k');
  q.add('k');
  w = await q.get();
  assert.equal(w?.attempt, 0);
  q.done('k');
  q.destroy();
});

void test('a bounded queue rejects with QueueFull instead of growing', () => {
  const registry = new Registry();
  const q = new WorkQueue({ maxSize: 2, registry });
  q.add('a');
  q.add('b');
  q.add('a'); // dedupe is not growth
  assert.throws(() => q.add('c'), (e) => isPortalError(e, ErrorCode.QueueFull));
  q.destroy();
});

void test('addAfter runs a key later without counting a failure; an earlier delay wins', async () => {
  const q = new WorkQueue<string>();
  const t0 = performance.now();
  q.addAfter('k', 'late', 500);
  q.addAfter('k', 'soon', 30);
  const w = await q.get();
  assert.equal(w?.item, 'soon');
  assert.equal(w?.attempt, 0);
  const elapsed = performance.now() - t0;
  assert.ok(elapsed >= 29 && elapsed < 450, `elapsed ${elapsed}`);
  q.done('k');
  q.destroy();
});

void test('close() drains waiting work, rejects new work, then idle gets resolve undefined', async () => {
  const q = new WorkQueue<undefined>();
  q.add('a');
  q.add('b');
  q.addAfter('c', undefined, 10_000); // future work is cancelled by close
  const closed = q.close();
  assert.throws(() => q.add('d'), (e) => isPortalError(e, ErrorCode.Closed));
  let isClosed = false;
  void closed.then(() => (isClosed = true));
  const a = await q.get();
  const b = await q.get();
  assert.deepEqual([a?.key, b?.key], ['a', 'b']);
  await new Promise((r) => setImmediate(r));
  assert.equal(isClosed, false, 'not drained while keys are in flight');
  q.done('a');
  q.done('b');
  await closed;
  assert.equal(await q.get(), undefined);
  assert.equal(q.delayed, 0);
  await q.close(); // idempotent
});

void test('destroy() drops everything now and releases waiting workers', async () => {
  const q = new WorkQueue<undefined>();
  const waiting = q.get();
  q.destroy();
  assert.equal(await waiting, undefined);
  assert.throws(() => q.add('x'), (e) => isPortalError(e, ErrorCode.Closed));
  q.destroy();
});

void test('get() rejects when its signal aborts and leaves the queue usable', async () => {
  const q = new WorkQueue<undefined>();
  const ac = new AbortController();
  const waiting = q.get(ac.signal);
  ac.abort(new Error('stop'));
  await assert.rejects(waiting, /stop/);
  q.add('k');
  assert.equal((await q.get())?.key, 'k', 'the aborted waiter did not swallow the key');
  q.destroy();
});

void test('the lag is the age of the oldest change not processed yet (waiting or in flight); 0 when none, and after destroy', async () => {
  const registry = new Registry();
  const q = new WorkQueue<undefined>({ name: 'audit', registry });
  const lag = async () => (await registry.getMetricsAsJSON()).find((m) => m.name === 'portal_audit_lag_seconds')?.values.find((v) => v.labels['queue'] === 'audit')?.value;
  const depth = async () => (await registry.getMetricsAsJSON()).find((m) => m.name === 'portal_audit_queue_depth')?.values.find((v) => v.labels['queue'] === 'audit')?.value;
  assert.equal(await lag(), 0, 'exposed before any change');
  assert.equal(await depth(), 0, 'exposed before any change');
  assert.equal(q.oldestPendingSince(), undefined);
  const tick = () => new Promise((r) => setTimeout(r, 5));
  q.add('a');
  const a = q.oldestPendingSince()!;
  await tick();
  q.add('b');
  q.add('a'); // deduplicated: a's change is still the oldest
  assert.equal(q.oldestPendingSince(), a);
  assert.ok((await lag())! > 0);
  assert.equal((await q.get())?.key, 'a');
  assert.equal(q.oldestPendingSince(), a, 'a key in flight is not processed yet');
  q.done('a');
  const b = q.oldestPendingSince()!;
  assert.ok(b > a, 'then b, the next oldest');
  assert.equal((await q.get())?.key, 'b');
  await tick();
  q.add('b'); // changed again while in flight
  assert.equal(q.oldestPendingSince(), b, 'the change in flight is older than the one waiting');
  q.done('b');
  assert.ok(q.oldestPendingSince()! > b, 'the re-added change, from when it arrived');
  assert.equal((await q.get())?.key, 'b');
  q.done('b');
  assert.equal(q.oldestPendingSince(), undefined);
  assert.equal(q.lagMs(), 0);
  assert.equal(await lag(), 0);
  q.add('c');
  await tick();
  assert.ok((await lag())! > 0);
  q.destroy();
  assert.equal(await lag(), 0, 'a destroyed queue has nothing waiting');
});
