/**
 * The Prometheus text exposition format, read back: one sample per line
 * with its labels, and the metric families (`# TYPE`) a scrape declares.
 * For tests that assert what a replica's /metrics says.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseExposition(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]!] = l[2]!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The families a scrape declares (`# TYPE name type`). */
export function families(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) out.set(m[1]!, m[2]!);
  return out;
}

/** The value of one series (`name{labels}` exactly as exposed) in a scrape; undefined when absent. */
export function metricValue(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  return undefined;
}

/**
 * How long a replica took to answer the reviews it allowed (its
 * `portal_admission_request_duration_seconds` histogram), in a line: the
 * part of a client's latency that was Portal's, the rest being the API
 * server's.
 */
export async function allowedAnswerTime(probes: string): Promise<string> {
  const text = await (await fetch(`${probes}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
  const value = (series: string): number => metricValue(text, series) ?? 0;
  const count = value('portal_admission_request_duration_seconds_count{decision="allow"}');
  const sum = value('portal_admission_request_duration_seconds_sum{decision="allow"}');
  const upToSecond = value('portal_admission_request_duration_seconds_bucket{le="1",decision="allow"}');
  return `${count} allowed reviews answered by Portal in ${((sum / Math.max(1, count)) * 1000).toFixed(0)} ms on average, ${count - upToSecond} over 1 s`;
}
