/**
 * The report APIs Portal writes (docs/design.md §10.2; adr/0012) and the names, labels
 * and bounds every report shares (report.ts builds them).
 */
import type { Verdict } from './types.ts';

export const REPORT_APIS = ['openreports', 'wgpolicyk8s'] as const;
export type ReportApi = (typeof REPORT_APIS)[number];
export const REPORT_GRANULARITIES = ['resource', 'namespace'] as const;
export type ReportGranularity = (typeof REPORT_GRANULARITIES)[number];
export const VERDICTS: readonly Verdict[] = ['pass', 'fail', 'warn', 'error', 'skip'];

export interface ReportApiInfo {
  api: ReportApi;
  group: string;
  version: string;
  apiVersion: string;
  namespaced: { kind: string; plural: string };
  cluster: { kind: string; plural: string };
}

export const REPORT_API_INFO: Readonly<Record<ReportApi, ReportApiInfo>> = Object.freeze({
  openreports: {
    api: 'openreports',
    group: 'openreports.io',
    version: 'v1alpha1',
    apiVersion: 'openreports.io/v1alpha1',
    namespaced: { kind: 'Report', plural: 'reports' },
    cluster: { kind: 'ClusterReport', plural: 'clusterreports' },
  },
  wgpolicyk8s: {
    api: 'wgpolicyk8s',
    group: 'wgpolicyk8s.io',
    version: 'v1alpha2',
    apiVersion: 'wgpolicyk8s.io/v1alpha2',
    namespaced: { kind: 'PolicyReport', plural: 'policyreports' },
    cluster: { kind: 'ClusterPolicyReport', plural: 'clusterpolicyreports' },
  },
});

export const REPORT_SOURCE = 'portal';
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY_VALUE = 'portal';
/** Labels Portal sets on its reports (docs/reports.md). */
export const REPORT_LABELS = Object.freeze({
  /** `resource` or `namespace`: which granularity wrote the report. */
  granularity: 'reports.portal.dev/granularity',
  /** Resource reports: the object's kind, name (when it is a valid label value) and uid. */
  kind: 'reports.portal.dev/kind',
  name: 'reports.portal.dev/name',
  uid: 'reports.portal.dev/uid',
  /** Namespace reports: the namespace they describe. */
  namespace: 'reports.portal.dev/namespace',
});
/** How many results matching `statusFilter` a namespace report does not list (set only when some are left out). */
export const OMITTED_RESULTS_ANNOTATION = 'reports.portal.dev/omitted-results';
/** How many objects a namespace report's summary counts (each object's verdicts, whatever `statusFilter` lists). */
export const OBJECTS_ANNOTATION = 'reports.portal.dev/objects';
/**
 * How current an audit report is (RFC 3339): every object change the leader
 * had seen before this time is in the report. Set when the report is
 * written; not content (a report is not rewritten for it alone).
 */
export const CURRENT_AS_OF_ANNOTATION = 'reports.portal.dev/current-as-of';
/** The name of a namespace report (in its namespace) and of the cluster report. */
export const NAMESPACE_REPORT_NAME = 'portal';
/**
 * Longest message kept in a report result. The audit's messages name the
 * rule, its message and the first few schema errors (~100-400 characters);
 * 1 KiB keeps them whole while bounding a report of `maxResults` results.
 */
export const MAX_MESSAGE_LENGTH = 1024;
