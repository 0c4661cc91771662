/**
 * Five-field cron schedules as the CronJob controller reads them
 * (robfig/cron's standard parser): minute hour day-of-month month
 * day-of-week, with `*`, `?`, lists, ranges, steps, month and weekday names,
 * and the @yearly/@annually/@monthly/@weekly/@daily/@midnight/@hourly macros.
 * Times are UTC (the CronJob's timeZone field is not simulated).
 *
 * croner finds the next run; this module first holds the text to robfig's
 * grammar and meaning, where croner is wider or differs:
 * - croner's extensions (`L`, `W`, `#`, `+`, seconds and years) are errors;
 * - `N/step` means `N-max/step`, which croner refuses;
 * - a day field is "unrestricted" in robfig when any of its parts is `*` or
 *   `?` without a step (or with step 1), croner only when it is exactly `*`:
 *   such a field covers every value anyway, so it is written `*`. Then both
 *   agree: when both day fields are restricted a day matching either runs.
 */
import { Cron } from 'croner';

export interface Schedule {
  /** The normalised five fields handed to croner. */
  readonly pattern: string;
  readonly cron: Cron;
}

export class CronError extends Error {}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
const MACROS: Record<string, string> = {
  '@yearly': '0 0 1 1 *', '@annually': '0 0 1 1 *', '@monthly': '0 0 1 * *', '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *', '@midnight': '0 0 * * *', '@hourly': '0 * * * *',
};
/** name, highest value (for `N/step`), names allowed. robfig's weekday range ends at 6; 7 (Sunday) is also read, as before. */
const FIELDS: readonly [string, number, readonly string[]][] = [
  ['minute', 59, []], ['hour', 23, []], ['day of month', 31, []], ['month', 12, MONTHS], ['day of week', 6, DAYS],
];
/** robfig gives up after five years: a schedule that never comes (Feb 30) has no next run. */
const HORIZON_MS = 5 * 366 * 86_400_000;

function normaliseField(text: string, name: string, max: number, names: readonly string[]): string {
  const parts = text.split(',').map((part) => {
    for (const atom of part.split(/[-/]/)) {
      if (!/^(\d+|\*|\?)$/.test(atom) && !names.includes(atom.toLowerCase())) throw new CronError(`failed to parse int from ${atom}: invalid ${name}`);
    }
    const [range, step] = part.split('/') as [string, string | undefined];
    if ((range === '*' || range === '?') && (step === undefined || Number(step) === 1)) return '*';
    if (range === '?') return `*/${step}`;
    return step !== undefined && range !== '*' && !range.includes('-') ? `${range}-${max}/${step}` : part;
  });
  return parts.includes('*') ? '*' : parts.join(',');
}

export function parseCron(text: string): Schedule {
  const src = MACROS[text.trim().toLowerCase()] ?? text.trim();
  if (/^(CRON_)?TZ=/.test(src)) throw new CronError('CRON_TZ or TZ used in schedule is not supported, use the timeZone field instead');
  const fields = src.split(/\s+/);
  if (fields.length !== 5) throw new CronError(`expected exactly 5 fields, found ${fields.length}: ${JSON.stringify(text)}`);
  const pattern = fields.map((f, i) => normaliseField(f, ...(FIELDS[i] as [string, number, readonly string[]]))).join(' ');
  try {
    // utcOffset, not timezone 'UTC': the same times, without Intl's time-zone arithmetic (7x faster a call).
    return { pattern, cron: new Cron(pattern, { utcOffset: 0, mode: '5-part', paused: true }) };
  } catch (e) {
    throw new CronError((e as Error).message.replace(/^CronPattern: /, ''), { cause: e });
  }
}

/** The first scheduled time strictly after `after` (ms since epoch), or undefined within 5 years. */
export function nextRun(s: Schedule, after: number): number | undefined {
  const next = s.cron.nextRun(new Date(after))?.getTime();
  return next !== undefined && next <= after + HORIZON_MS ? next : undefined;
}

/**
 * The latest scheduled time at or before `at` (ms since epoch), or undefined:
 * one search back, where stepping with nextRun from an old time costs a call
 * per missed run.
 */
export function lastRun(s: Schedule, at: number): number | undefined {
  // croner looks strictly before a whole second; runs fall on whole minutes.
  const prev = s.cron.previousRuns(1, new Date(Math.floor(at / 1000) * 1000 + 1000))[0]?.getTime();
  return prev !== undefined && prev <= at && prev >= at - HORIZON_MS ? prev : undefined;
}
