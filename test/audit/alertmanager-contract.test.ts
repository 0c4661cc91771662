/**
 * Contract test against a REAL Alertmanager 0.25: what we send is accepted,
 * re-sends keep alerts active, resolution clears them, and an unreachable
 * Alertmanager is retried and reported without throwing.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Registry } from 'prom-client';
import { AlertmanagerClient } from '../../src/audit/alertmanager.ts';
import { alertLabels, decideAlert, firingAlert, resolvedAlert, type ViolationAlert } from '../../src/audit/alert-scheduler.ts';
import { freePort, startAlertmanager, type RunningAlertmanager } from './support/alertmanager.ts';
import { until } from '../support/until.ts';

let am: RunningAlertmanager;
before(async () => {
  am = await startAlertmanager();
});
after(async () => {
  await am?.close();
});

function violation(name: string): ViolationAlert {
  return { rule: 'disallow-privileged', severity: 'high', kind: 'Pod', namespace: 'team-a', name, message: 'Privileged containers are not allowed.', epoch: 'lease-uid/1' };
}


const signal = new AbortController().signal;

void test('firing alerts arrive with our labels and annotations', async () => {
  const registry = new Registry();
  const client = new AlertmanagerClient({ urls: [am.url], registry });
  const now = Date.now();
  const v = violation('fire-1');
  const result = await client.send([firingAlert(v, now, now + 60_000, 'http://portal.example/rules/disallow-privileged')], signal);
  assert.deepEqual(result.outcomes, [{ url: am.url, ok: true, attempts: 1, status: 200 }]);
  assert.equal(result.delivered, true);
  const got = await until('the alert', 10_000, async () => (await am.alerts()).find((a) => a.labels.name === 'fire-1'));
  assert.deepEqual(got.labels, { alertname: 'PortalViolation', rule: 'disallow-privileged', severity: 'high', kind: 'Pod', namespace: 'team-a', name: 'fire-1' });
  assert.equal(got.annotations.message, 'Privileged containers are not allowed.');
  assert.equal(got.annotations.epoch, 'lease-uid/1');
  assert.equal(got.annotations.summary, 'Pod team-a/fire-1 violates disallow-privileged');
  assert.equal(got.status.state, 'active');
  assert.equal(client.health()[0]!.consecutiveFailures, 0);
  assert.ok(client.health()[0]!.lastSuccessAt);
});

void test('a re-send before endsAt keeps the alert active past the first endsAt, with the first startsAt', async () => {
  const client = new AlertmanagerClient({ urls: [am.url] });
  const v = violation('resend-1');
  const t0 = Date.now();
  const firstEndsAt = t0 + 1500;
  await client.send([firingAlert(v, t0, firstEndsAt)], signal);
  await until('the alert', 10_000, async () => (await am.alerts()).find((a) => a.labels.name === 'resend-1'));
  const t1 = Date.now();
  await client.send([firingAlert(v, t1, t1 + 60_000)], signal);
  // Let the first endsAt pass (a wall-clock threshold, not a sleep for ordering), then look.
  await until('the first endsAt to pass', 10_000, async () => (Date.now() > firstEndsAt + 500 ? true : undefined));
  const got = (await am.alerts()).filter((a) => a.labels.name === 'resend-1');
  assert.equal(got.length, 1, 'one alert: Alertmanager deduplicates the label set');
  assert.equal(got[0]!.status.state, 'active');
  assert.equal(Date.parse(got[0]!.startsAt), t0, 'Alertmanager keeps the earliest startsAt');
});

void test('without a re-send the alert expires at endsAt (what the re-send interval protects against)', async () => {
  const client = new AlertmanagerClient({ urls: [am.url] });
  const now = Date.now();
  await client.send([firingAlert(violation('expire-1'), now, now + 1000)], signal);
  await until('the alert', 10_000, async () => (await am.alerts()).find((a) => a.labels.name === 'expire-1'));
  await until('the alert to expire', 10_000, async () => ((await am.alerts()).some((a) => a.labels.name === 'expire-1') ? undefined : true));
});

void test('resolving (endsAt now, same labels) clears the alert from the active list', async () => {
  const client = new AlertmanagerClient({ urls: [am.url] });
  const v = violation('resolve-1');
  const t0 = Date.now();
  await client.send([firingAlert(v, t0, t0 + 3_600_000)], signal);
  await until('the alert', 10_000, async () => (await am.alerts()).find((a) => a.labels.name === 'resolve-1'));
  const result = await client.send([resolvedAlert(v, t0, Date.now())], signal);
  assert.equal(result.delivered, true);
  // Alertmanager 0.25 drops resolved alerts from GET /api/v2/alerts (it keeps them only for notification).
  await until('the alert to disappear', 10_000, async () => ((await am.alerts()).some((a) => a.labels.name === 'resolve-1') ? undefined : true));
});

void test('the scheduler drives fire → wait → re-send → resolve against the real Alertmanager', async () => {
  const client = new AlertmanagerClient({ urls: [am.url] });
  const interval = 60_000;
  const v = violation('sched-1');
  let now = Date.now();
  const first = decideAlert(undefined, true, now, interval);
  assert.equal(first.type, 'fire');
  if (first.type !== 'fire') return;
  assert.equal(first.endsAt - now, 2 * interval);
  await client.send([firingAlert(v, first.startsAt, first.endsAt)], signal);
  const record = { epoch: v.epoch, at: now, state: 'done' as const, until: first.endsAt, startsAt: first.startsAt };
  assert.deepEqual(decideAlert(record, true, now + interval - 1, interval), { type: 'wait', dueAt: now + interval });
  const resend = decideAlert(record, true, now + interval, interval);
  assert.deepEqual(resend, { type: 'fire', startsAt: first.startsAt, endsAt: now + 3 * interval });
  now = Date.now();
  const resolve = decideAlert(record, false, now, interval);
  assert.deepEqual(resolve, { type: 'resolve', startsAt: first.startsAt });
  await client.send([resolvedAlert(v, resolve.type === 'resolve' ? resolve.startsAt : now, now)], signal);
  await until('the alert to disappear', 10_000, async () => ((await am.alerts()).some((a) => a.labels.name === 'sched-1') ? undefined : true));
  assert.deepEqual(decideAlert(undefined, false, now, interval), { type: 'none' });
});

void test('an unreachable Alertmanager is retried with backoff and reported, never thrown', async () => {
  const deadPort = await freePort();
  const dead = `http://127.0.0.1:${deadPort}`;
  const client = new AlertmanagerClient({ urls: [dead, am.url], maxAttempts: 3, baseDelayMs: 20 });
  const now = Date.now();
  const t0 = performance.now();
  const result = await client.send([firingAlert(violation('half-1'), now, now + 60_000)], signal);
  assert.ok(performance.now() - t0 >= 20 + 40, 'backed off between attempts');
  assert.equal(result.delivered, true, 'one Alertmanager accepted it');
  const [down, up] = result.outcomes;
  assert.equal(down!.ok, false);
  assert.equal(down!.attempts, 3);
  assert.match(down!.error!, /ECONNREFUSED|fetch failed/);
  assert.equal(up!.ok, true);
  const health = client.health();
  assert.equal(health[0]!.consecutiveFailures, 1);
  assert.ok(health[0]!.lastError);

  const onlyDead = new AlertmanagerClient({ urls: [dead], maxAttempts: 2, baseDelayMs: 1 });
  const failed = await onlyDead.send([firingAlert(violation('dead-1'), now, now + 60_000)], signal);
  assert.equal(failed.delivered, false);
  assert.equal(failed.outcomes[0]!.attempts, 2);
});

void test('a payload Alertmanager rejects (400) is not retried', async () => {
  const client = new AlertmanagerClient({ urls: [am.url], maxAttempts: 4, baseDelayMs: 1 });
  const now = new Date().toISOString();
  const result = await client.send([{ labels: {}, annotations: {}, startsAt: now, endsAt: now }], signal);
  assert.equal(result.delivered, false);
  assert.equal(result.outcomes[0]!.status, 400);
  assert.equal(result.outcomes[0]!.attempts, 1);
});

void test('an abort rejects the send with the signal reason', async () => {
  const deadPort = await freePort();
  const client = new AlertmanagerClient({ urls: [`http://127.0.0.1:${deadPort}`], maxAttempts: 10, baseDelayMs: 10_000 });
  const ac = new AbortController();
  const now = Date.now();
  const sending = client.send([firingAlert(violation('abort-1'), now, now + 1000)], ac.signal);
  setTimeout(() => ac.abort(new Error('shutting down')), 50);
  await assert.rejects(sending, /shutting down/);
});

void test('labels are exactly the contract set', () => {
  assert.deepEqual(Object.keys(alertLabels(violation('x'))).sort(), ['alertname', 'kind', 'name', 'namespace', 'rule', 'severity']);
});
