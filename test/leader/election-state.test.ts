/**
 * The elector's state machine on a fake clock (issue 10 item 4): client-go's
 * tryAcquireOrRenew rules, observedTime, the fast path and the health check,
 * with no API server and no waiting.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ElectionState, type ElectionClock } from '../../src/leader/election-state.ts';
import type { LeaseRecord, ObservedLease } from '../../src/leader/lease-lock.ts';

function fakeClock(): ElectionClock & { advance(ms: number): void } {
  let t = 1000;
  return { now: () => t, wall: () => new Date(Date.UTC(2026, 0, 1) + t), advance: (ms) => (t += ms) };
}

let rv = 1;
function lease(holder: string, transitions = 3, uid = 'uid-1', durationSeconds = 15): ObservedLease {
  const record: LeaseRecord = { holderIdentity: holder, leaseDurationSeconds: durationSeconds, acquireTime: 'a', renewTime: `r${rv}`, leaseTransitions: transitions };
  return { metadata: { name: 'portal-leader', namespace: 'ns', uid, resourceVersion: String(rv++) }, record };
}

const CONFIG = { identity: 'me', leaseDurationMs: 15_000, healthTimeoutMs: 20_000, retryPeriodMs: 2_000, renewDeadlineMs: 10_000 };

test('no Lease: a campaigner creates it; a leader that finds it gone demotes', () => {
  const s = new ElectionState(CONFIG, fakeClock());
  const create = s.decide(undefined, false);
  assert.equal(create.type, 'create');
  assert.equal(create.type === 'create' && create.record.holderIdentity, 'me');
  assert.equal(create.type === 'create' && create.record.leaseDurationSeconds, 15);
  assert.deepEqual(s.decide(undefined, true), { type: 'lost', reason: 'lease was deleted', heldBy: '' });
});

test('a held Lease is taken over only leaseDuration after its record last changed, as this replica observed it', () => {
  const clock = fakeClock();
  const s = new ElectionState(CONFIG, clock);
  const held = lease('other');
  s.observe(held);
  assert.equal(s.decide(held, false).type, 'wait');
  clock.advance(14_999);
  assert.equal(s.decide(held, false).type, 'wait', 'not one millisecond early');
  // The holder renewed (new record): the wait starts over.
  const renewed = lease('other');
  s.observe(renewed);
  clock.advance(10_000);
  assert.equal(s.decide(renewed, false).type, 'wait');
  // Unchanged record re-read: observedTime does not move.
  s.observe({ ...renewed, metadata: { ...renewed.metadata } });
  clock.advance(5000);
  const d = s.decide(renewed, false);
  assert.equal(d.type, 'update');
  assert.equal(d.type === 'update' && d.record.leaseTransitions, 4, 'a takeover is a new transition (epoch)');
});

test('a released Lease (holder "") is acquired at once; re-acquiring one that still names us is a new epoch', () => {
  const s = new ElectionState(CONFIG, fakeClock());
  const released = lease('');
  s.observe(released);
  const d = s.decide(released, false);
  assert.equal(d.type === 'update' && d.record.leaseTransitions, 4);
  const ours = lease('me', 7);
  s.observe(ours);
  const again = s.decide(ours, false);
  assert.equal(again.type === 'update' && again.record.leaseTransitions, 8);
});

test('renewing keeps acquireTime and transitions; another holder means demote, not retry', () => {
  const clock = fakeClock();
  const s = new ElectionState(CONFIG, clock);
  const ours = lease('me', 5);
  s.succeeded(ours, clock.now());
  const d = s.decide(ours, true);
  assert.equal(d.type, 'update');
  assert.equal(d.type === 'update' && d.record.leaseTransitions, 5);
  assert.equal(d.type === 'update' && d.record.acquireTime, 'a');
  const stolen = lease('thief', 6);
  s.observe(stolen);
  assert.deepEqual(s.decide(stolen, true), { type: 'lost', reason: 'lease changed hands', heldBy: 'thief' });
});

test('fast path: only while we hold a Lease whose record we saw within its duration', () => {
  const clock = fakeClock();
  const s = new ElectionState(CONFIG, clock);
  assert.equal(s.fastRenew(), undefined, 'nothing observed');
  s.succeeded(lease('me', 2), clock.now());
  const fast = s.fastRenew();
  assert.equal(fast?.record.leaseTransitions, 2);
  clock.advance(15_000);
  assert.equal(s.fastRenew(), undefined, 'our view is too old: Get first');
  s.observe(lease('other'));
  assert.equal(s.fastRenew(), undefined, 'not ours');
});

test('an older view (a watch event overtaken by our own write) is ignored; a new Lease uid is always taken', () => {
  const clock = fakeClock();
  const s = new ElectionState(CONFIG, clock);
  const older = lease('other');
  const newer = lease('me');
  s.succeeded(newer, clock.now());
  assert.equal(s.observe(older), false);
  assert.equal(s.holder(), 'me');
  const recreated = { ...older, metadata: { ...older.metadata, uid: 'uid-2' } };
  assert.equal(s.observe(recreated), true);
  assert.equal(s.holder(), 'other');
});

test('health: a leader is wedged once its last renewal is older than leaseDuration + healthTimeout; followers are healthy', () => {
  const clock = fakeClock();
  const s = new ElectionState(CONFIG, clock);
  s.succeeded(lease('me'), clock.now());
  clock.advance(35_000);
  assert.equal(s.healthError(true), undefined);
  clock.advance(1);
  assert.equal(s.healthError(true), 'overdue by 1ms');
  assert.equal(s.healthError(false), undefined);
});

test('the renew deadline is anchored at the last renewal\'s send time, capped at the term\'s validity', () => {
  const clock = fakeClock();
  const s = new ElectionState(CONFIG, clock);
  const sentAt = clock.now();
  clock.advance(300); // the response arrives later than the send
  s.succeeded(lease('me'), sentAt);
  assert.equal(s.lastRenewSentAt, sentAt);
  assert.equal(s.renewDeadline(Number.POSITIVE_INFINITY), sentAt + 2_000 + 10_000, 'R + D after the send, not after the response');
  assert.equal(s.renewDeadline(sentAt + 11_000), sentAt + 11_000, 'never past the term validity');
});

test('a late renew timer does not extend the renew deadline', () => {
  const clock = fakeClock();
  const s = new ElectionState(CONFIG, clock);
  const sentAt = clock.now();
  s.succeeded(lease('me'), sentAt);
  clock.advance(2_000 + 9_500); // the retryPeriod timer fired 9.5 s late
  const deadline = s.renewDeadline(Number.POSITIVE_INFINITY);
  assert.equal(deadline, sentAt + 12_000);
  assert.equal(s.remaining(deadline), 500);
  assert.deepEqual(s.renewFailed({ reason: 'update lease: 500' }, deadline), { type: 'retry', afterMs: 500 }, 'a retry never sleeps past the deadline');
  clock.advance(500);
  assert.equal(s.pastDeadline(deadline), true);
  assert.deepEqual(s.renewFailed({ reason: 'update lease: 500' }, deadline), { type: 'demote', reason: 'failed to renew within renew deadline (update lease: 500)' });
});

test('a renewal that finds another holder demotes at once, even well before the deadline', () => {
  const clock = fakeClock();
  const s = new ElectionState(CONFIG, clock);
  s.succeeded(lease('me'), clock.now());
  const deadline = s.renewDeadline(Number.POSITIVE_INFINITY);
  assert.deepEqual(s.renewFailed({ reason: 'x', heldBy: 'other' }, deadline), { type: 'demote', reason: 'lease is now held by "other"' });
  assert.deepEqual(s.renewFailed({ reason: 'get lease: timeout' }, deadline), { type: 'retry', afterMs: 2_000 });
});

test('release only while the Lease still names us: holder "", 1 s, transitions kept', () => {
  const clock = fakeClock();
  const s = new ElectionState(CONFIG, clock);
  assert.deepEqual(s.decideRelease(lease('other')), { type: 'not-ours', holder: 'other' });
  assert.deepEqual(s.decideRelease(lease('')), { type: 'not-ours', holder: '' }, 'already released');
  const mine = lease('me', 7);
  const d = s.decideRelease(mine);
  assert.equal(d.type, 'release');
  if (d.type !== 'release') return;
  assert.equal(d.base, mine, 'the update is conditional on the record just read');
  assert.equal(d.record.holderIdentity, '');
  assert.equal(d.record.leaseDurationSeconds, 1);
  assert.equal(d.record.leaseTransitions, 7);
  assert.equal(d.record.renewTime, d.record.acquireTime);
});

test('release is retried on a 409 (with a fresh read) until the release deadline, and given up on anything else', () => {
  const clock = fakeClock();
  const s = new ElectionState(CONFIG, clock);
  const deadline = s.releaseDeadline();
  assert.equal(deadline, clock.now() + 10_000, 'bounded by renewDeadline');
  assert.equal(s.releaseFailed(409), 'retry');
  assert.equal(s.releaseFailed(500), 'give-up');
  assert.equal(s.releaseFailed(403), 'give-up');
  assert.equal(s.releaseFailed(undefined), 'give-up', 'a network error or timeout');
  clock.advance(9_999);
  assert.equal(s.pastDeadline(deadline), false);
  clock.advance(1);
  assert.equal(s.pastDeadline(deadline), true);
});
