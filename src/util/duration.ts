/**
 * Go-style durations (`time.ParseDuration`): a sequence of decimal numbers
 * with units, e.g. `500ms`, `15s`, `1m30s`, `1.5h`. Portal works in
 * milliseconds; sub-millisecond parts are kept as fractions.
 */
const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  'µs': 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};
const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/y;

/** Milliseconds, or `undefined` when `text` is not a Go duration. "0" alone is allowed, as in Go. */
export function parseDuration(text: string): number | undefined {
  if (text === '0') return 0;
  if (text.length === 0) return undefined;
  PART.lastIndex = 0;
  let total = 0;
  let pos = 0;
  while (pos < text.length) {
    PART.lastIndex = pos;
    const m = PART.exec(text);
    if (!m) return undefined;
    total += Number(m[1]) * (UNIT_MS[m[2] as string] as number);
    pos = PART.lastIndex;
  }
  return total;
}

/** Formats milliseconds the way Go prints them (`1h0m0s` style, shortened: `1h`, `1m30s`, `500ms`). */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  let rest = ms;
  let out = '';
  const h = Math.floor(rest / 3_600_000);
  if (h) out += `${h}h`;
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  if (m) out += `${m}m`;
  rest -= m * 60_000;
  if (rest) out += `${rest / 1000}s`;
  return out;
}
