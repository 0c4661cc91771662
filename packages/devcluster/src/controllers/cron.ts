/**
 * Five-field cron schedules as the CronJob controller reads them
 * (robfig/cron's standard parser): minute hour day-of-month month
 * day-of-week, with `*`, `?`, lists, ranges, steps, month and weekday names,
 * and the @yearly/@annually/@monthly/@weekly/@daily/@midnight/@hourly macros.
 * Times are UTC (the CronJob's timeZone field is not simulated). As in cron,
 * when both day fields are restricted a day matching either one runs.
 */
export interface Schedule {
  minutes: Set<number>; hours: Set<number>; dom: Set<number>; months: Set<number>; dow: Set<number>;
  domStar: boolean; dowStar: boolean;
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
const MACROS: Record<string, string> = {
  '@yearly': '0 0 1 1 *', '@annually': '0 0 1 1 *', '@monthly': '0 0 1 * *', '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *', '@midnight': '0 0 * * *', '@hourly': '0 * * * *',
};

export class CronError extends Error {}

function value(s: string, min: number, max: number, names: string[] | undefined, field: string): number {
  const lower = s.toLowerCase();
  const byName = names?.indexOf(lower) ?? -1;
  const n = byName >= 0 ? byName + min : /^\d+$/.test(s) ? Number(s) : NaN;
  if (!Number.isInteger(n)) throw new CronError(`failed to parse int from ${s}: invalid ${field}`);
  if (n < min || n > max) throw new CronError(`${field} value ${n} out of range [${min}, ${max}]`);
  return n;
}

function field(spec: string, min: number, max: number, names: string[] | undefined, name: string): { set: Set<number>; star: boolean } {
  const set = new Set<number>();
  let star = false;
  for (const part of spec.split(',')) {
    const [range, stepText] = part.split('/') as [string, string | undefined];
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step <= 0) throw new CronError(`invalid step in ${name} field: ${part}`);
    let lo: number;
    let hi: number;
    if (range === '*' || range === '?') {
      lo = min;
      hi = max;
      if (stepText === undefined) star = true;
    } else if (range.includes('-')) {
      const [a, b] = range.split('-') as [string, string];
      lo = value(a, min, max, names, name);
      hi = value(b, min, max, names, name);
      if (lo > hi) throw new CronError(`beginning of range (${lo}) beyond end of range (${hi}): ${part}`);
    } else {
      lo = value(range, min, max, names, name);
      hi = stepText === undefined ? lo : max;
    }
    for (let v = lo; v <= hi; v += step) set.add(v);
  }
  return { set, star };
}

export function parseCron(text: string): Schedule {
  const src = MACROS[text.trim().toLowerCase()] ?? text.trim();
  if (/^(CRON_)?TZ=/.test(src)) throw new CronError('CRON_TZ or TZ used in schedule is not supported, use the timeZone field instead');
  const parts = src.split(/\s+/);
  if (parts.length !== 5) throw new CronError(`expected exactly 5 fields, found ${parts.length}: ${JSON.stringify(text)}`);
  const [mi, h, dom, mo, dow] = parts as [string, string, string, string, string];
  const d = field(dow, 0, 7, DAYS, 'day of week');
  if (d.set.has(7)) {
    d.set.delete(7);
    d.set.add(0);
  }
  const dm = field(dom, 1, 31, undefined, 'day of month');
  return {
    minutes: field(mi, 0, 59, undefined, 'minute').set, hours: field(h, 0, 23, undefined, 'hour').set,
    dom: dm.set, months: field(mo, 1, 12, MONTHS, 'month').set, dow: d.set, domStar: dm.star, dowStar: d.star,
  };
}

function dayMatches(s: Schedule, t: Date): boolean {
  const domOk = s.dom.has(t.getUTCDate());
  const dowOk = s.dow.has(t.getUTCDay());
  if (s.domStar || s.dowStar) return domOk && dowOk;
  return domOk || dowOk;
}

/** The first scheduled time strictly after `after` (ms since epoch), or undefined within 5 years. */
export function nextRun(s: Schedule, after: number): number | undefined {
  const t = new Date(Math.floor(after / 60_000) * 60_000 + 60_000);
  const limit = after + 5 * 366 * 86_400_000;
  while (t.getTime() <= limit) {
    if (!s.months.has(t.getUTCMonth() + 1)) {
      t.setUTCMonth(t.getUTCMonth() + 1, 1);
      t.setUTCHours(0, 0, 0, 0);
      continue;
    }
    if (!dayMatches(s, t)) {
      t.setUTCDate(t.getUTCDate() + 1);
      t.setUTCHours(0, 0, 0, 0);
      continue;
    }
    if (!s.hours.has(t.getUTCHours())) {
      t.setUTCHours(t.getUTCHours() + 1, 0, 0, 0);
      continue;
    }
    if (!s.minutes.has(t.getUTCMinutes())) {
      t.setUTCMinutes(t.getUTCMinutes() + 1, 0, 0);
      continue;
    }
    return t.getTime();
  }
  return undefined;
}
