/**
 * Denial Events aggregated in memory (issue 33 item 3): the same object,
 * reason and message is one entry whose count grows; the entries are bounded
 * per namespace and in all, and a flood in one namespace evicts only its own.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DenialAggregator, type DenialFact } from '../../src/audit/denial-aggregator.ts';

const fact = (namespace: string, name: string, message = 'rule deny-privileged denied CREATE by alice'): DenialFact => ({
  namespace,
  involvedObject: { apiVersion: 'v1', kind: 'Pod', name, namespace },
  reason: 'PortalDenied',
  message,
});

describe('DenialAggregator', () => {
  it('the same object, reason and message is one entry with a growing count; another message or object is another entry', () => {
    const a = new DenialAggregator();
    const first = a.note(fact('team-a', 'web'));
    for (let i = 0; i < 9; i++) assert.equal(a.note(fact('team-a', 'web')), first);
    assert.equal(first.count, 10);
    assert.notEqual(a.note(fact('team-a', 'web', 'rule deny-privileged denied CREATE by bob')), first);
    assert.notEqual(a.note(fact('team-a', 'api')), first);
    assert.equal(a.size, 3);
    assert.deepEqual([...a.unwritten()].map((g) => [g.namespace, g.entries.length]), [['team-a', 3]]);
    first.written = first.count;
    assert.equal([...a.unwritten()][0]!.entries.length, 2, 'a written count is not written again');
    a.note(fact('team-a', 'web'));
    assert.equal([...a.unwritten()][0]!.entries.length, 3, 'until it grows');
  });

  it('a namespace denied for thousands of objects holds at most its share, evicting its own oldest; others keep theirs', () => {
    const a = new DenialAggregator({ maxEntries: 100, perNamespace: 10 });
    const mine = a.note(fact('team-b', 'web'));
    for (let i = 0; i < 5000; i++) a.note(fact('tenant', `pod-${i}`));
    assert.equal(a.size, 11);
    assert.equal(a.note(fact('team-b', 'web')), mine, "team-b's entry survived the flood");
    assert.equal(mine.count, 2);
    assert.equal(a.evictedUnwritten, 4990, 'the flood evicted its own unwritten entries (counted)');
  });

  it('at the global bound a new namespace evicts from the namespace holding the most', () => {
    const a = new DenialAggregator({ maxEntries: 20, perNamespace: 15 });
    for (let i = 0; i < 15; i++) a.note(fact('big', `p-${i}`));
    for (let i = 0; i < 5; i++) a.note(fact('small', `p-${i}`));
    assert.equal(a.size, 20);
    a.note(fact('new', 'x'));
    assert.equal(a.size, 20);
    const held = new Map([...a.unwritten()].map((g) => [g.namespace, g.entries.length]));
    assert.deepEqual(Object.fromEntries(held), { big: 14, small: 5, new: 1 });
  });

  it('an entry not denied for the window is forgotten once written; a denial after the window starts a new entry', () => {
    let now = 0;
    const a = new DenialAggregator({ forgetMs: 600_000, now: () => now });
    const e = a.note(fact('team-a', 'web'));
    now += 600_000;
    a.sweep();
    assert.equal(a.size, 1, 'an unwritten count is kept until written');
    e.written = e.count;
    a.sweep();
    assert.equal(a.size, 0);
    const again = a.note(fact('team-a', 'web'));
    assert.notEqual(again, e);
    now += 600_000;
    assert.notEqual(a.note(fact('team-a', 'web')), again, 'past the window: a new Event, as client-go starts one');
    assert.equal(a.size, 1);
  });
});
