/**
 * The shape of a policy report (wgpolicyk8s v1alpha2 and OpenReports share it,
 * docs/design.md §10.2): what report.ts builds and report-compare.ts compares.
 */
import type { Verdict } from './types.ts';

export interface ObjectReference {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  /** Absent for manifests evaluated offline that were never created. */
  uid?: string;
}

export interface ReportResult {
  policy: string;
  rule: string;
  category?: string;
  severity: string;
  result: Verdict;
  message: string;
  timestamp: { seconds: number; nanos: number };
  scored: boolean;
  source?: string;
  resources?: ObjectReference[];
  properties: Record<string, string>;
}

export type ReportSummary = Record<Verdict, number>;

export interface ReportLimits {
  maxResults: number;
  statusFilter: Verdict[];
}

export interface Report {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string }>;
    resourceVersion?: string;
    [key: string]: unknown;
  };
  scope?: ObjectReference;
  /** OpenReports only. */
  source?: string;
  /** OpenReports only. */
  configuration?: { limits: ReportLimits };
  summary: ReportSummary;
  results: ReportResult[];
}

/** Where a report lives: kind, namespace ("" for cluster reports) and name. */
