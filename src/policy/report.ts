/**
 * The one report builder (issue 20): `openreports.io/v1alpha1` Report /
 * ClusterReport or `wgpolicyk8s.io/v1alpha2` PolicyReport /
 * ClusterPolicyReport (docs/design.md §10.2), one per resource or one per namespace plus
 * one for the cluster (adr/0012). The audit writes what it builds, and
 * `portal test --output policyreport|openreports` prints it. Pure: no I/O,
 * injected time.
 *
 * Decisions (docs/reports.md shows the result):
 * - Results are sorted: per resource by policy then rule; per namespace most
 *   important first (result, severity, policy, rule, object), so the first
 *   `maxResults` kept are the ones an operator needs, in an order that does
 *   not depend on evaluation order (a report is byte-stable across passes).
 * - A result's timestamp is when that result last CHANGED: the builder keeps
 *   the previous timestamp for a result whose content is unchanged.
 * - The `epoch` property records the term that last changed a result. An
 *   epoch change alone is not a content change: a new leader does not rewrite
 *   every report after a failover ({@link reportContentEqual} ignores it).
 * - A resource report names its object in `scope`; its results carry no
 *   `resources` (the scope applies, as in Kyverno's per-resource reports). A
 *   namespace report has no scope; each result names its object.
 * - OpenReports carries `source: portal` once per report (a result's source
 *   would override it); wgpolicyk8s has no report-level source, so every
 *   result carries it.
 * - `configuration.limits` (OpenReports) says what the report holds: a
 *   resource report lists every result (all five statuses, as many as it
 *   has); a namespace report lists only `statusFilter` results, at most
 *   `maxResults`. Neither API has a report-level `properties` map (the API
 *   server would prune one), so the number of results left out is the
 *   annotation {@link OMITTED_RESULTS_ANNOTATION}.
 * - Messages are clipped to {@link MAX_MESSAGE_LENGTH} characters: a report
 *   holds up to `maxResults` of them and must stay far below etcd's 1.5 MiB.
 * - The ownerReference of a resource report sets neither `controller` nor
 *   `blockOwnerDeletion`: the report does not control the resource, and
 *   `blockOwnerDeletion: true` would need `update` on the owner's
 *   `finalizers` subresource for every matched kind and would delay the
 *   resource's foreground deletion for the sake of a report.
 */
import { CURRENT_AS_OF_ANNOTATION, MAX_MESSAGE_LENGTH, MANAGED_BY_LABEL, MANAGED_BY_VALUE, NAMESPACE_REPORT_NAME, OBJECTS_ANNOTATION, OMITTED_RESULTS_ANNOTATION, REPORT_API_INFO, REPORT_LABELS, REPORT_SOURCE, VERDICTS, type ReportApi } from './report-api.ts';
import { compare, resultContentEqual } from './report-compare.ts';
import type { ObjectReference, Report, ReportLimits, ReportResult, ReportSummary } from './report-shape.ts';
import type { RuleVerdict, Verdict } from './types.ts';

/** Longest object name Kubernetes accepts (a DNS subdomain). */
const MAX_NAME_LENGTH = 253;

export interface ReportIdentity {
  kind: string;
  namespace: string;
  name: string;
}

export interface BuildOptions {
  api: ReportApi;
  /** Wall-clock time of this evaluation. */
  now: Date;
  /** Epoch string of the leader term writing the report (the audit); offline reports carry none. */
  epoch?: string;
  /** The report currently stored, if any (to keep unchanged results' timestamps and epochs). */
  previous?: Report | undefined;
  /** The audit: every change seen before this time is in the report ({@link CURRENT_AS_OF_ANNOTATION}); offline reports carry none. */
  currentAsOf?: Date | undefined;
}

export interface NamespaceBuildOptions extends BuildOptions {
  limits: ReportLimits;
}

/** The object a report (or a namespace report's result) is about, with its verdicts. */
export interface ReportSubject {
  ref: ObjectReference;
  verdicts: readonly RuleVerdict[];
}

/** The ObjectReference of a live object, or undefined when it lacks what a report needs. */
export function resourceReference(object: { apiVersion?: string; kind?: string; metadata?: { name?: string; namespace?: string; uid?: string } }): (ObjectReference & { uid: string }) | undefined {
  const meta = object.metadata;
  if (!object.apiVersion || !object.kind || !meta?.name || !meta.uid) return undefined;
  const ref: ObjectReference & { uid: string } = { apiVersion: object.apiVersion, kind: object.kind, name: meta.name, uid: meta.uid };
  if (meta.namespace) ref.namespace = meta.namespace;
  return ref;
}

export function reportKind(api: ReportApi, namespace: string): string {
  const info = REPORT_API_INFO[api];
  return namespace ? info.namespaced.kind : info.cluster.kind;
}

/**
 * Name of a resource report: the resource's UID when it has one (unique and
 * stable for the object's lifetime), else `<kind>-<name>` made DNS-safe, for
 * manifests evaluated offline that were never created.
 */
export function resourceReportName(ref: ObjectReference): string {
  if (ref.uid) return ref.uid;
  const raw = `${ref.kind}-${ref.name}`.toLowerCase().replace(/[^a-z0-9.-]+/g, '-');
  return raw.slice(0, MAX_NAME_LENGTH).replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '') || 'resource';
}

/** Where the report of one resource lives (resource granularity). */
export function resourceReportIdentity(api: ReportApi, ref: ObjectReference): ReportIdentity {
  const namespace = ref.namespace ?? '';
  return { kind: reportKind(api, namespace), namespace, name: resourceReportName(ref) };
}

/** Where the report of a namespace ("" = the cluster report) lives (namespace granularity). */
export function namespaceReportIdentity(api: ReportApi, namespace: string): ReportIdentity {
  return { kind: reportKind(api, namespace), namespace, name: NAMESPACE_REPORT_NAME };
}

/** `namespace/name`, or `name` for cluster reports: the key of a report in caches and queues. */
export function reportKey(id: { namespace: string; name: string }): string {
  return id.namespace ? `${id.namespace}/${id.name}` : id.name;
}

/** A valid label value (≤ 63 characters, alphanumeric at both ends), or undefined. */
export function labelValue(value: string): string | undefined {
  return value.length <= 63 && /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(value) ? value : undefined;
}

function timestamp(now: Date): { seconds: number; nanos: number } {
  const ms = now.getTime();
  return { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1_000_000 };
}

export function clipMessage(message: string): string {
  return message.length <= MAX_MESSAGE_LENGTH ? message : `${message.slice(0, MAX_MESSAGE_LENGTH - 1)}…`;
}

export function emptySummary(): ReportSummary {
  return { pass: 0, fail: 0, warn: 0, error: 0, skip: 0 };
}

function refKey(ref: ObjectReference | undefined): string {
  return ref ? (ref.uid ?? `${ref.kind}/${ref.namespace ?? ''}/${ref.name}`) : '';
}

/** Identity of a result within a report: policy, rule and (namespace reports) its object. */
function resultKey(r: { policy: string; rule?: string; resources?: ObjectReference[] }): string {
  return `${r.policy}\u0000${r.rule ?? r.policy}\u0000${refKey(r.resources?.[0])}`;
}

function toResult(v: RuleVerdict, opts: BuildOptions, ts: { seconds: number; nanos: number }, resource: ObjectReference | undefined): ReportResult {
  const properties: Record<string, string> = { enforcement: v.enforcement, ruleKind: v.ruleKind };
  if (opts.epoch !== undefined) properties['epoch'] = opts.epoch;
  // An exempted object: `skip`, naming the PortalException `namespace/name` (issue 18, adr/0014).
  if (v.exception !== undefined) properties['exception'] = v.exception;
  const result: ReportResult = {
    // One Portal rule is one policy with one rule, so both carry its name; a VAP's result names its binding as the rule (docs/design.md §8).
    policy: v.rule,
    rule: v.reportRule ?? v.rule,
    severity: v.severity,
    result: v.result,
    message: clipMessage(v.message),
    timestamp: ts,
    // Every Portal rule counts toward compliance; "scored: false" is for informational checks.
    scored: true,
    properties,
  };
  if (v.category) result.category = v.category;
  // OpenReports names the source once per report; wgpolicyk8s has no report-level source.
  if (opts.api === 'wgpolicyk8s') result.source = REPORT_SOURCE;
  if (resource) result.resources = [resource];
  return result;
}

/** Keeps the previous timestamp and epoch of every result whose content did not change. */
function keepUnchanged(results: ReportResult[], previous: Report | undefined): void {
  if (!previous?.results?.length) return;
  const byKey = new Map(previous.results.map((r) => [resultKey(r), r] as const));
  for (const r of results) {
    const prev = byKey.get(resultKey(r));
    if (!prev || !resultContentEqual(prev, r)) continue;
    r.timestamp = prev.timestamp;
    // The epoch says who changed the content last, so it stays with the unchanged result.
    if (prev.properties?.['epoch'] !== undefined) r.properties['epoch'] = prev.properties['epoch'];
  }
}

const byPolicyThenRule = (a: ReportResult, b: ReportResult): number => compare(a.policy, b.policy) || compare(a.rule, b.rule);


/**
 * Whether a verdict is a report result: every one but a `skip` that no
 * PortalException gave. Such a skip says the rule does not apply to the
 * object (its namespaces, operations, selectors or a false matchCondition
 * leave it out): a report neither lists nor counts it, so SKIP counts
 * exemptions only, and a rule matching one namespace adds nothing to the
 * reports of the others.
 */
export function isReported(v: RuleVerdict): boolean {
  return v.result !== 'skip' || v.exception !== undefined;
}

/**
 * The report of one resource given its verdicts (one per rule or binding
 * that matched), or `undefined` when nothing applies to it (no report; the
 * audit deletes a stored one).
 */
export function buildResourceReport(subject: ReportSubject, opts: BuildOptions): Report | undefined {
  const verdicts = subject.verdicts.filter(isReported);
  if (verdicts.length === 0) return undefined;
  const { ref } = subject;
  const id = resourceReportIdentity(opts.api, ref);
  const ts = timestamp(opts.now);
  const summary = emptySummary();
  const results = verdicts.map((v) => {
    summary[v.result]++;
    return toResult(v, opts, ts, undefined);
  });
  results.sort(byPolicyThenRule);
  keepUnchanged(results, opts.previous);
  const labels: Record<string, string> = { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [REPORT_LABELS.granularity]: 'resource' };
  const kind = labelValue(ref.kind);
  if (kind) labels[REPORT_LABELS.kind] = kind;
  const name = labelValue(ref.name);
  if (name) labels[REPORT_LABELS.name] = name;
  if (ref.uid && labelValue(ref.uid)) labels[REPORT_LABELS.uid] = ref.uid;
  const metadata: Report['metadata'] = { name: id.name, labels };
  if (id.namespace) metadata.namespace = id.namespace;
  if (ref.uid) metadata.ownerReferences = [{ apiVersion: ref.apiVersion, kind: ref.kind, name: ref.name, uid: ref.uid }];
  if (opts.currentAsOf) metadata.annotations = { [CURRENT_AS_OF_ANNOTATION]: opts.currentAsOf.toISOString() };
  const scope: ObjectReference = { apiVersion: ref.apiVersion, kind: ref.kind, name: ref.name };
  if (ref.namespace) scope.namespace = ref.namespace;
  if (ref.uid) scope.uid = ref.uid;
  return assemble(opts.api, id, metadata, scope, { maxResults: results.length, statusFilter: [...VERDICTS] }, summary, results);
}

const RESULT_RANK: Readonly<Record<Verdict, number>> = { fail: 0, error: 1, warn: 2, skip: 3, pass: 4 };
const SEVERITY_RANK: Readonly<Record<string, number>> = { critical: 0, high: 1, medium: 2, low: 3, info: 4 };

function mostImportantFirst(a: ReportResult, b: ReportResult): number {
  const ra = a.resources?.[0];
  const rb = b.resources?.[0];
  return (
    RESULT_RANK[a.result] - RESULT_RANK[b.result] ||
    (SEVERITY_RANK[a.severity] ?? 5) - (SEVERITY_RANK[b.severity] ?? 5) ||
    byPolicyThenRule(a, b) ||
    compare(ra?.kind ?? '', rb?.kind ?? '') ||
    compare(ra?.name ?? '', rb?.name ?? '') ||
    compare(ra?.uid ?? '', rb?.uid ?? '')
  );
}

/**
 * The report of one namespace ("" = the cluster report, for cluster-scoped
 * objects): the summary counts every reported verdict ({@link isReported})
 * of every subject; the results list only those in `limits.statusFilter`,
 * at most `limits.maxResults`, most important first. `undefined` when no
 * subject has a reported verdict.
 */
export function buildNamespaceReport(namespace: string, subjects: Iterable<ReportSubject>, opts: NamespaceBuildOptions): Report | undefined {
  const id = namespaceReportIdentity(opts.api, namespace);
  const ts = timestamp(opts.now);
  const summary = emptySummary();
  const wanted = new Set(opts.limits.statusFilter);
  const listed: ReportResult[] = [];
  let total = 0;
  let objects = 0;
  for (const { ref, verdicts } of subjects) {
    if (verdicts.length > 0) objects++;
    for (const v of verdicts) {
      if (!isReported(v)) continue;
      total++;
      summary[v.result]++;
      if (!wanted.has(v.result)) continue;
      const resource: ObjectReference = { apiVersion: ref.apiVersion, kind: ref.kind, name: ref.name };
      if (ref.namespace) resource.namespace = ref.namespace;
      if (ref.uid) resource.uid = ref.uid;
      listed.push(toResult(v, opts, ts, resource));
    }
  }
  if (total === 0) return undefined;
  listed.sort(mostImportantFirst);
  const max = Math.max(0, Math.floor(opts.limits.maxResults));
  const results = listed.length > max ? listed.slice(0, max) : listed;
  keepUnchanged(results, opts.previous);
  const labels: Record<string, string> = { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [REPORT_LABELS.granularity]: 'namespace' };
  if (namespace) labels[REPORT_LABELS.namespace] = namespace;
  const metadata: Report['metadata'] = { name: id.name, labels };
  if (namespace) metadata.namespace = namespace;
  const omitted = listed.length - results.length;
  const annotations: Record<string, string> = { [OBJECTS_ANNOTATION]: String(objects) };
  if (omitted > 0) annotations[OMITTED_RESULTS_ANNOTATION] = String(omitted);
  if (opts.currentAsOf) annotations[CURRENT_AS_OF_ANNOTATION] = opts.currentAsOf.toISOString();
  metadata.annotations = annotations;
  const filter = VERDICTS.filter((v) => wanted.has(v));
  return assemble(opts.api, id, metadata, undefined, { maxResults: max, statusFilter: filter }, summary, results);
}

function assemble(api: ReportApi, id: ReportIdentity, metadata: Report['metadata'], scope: ObjectReference | undefined, limits: ReportLimits, summary: ReportSummary, results: ReportResult[]): Report {
  const report: Report = { apiVersion: REPORT_API_INFO[api].apiVersion, kind: id.kind, metadata } as Report;
  if (scope) report.scope = scope;
  if (api === 'openreports') {
    report.source = REPORT_SOURCE;
    report.configuration = { limits };
  }
  report.summary = summary;
  report.results = results;
  return report;
}
