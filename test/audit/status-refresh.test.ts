/**
 * A rule's status is rewritten when something in it changes, and only to
 * move lastAuditTime at most every AUDIT_TIME_REFRESH_MS (status-writer.ts):
 * every rule change starts a full pass, and every pass used to rewrite the
 * status of every rule it evaluated (one tenant creating 20 rules rewrote
 * the first one 14 times). test/hostile/rule-flood counts the writes on a
 * real `portal dev`.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AUDIT_TIME_REFRESH_MS, sameStatus } from '../../src/audit/status-writer.ts';
import type { RuleStatus } from '../../src/policy/types.ts';

const at = (ms: number): string => new Date(Date.UTC(2026, 10, 29) + ms).toISOString();
const status = (lastAuditTime: string | undefined, violations = 0): RuleStatus => ({
  observedGeneration: 1,
  conditions: [{ type: 'Ready', status: 'True', reason: 'Compiled', message: 'compiled generation 1', lastTransitionTime: at(0), observedGeneration: 1 }],
  violations,
  ...(lastAuditTime !== undefined ? { lastAuditTime } : {}),
});

test('a lastAuditTime moved by less than the refresh period alone is not written', () => {
  assert.equal(AUDIT_TIME_REFRESH_MS, 30_000);
  assert.equal(sameStatus(status(at(0)), status(at(5_000)), AUDIT_TIME_REFRESH_MS), true);
  assert.equal(sameStatus(status(at(0)), status(at(29_999)), AUDIT_TIME_REFRESH_MS), true);
});

test('it is written once the stored one is a refresh period old, the first time, or when going back', () => {
  assert.equal(sameStatus(status(at(0)), status(at(30_000)), AUDIT_TIME_REFRESH_MS), false);
  assert.equal(sameStatus(status(undefined), status(at(1)), AUDIT_TIME_REFRESH_MS), false);
  assert.equal(sameStatus(status(at(10_000)), status(at(0)), AUDIT_TIME_REFRESH_MS), false);
});

test('any other change is written at once, with the newest lastAuditTime', () => {
  assert.equal(sameStatus(status(at(0), 0), status(at(1_000), 1), AUDIT_TIME_REFRESH_MS), false);
  assert.equal(sameStatus(undefined, status(at(0)), AUDIT_TIME_REFRESH_MS), false);
});

test('a refresh period of 0 writes every move (the audit harness)', () => {
  assert.equal(sameStatus(status(at(0)), status(at(1)), 0), false);
  assert.equal(sameStatus(status(at(0)), status(at(0)), 0), true);
});
