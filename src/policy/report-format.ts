/**
 * Output formats of `portal test` (DESIGN §6): a JSON array of results, an
 * aligned table with a summary line, and `wgpolicyk8s.io/v1alpha2`
 * PolicyReports (FACTS.md), one per resource. Pure functions: no I/O, so the
 * audit can build its reports with the same code.
 */
import { stringify } from 'yaml';
import type { RuleVerdict, Severity, Verdict } from './types.ts';

export const OUTPUT_FORMATS = ['table', 'json', 'policyreport'] as const;
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

/** One line of `portal test --output json`: the DESIGN §6 fields, plus `exception` on exempted rows. */
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

export interface PolicyReportResult {
  policy: string;
  rule: string;
  category?: string;
  severity: Severity;
  result: Verdict;
  scored: boolean;
  message: string;
  source: string;
  timestamp: { seconds: number; nanos: number };
  resources: ObjectReference[];
  /** `exception: namespace/name` when a PortalException exempted the object (as the audit's reports). */
  properties?: Record<string, string>;
}

export interface ObjectReference {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  uid?: string;
}

export interface PolicyReport {
  apiVersion: 'wgpolicyk8s.io/v1alpha2';
  kind: 'PolicyReport' | 'ClusterPolicyReport';
  metadata: { name: string; namespace?: string; labels: Record<string, string> };
  scope: ObjectReference;
  summary: Summary;
  results: PolicyReportResult[];
}

/** Longest object name Kubernetes accepts (a DNS subdomain). */
const MAX_NAME_LENGTH = 253;

/**
 * The report's name: the resource's UID when it has one (DESIGN §5: one report
 * per resource, named after its UID), else `<kind>-<name>` made DNS-safe, as
 * for manifests evaluated offline that were never created.
 */
export function reportName(resource: ResourceRef): string {
  if (resource.uid) return resource.uid;
  const raw = `${resource.kind}-${resource.name}`.toLowerCase().replace(/[^a-z0-9.-]+/g, '-');
  return raw.slice(0, MAX_NAME_LENGTH).replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '') || 'resource';
}

/** A PolicyReport (namespaced resources) or ClusterPolicyReport (cluster-scoped ones). */
export function buildPolicyReport(evaluated: EvaluatedResource, now: Date): PolicyReport {
  const { resource, verdicts } = evaluated;
  const scope: ObjectReference = { apiVersion: resource.apiVersion, kind: resource.kind, name: resource.name };
  if (resource.namespace) scope.namespace = resource.namespace;
  if (resource.uid) scope.uid = resource.uid;
  const ms = now.getTime();
  const timestamp = { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1_000_000 };
  const results = verdicts.map((v): PolicyReportResult => {
    const r: PolicyReportResult = {
      // One Portal rule is one policy with a single rule, so both carry its
      // name; a VAP's result names the binding as the rule (DESIGN §8).
      policy: v.rule,
      rule: v.reportRule ?? v.rule,
      severity: v.severity,
      result: v.result,
      scored: true,
      message: v.message,
      source: 'portal',
      timestamp,
      resources: [scope],
    };
    if (v.category) r.category = v.category;
    if (v.exception !== undefined) r.properties = { exception: v.exception };
    return r;
  });
  const metadata: PolicyReport['metadata'] = {
    name: reportName(resource),
    labels: { 'app.kubernetes.io/managed-by': 'portal' },
  };
  if (resource.namespace) metadata.namespace = resource.namespace;
  return {
    apiVersion: 'wgpolicyk8s.io/v1alpha2',
    kind: resource.namespace ? 'PolicyReport' : 'ClusterPolicyReport',
    metadata,
    scope,
    summary: summarize(verdicts),
    results,
  };
}

/**
 * A multi-document YAML stream of reports, ready for `kubectl apply -f -`.
 * Without anchors or aliases: results of one report share objects (the
 * resource reference, timestamps), which `yaml` would otherwise write once
 * with `&a1` and refer to as `*a1`, and many YAML consumers reject or
 * mishandle aliases.
 */
export function formatPolicyReports(evaluated: readonly EvaluatedResource[], now: Date): string {
  return evaluated.map((e) => `---\n${stringify(buildPolicyReport(e, now), { lineWidth: 0, aliasDuplicateObjects: false })}`).join('');
}
