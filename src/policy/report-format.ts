/**
 * Output formats of `portal test` (docs/design.md §6): a JSON array of results, an
 * aligned table with a summary line, and reports, one per resource:
 * `wgpolicyk8s.io/v1alpha2` PolicyReports (`policyreport`) or
 * `openreports.io/v1alpha1` Reports (`openreports`), built by the audit's own
 * builder (policy/report.ts). Pure functions: no I/O.
 */
import { stringify } from 'yaml';
import { buildResourceReport } from './report.ts';
import type { ObjectReference } from './report-shape.ts';
import type { ReportApi } from './report-api.ts';
import type { RuleVerdict, Verdict } from './types.ts';

export const OUTPUT_FORMATS = ['table', 'json', 'policyreport', 'openreports'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** The object a verdict is about. `namespace` is "" for cluster-scoped objects. */
export interface ResourceRef {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
}

export interface EvaluatedResource {
  resource: ResourceRef;
  verdicts: readonly RuleVerdict[];
}

/** One line of `portal test --output json`: the docs/design.md §6 fields, plus `exception` on exempted rows. */
export interface TestResult {
  rule: string;
  kind: string;
  namespace: string;
  name: string;
  result: Verdict;
  message: string;
  /** Only on rows a PortalException exempted (result skip): its `namespace/name`. */
  exception?: string;
}

export type Summary = Record<Verdict, number>;

export function summarize(verdicts: Iterable<{ result: Verdict }>): Summary {
  const summary: Summary = { pass: 0, fail: 0, warn: 0, error: 0, skip: 0 };
  for (const v of verdicts) summary[v.result]++;
  return summary;
}

export function toResults(evaluated: readonly EvaluatedResource[]): TestResult[] {
  return evaluated.flatMap(({ resource, verdicts }) =>
    verdicts.map((v) => ({
      rule: v.rule,
      kind: resource.kind,
      namespace: resource.namespace,
      name: resource.name,
      result: v.result,
      message: v.message,
      ...(v.exception !== undefined ? { exception: v.exception } : {}),
    })),
  );
}

export function formatJson(results: readonly TestResult[]): string {
  return `${JSON.stringify(results, null, 2)}\n`;
}

const TABLE_COLUMNS = ['RULE', 'KIND', 'NAMESPACE', 'NAME', 'RESULT', 'MESSAGE'] as const;

/** Aligned columns (the message last, unpadded, on one line) and a summary line. */
export function formatTable(results: readonly TestResult[], counts: { rules: number; policies?: number; resources: number }): string {
  const rows = results.map((r) => [r.rule, r.kind, r.namespace || '-', r.name, r.result, oneLine(r.message)]);
  const widths = TABLE_COLUMNS.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  const s = summarize(results);
  const summary =
    `${plural(counts.resources, 'resource')}, ${plural(counts.rules, 'rule')}` +
    (counts.policies ? `, ${counts.policies} ValidatingAdmissionPolic${counts.policies === 1 ? 'y' : 'ies'}` : '') +
    ': ' +
    `${s.pass} pass, ${s.fail} fail, ${s.warn} warn, ${s.error} error, ${s.skip} skip`;
  const body = rows.length > 0 ? [line(TABLE_COLUMNS), ...rows.map(line)].join('\n') : 'No rule matched any resource.';
  return `${body}\n\n${summary}\n`;
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ');
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** The API of the reports `--output policyreport` and `--output openreports` print. */
const REPORT_OUTPUT_API: Readonly<Record<'policyreport' | 'openreports', ReportApi>> = { policyreport: 'wgpolicyk8s', openreports: 'openreports' };

export function isReportFormat(format: OutputFormat): format is 'policyreport' | 'openreports' {
  return format === 'policyreport' || format === 'openreports';
}

/**
 * A multi-document YAML stream of reports, one per resource, ready for
 * `kubectl apply -f -`: the audit's own builder (policy/report.ts), in the
 * API the format names. Without anchors or aliases: results of one report
 * share objects (the timestamp), which `yaml` would otherwise write once with
 * `&a1` and refer to as `*a1`, and many YAML consumers reject or mishandle
 * aliases.
 */
export function formatReports(evaluated: readonly EvaluatedResource[], now: Date, format: 'policyreport' | 'openreports'): string {
  const api = REPORT_OUTPUT_API[format];
  return evaluated
    .map(({ resource, verdicts }) => {
      const ref: ObjectReference = { apiVersion: resource.apiVersion, kind: resource.kind, name: resource.name };
      if (resource.namespace) ref.namespace = resource.namespace;
      if (resource.uid) ref.uid = resource.uid;
      return buildResourceReport({ ref, verdicts }, { api, now });
    })
    .filter((r) => r !== undefined)
    .map((r) => `---\n${stringify(r, { lineWidth: 0, aliasDuplicateObjects: false })}`)
    .join('');
}
