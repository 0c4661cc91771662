/** The CronJob controller's five-field schedule parser (packages/devcluster/src/controllers/cron.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CronError, lastRun, nextRun, parseCron } from '../../packages/devcluster/src/controllers/cron.ts';

const at = (iso: string): number => Date.parse(iso);
const next = (spec: string, after: string): string => new Date(nextRun(parseCron(spec), at(after))!).toISOString();

test('next run of common schedules (UTC)', () => {
  assert.equal(next('* * * * *', '2026-01-01T10:00:30Z'), '2026-01-01T10:01:00.000Z');
  assert.equal(next('*/15 * * * *', '2026-01-01T10:16:00Z'), '2026-01-01T10:30:00.000Z');
  assert.equal(next('0 3 * * *', '2026-01-01T03:00:00Z'), '2026-01-02T03:00:00.000Z');
  assert.equal(next('30 9 * * mon-fri', '2026-01-02T10:00:00Z'), '2026-01-05T09:30:00.000Z'); // Fri -> Mon
  assert.equal(next('0 0 1 jan,jul *', '2026-02-01T00:00:00Z'), '2026-07-01T00:00:00.000Z');
  assert.equal(next('@hourly', '2026-01-01T10:59:59Z'), '2026-01-01T11:00:00.000Z');
  assert.equal(next('@weekly', '2026-01-01T00:00:00Z'), '2026-01-04T00:00:00.000Z'); // Sunday
  assert.equal(next('0 0 * * 7', '2026-01-01T00:00:00Z'), '2026-01-04T00:00:00.000Z'); // 7 is Sunday too
  assert.equal(next('5-10/5 1 * * *', '2026-01-01T01:05:00Z'), '2026-01-01T01:10:00.000Z');
  // Both day fields restricted: either matches (Jan 13 2026 is a Tuesday, before the 15th).
  assert.equal(next('0 0 15 * tue', '2026-01-10T00:00:00Z'), '2026-01-13T00:00:00.000Z');
  assert.equal(nextRun(parseCron('0 0 30 2 *'), at('2026-01-01T00:00:00Z')), undefined); // Feb 30 never comes
});

// Where croner (which finds the runs) reads the text otherwise than robfig/cron.
test('robfig semantics on top of croner: */1 and ? leave a day field unrestricted, N/step runs to the maximum', () => {
  // `*/1` is robfig's star: day of week unrestricted, so only the 15th (not "15th or every day").
  assert.equal(next('0 0 15 * */1', '2026-01-10T00:00:00Z'), '2026-01-15T00:00:00.000Z');
  assert.equal(next('0 0 15 * ?', '2026-01-10T00:00:00Z'), '2026-01-15T00:00:00.000Z');
  assert.equal(next('0 0 */1 * tue', '2026-01-10T00:00:00Z'), '2026-01-13T00:00:00.000Z'); // Tuesdays only
  // A range that happens to cover the month is still a restriction: either day field matches.
  assert.equal(next('0 0 1-31 * tue', '2026-01-10T00:00:00Z'), '2026-01-11T00:00:00.000Z');
  assert.equal(next('5/20 * * * *', '2026-01-01T10:06:00Z'), '2026-01-01T10:25:00.000Z'); // 5-59/20
  assert.equal(next('0 0 ?/2 * *', '2026-01-02T00:00:00Z'), '2026-01-03T00:00:00.000Z'); // 1,3,5,…
});

test('bad schedules are errors with a reason', () => {
  assert.throws(() => parseCron('* * * *'), (e: unknown) => e instanceof CronError && /expected exactly 5 fields, found 4/.test(e.message));
  assert.throws(() => parseCron('61 * * * *'), (e: unknown) => e instanceof CronError && /minute: 61/.test(e.message));
  assert.throws(() => parseCron('* * * foo *'), /failed to parse int from foo: invalid month/);
  assert.throws(() => parseCron('*/0 * * * *'), /illegal stepping: 0/);
  assert.throws(() => parseCron('5-1 * * * *'), /'5-1'/);
  assert.throws(() => parseCron('CRON_TZ=UTC * * * * *'), /use the timeZone field/);
  // croner's extensions are not robfig's grammar.
  assert.throws(() => parseCron('* * * * * *'), /expected exactly 5 fields, found 6/);
  assert.throws(() => parseCron('0 0 L * *'), /failed to parse int from L: invalid day of month/);
  assert.throws(() => parseCron('0 0 15W * *'), /failed to parse int from 15W/);
  assert.throws(() => parseCron('0 0 * * 5#2'), /failed to parse int from 5#2: invalid day of week/);
  assert.throws(() => parseCron('0 0 * * +mon'), /failed to parse int from \+mon/);
});

test('lastRun is the latest run at or before a time: what stepping with nextRun reaches', () => {
  const window = 40 * 86_400_000; // stepping costs a call per run: compare within 40 days
  for (const spec of ['*/30 * * * *', '*/7 3-5 * * *', '0 0 15 * tue', '30 9 * * mon-fri', '0 0 29 2 *']) {
    const s = parseCron(spec);
    for (const iso of ['2026-03-01T00:00:00Z', '2026-03-01T04:14:00Z', '2026-03-01T04:14:59.999Z', '2026-03-03T09:30:00.500Z', '2028-03-01T00:00:00Z']) {
      const at = Date.parse(iso);
      let stepped: number | undefined;
      for (let n = nextRun(s, at - window); n !== undefined && n <= at; n = nextRun(s, n)) stepped = n;
      const last = lastRun(s, at);
      assert.equal(last !== undefined && last > at - window ? last : undefined, stepped, `${spec} at ${iso}`);
    }
  }
  assert.equal(lastRun(parseCron('0 0 29 2 *'), Date.parse('2026-03-01T00:00:00Z')), Date.parse('2024-02-29T00:00:00Z'));
  assert.equal(lastRun(parseCron('0 0 30 2 *'), Date.parse('2026-01-01T00:00:00Z')), undefined);
});
