/**
 * CompileQueue (issue 31 item 5): rule upserts take at most their share of
 * time once the informers have synced, namespaces take turns, a rule
 * updated while it waits keeps its place with its latest version, a rule
 * deleted while it waits is dropped, and nothing is delayed before sync.
 * Each upsert "costs" 5 ms on the queue's clock (real time plus what the
 * sink added), so the pauses are a few real milliseconds; the test waits
 * on the sink's calls, never on time.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CompileQueue } from '../../src/sources/compile-queue.ts';
import type { PortalRuleObject } from '../../src/policy/types.ts';
import { until } from '../support/until.ts';

const rule = (ns: string, name: string, generation = 1): PortalRuleObject =>
  ({ apiVersion: 'portal.dev/v1alpha1', kind: 'PortalRule', metadata: { namespace: ns, name, generation }, spec: {} }) as unknown as PortalRuleObject;
const key = (r: PortalRuleObject): string => `${r.metadata?.namespace}/${r.metadata?.name}`;

function setup(pacing: { on: boolean }) {
  let skew = 0;
  const applied: string[] = [];
  const errors: string[] = [];
  const sink = {
    upsert: (r: PortalRuleObject) => {
      skew += 5; // the compile's cost, on the queue's clock
      if (r.metadata?.name === 'throws') throw new Error('bug');
      applied.push(`${key(r)}@${r.metadata?.generation}`);
    },
    remove: (k: string) => void applied.push(`-${k}`),
    upsertException: () => undefined,
    removeException: () => undefined,
  };
  const queue = new CompileQueue(sink, { share: 0.5, ruleKey: key, pacing: () => pacing.on, now: () => performance.now() + skew, onError: (r) => void errors.push(key(r)) });
  return { queue, applied, errors };
}

test('before the informers have synced, every upsert applies at once', () => {
  const { queue, applied } = setup({ on: false });
  for (let i = 0; i < 5; i++) queue.upsert(rule('a', `r${i}`));
  assert.deepEqual(applied, ['a/r0@1', 'a/r1@1', 'a/r2@1', 'a/r3@1', 'a/r4@1']);
  assert.equal(queue.waiting, 0);
});

test('after sync: the first upsert applies at once, the rest wait their turn, namespaces alternate', async () => {
  const { queue, applied } = setup({ on: true });
  queue.upsert(rule('a', 'a1'));
  assert.deepEqual(applied, ['a/a1@1'], 'an upsert after idle time is in force at once');
  for (let i = 2; i <= 5; i++) queue.upsert(rule('a', `a${i}`));
  queue.upsert(rule('b', 'b1'));
  queue.upsert(rule('', 'c1'));
  assert.equal(queue.waiting, 6);
  assert.deepEqual(queue.waitingByNamespace(), { a: 4, b: 1, '': 1 });
  await until('all applied', 10_000, () => applied.length === 7);
  assert.deepEqual(applied, ['a/a1@1', 'a/a2@1', 'b/b1@1', '/c1@1', 'a/a3@1', 'a/a4@1', 'a/a5@1']);
  assert.equal(queue.waiting, 0);
});

test('an update while waiting keeps the place with the latest version; a delete drops it; a throw is reported and the rest go on', async () => {
  const { queue, applied, errors } = setup({ on: true });
  queue.upsert(rule('a', 'first'));
  queue.upsert(rule('a', 'x'));
  queue.upsert(rule('a', 'throws'));
  queue.upsert(rule('a', 'y'));
  queue.upsert(rule('a', 'gone'));
  queue.upsert(rule('a', 'x', 2));
  queue.remove('a/gone');
  assert.equal(queue.waiting, 3);
  await until('all applied', 10_000, () => applied.length === 4);
  assert.deepEqual(applied, ['a/first@1', '-a/gone', 'a/x@2', 'a/y@1']);
  assert.deepEqual(errors, ['a/throws']);
});

test('close applies what waits at once', () => {
  const { queue, applied } = setup({ on: true });
  for (let i = 0; i < 4; i++) queue.upsert(rule('a', `r${i}`));
  assert.equal(queue.waiting, 3);
  queue.close();
  assert.deepEqual(applied, ['a/r0@1', 'a/r1@1', 'a/r2@1', 'a/r3@1']);
  queue.upsert(rule('a', 'after'));
  assert.equal(applied.at(-1), 'a/after@1', 'a closed queue no longer paces');
});
