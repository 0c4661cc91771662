/**
 * A renewal request that hangs is cut off when the renew cycle's deadline
 * passes (client-go: the cycle starts retryPeriod after the last success and
 * gives up renewDeadline later), so a leader whose API calls hang demotes at
 * D + R after its last successful renewal, long before the term backstop.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { apiServer, runElector, until } from './cluster.ts';

// Timings with room between the renew deadline (R + D = 1.4 s after the last
// renewal) and the term backstop (L − 10 % margin = 2.7 s), so a loaded
// machine cannot blur which of the two ended the term.
const LEASE_MS = 3000;
const DEADLINE_MS = 1000;
const RETRY_MS = 400;
const MARGIN_MS = LEASE_MS / 10;
/** Timer and event-loop lateness on a loaded 2-core machine. */
const SLACK_MS = 400;

test('a hanging renewal is bounded: the leader demotes renewDeadline after the renew cycle began', async (t) => {
  const api = await apiServer(t);
  const a = runElector(t, api, 'a', { leaseDurationMs: LEASE_MS, renewDeadlineMs: DEADLINE_MS, retryPeriodMs: RETRY_MS });
  await until('a to lead', 3000, () => a.elector.isLeader());
  const term = a.elector.term()!;
  let lostAt = 0;
  let reason = '';
  a.bus.on('LostLeadership', (e) => {
    lostAt = performance.now();
    reason = e.reason;
  });
  // Every later request of `a` hangs far longer than the lease.
  api.faults.setLatency(10 * LEASE_MS, { user: 'a' });
  t.after(() => api.faults.clear());
  await until('a to demote', 2 * LEASE_MS, () => lostAt > 0);
  // Later requests answer again, so stopping the elector (its release) does
  // not wait out the injected latency.
  api.faults.clear();
  // The term's validity is anchored at the last successful renewal's send time.
  const lastRenewSent = term.validUntil() - (LEASE_MS - MARGIN_MS);
  const sinceRenew = lostAt - lastRenewSent;
  assert.match(reason, /renew deadline/, 'the renew loop gave up (the hanging request was aborted), not the term backstop');
  assert.ok(sinceRenew >= RETRY_MS + DEADLINE_MS, `demoted ${Math.round(sinceRenew)}ms after the last renewal was sent`);
  assert.ok(sinceRenew <= RETRY_MS + DEADLINE_MS + SLACK_MS, `demoted ${Math.round(sinceRenew)}ms after the last renewal was sent`);
  assert.equal(a.elector.isLeader(), false);
});
