import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Gate } from '../../src/evaluation/gate.ts';

/** A call whose settling the test controls. */
function deferred(): { promise: Promise<string>; resolve: (v: string) => void; reject: (e: Error) => void } {
  let resolve!: (v: string) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<string>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

test('a gate of one starts each call only after the one before it settled, in order, failures included', async () => {
  const gate = new Gate(1);
  const calls = [deferred(), deferred(), deferred()];
  const started: number[] = [];
  const results = calls.map((d, i) =>
    gate.run(() => {
      started.push(i);
      return d.promise;
    }),
  );
  // Only the first call has started; the others wait for a slot.
  await Promise.resolve();
  assert.deepEqual(started, [0]);
  assert.equal(gate.waiting, 2);
  calls[0]!.reject(new Error('first failed'));
  await assert.rejects(results[0]!, /first failed/);
  assert.deepEqual(started, [0, 1], 'a failed call frees its slot');
  calls[1]!.resolve('b');
  assert.equal(await results[1], 'b');
  assert.deepEqual(started, [0, 1, 2]);
  calls[2]!.resolve('c');
  assert.equal(await results[2], 'c');
  assert.equal(gate.waiting, 0);
});

test('a gate of two runs two calls at once, never three', async () => {
  const gate = new Gate(2);
  let running = 0;
  let most = 0;
  const work = Array.from({ length: 6 }, (_, i) =>
    gate.run(async () => {
      running++;
      most = Math.max(most, running);
      await new Promise<void>((r) => setImmediate(r));
      running--;
      return i;
    }),
  );
  assert.deepEqual(await Promise.all(work), [0, 1, 2, 3, 4, 5]);
  assert.equal(most, 2);
});

test('a gate refuses a size below one', () => {
  assert.throws(() => new Gate(0), /at least 1, got 0/);
});
