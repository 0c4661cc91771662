/**
 * PolicyReport / ClusterPolicyReport (`wgpolicyk8s.io/v1alpha2`) builder and
 * content comparison. Pure: no I/O, injected time.
 *
 * One report per resource (DESIGN §5): named by the resource's UID, in its
 * namespace (ClusterPolicyReport for cluster-scoped resources), labelled
 * `app.kubernetes.io/managed-by: portal`, owned by the resource so that the
 * garbage collector deletes it with the resource.
 *
 * Decisions:
 * - The ownerReference sets neither `controller` nor `blockOwnerDeletion`:
 *   the report does not control the resource, and `blockOwnerDeletion: true`
 *   would need `update` on the owner's `finalizers` subresource for every
 *   matched kind (OwnerReferencesPermissionEnforcement) and would delay the
 *   resource's foreground deletion for the sake of a report.
 * - Results are sorted by policy, so a report is byte-stable across passes.
 * - A result's timestamp is when that result last CHANGED: the builder keeps
 *   the previous timestamp for a result whose content is unchanged.
 * - The `epoch` property records the term that last changed the content. An
 *   epoch change alone is not a content change: a new leader does not rewrite
 *   every report after a failover ({@link reportContentEqual} ignores it).
 */
import type { KubeObject, RuleVerdict, Verdict } from '../policy/types.ts';

export const REPORT_API_VERSION = 'wgpolicyk8s.io/v1alpha2';
export const REPORT_SOURCE = 'portal';
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY_VALUE = 'portal';

export interface ObjectReference {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  uid: string;
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
  source: string;
  resources: ObjectReference[];
  properties: Record<string, string>;
}

export type ReportSummary = Record<Verdict, number>;

export interface PolicyReport {
  apiVersion: typeof REPORT_API_VERSION;
  kind: 'PolicyReport' | 'ClusterPolicyReport';
  metadata: {
    name: string;
    namespace?: string;
    labels: Record<string, string>;
    ownerReferences: Array<{ apiVersion: string; kind: string; name: string; uid: string }>;
    resourceVersion?: string;
    [key: string]: unknown;
  };
  scope: ObjectReference;
  summary: ReportSummary;
  results: ReportResult[];
}

export interface ReportContext {
  /** Epoch string of the leader term writing the report. */
  epoch: string;
  /** Wall-clock time of this evaluation. */
  now: Date;
  /** The report currently stored, if any (to keep unchanged results' timestamps). */
  previous?: PolicyReport | undefined;
}

/** The ObjectReference of a resource, or undefined when it lacks what a report needs. */
export function resourceReference(object: KubeObject): ObjectReference | undefined {
  const meta = object.metadata;
  if (!object.apiVersion || !object.kind || !meta?.name || !meta.uid) return undefined;
  const ref: ObjectReference = { apiVersion: object.apiVersion, kind: object.kind, name: meta.name, uid: meta.uid };
  if (meta.namespace) ref.namespace = meta.namespace;
  return ref;
}

/** Kind and name the report for `ref` has (for reads and deletes without building it). */
export function reportIdentity(ref: ObjectReference): { kind: PolicyReport['kind']; namespace: string; name: string } {
  return ref.namespace ? { kind: 'PolicyReport', namespace: ref.namespace, name: ref.uid } : { kind: 'ClusterPolicyReport', namespace: '', name: ref.uid };
}

function timestamp(now: Date): { seconds: number; nanos: number } {
  const ms = now.getTime();
  return { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1_000_000 };
}

/**
 * The report for `resource` given its verdicts (one per rule that matched),
 * or `undefined` when no rule matched it any more (the caller deletes the
 * stored report).
 */
export function buildPolicyReport(resource: ObjectReference, verdicts: readonly RuleVerdict[], ctx: ReportContext): PolicyReport | undefined {
  if (verdicts.length === 0) return undefined;
  const identity = reportIdentity(resource);
  // Keyed by (policy, rule): a VAP gives one result per binding (DESIGN §8).
  const previousByPolicy = new Map((ctx.previous?.results ?? []).map((r) => [`${r.policy}\u0000${r.rule ?? r.policy}`, r] as const));
  const ts = timestamp(ctx.now);
  const summary: ReportSummary = { pass: 0, fail: 0, warn: 0, error: 0, skip: 0 };
  const results = [...verdicts]
    .sort((a, b) => (a.rule < b.rule ? -1 : a.rule > b.rule ? 1 : 0))
    .map((v): ReportResult => {
      summary[v.result]++;
      const result: ReportResult = {
        policy: v.rule,
        // A VAP's result names its binding as the rule; a Portal rule is one policy with one rule.
        rule: v.reportRule ?? v.rule,
        severity: v.severity,
        result: v.result,
        message: v.message,
        timestamp: ts,
        // Every Portal rule counts toward compliance; "scored: false" is for informational checks.
        scored: true,
        source: REPORT_SOURCE,
        resources: [resource],
        properties: { epoch: ctx.epoch, enforcement: v.enforcement, ruleKind: v.ruleKind },
      };
      // An exempted object: `skip`, naming the PortalException (issue 18).
      if (v.exception !== undefined) result.properties.exception = v.exception;
      if (v.category) result.category = v.category;
      const prev = previousByPolicy.get(`${v.rule}\u0000${v.reportRule ?? v.rule}`);
      if (prev && resultContentEqual(prev, result)) {
        result.timestamp = prev.timestamp;
        // The epoch says who changed the content last, so it stays with the unchanged result.
        if (prev.properties?.epoch !== undefined) result.properties.epoch = prev.properties.epoch;
      }
      return result;
    });
  const metadata: PolicyReport['metadata'] = {
    name: identity.name,
    labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE },
    ownerReferences: [{ apiVersion: resource.apiVersion, kind: resource.kind, name: resource.name, uid: resource.uid }],
  };
  if (identity.namespace) metadata.namespace = identity.namespace;
  return { apiVersion: REPORT_API_VERSION, kind: identity.kind, metadata, scope: resource, summary, results };
}

function withoutVolatile(properties: Record<string, string> | undefined): Record<string, string> {
  const { epoch: _epoch, ...rest } = properties ?? {};
  return rest;
}

function resultContentEqual(a: ReportResult, b: ReportResult): boolean {
  return canonical({ ...a, timestamp: null, properties: withoutVolatile(a.properties) }) === canonical({ ...b, timestamp: null, properties: withoutVolatile(b.properties) });
}

/**
 * True when `a` and `b` say the same thing: same scope, owner, managed-by
 * label, summary and results, ignoring timestamps, the epoch property and
 * server-set metadata. A stored report (from the API, possibly with extra
 * metadata and default-less fields) compares equal to a freshly built one.
 */
export function reportContentEqual(a: PolicyReport | undefined, b: PolicyReport | undefined): boolean {
  if (!a || !b) return a === b;
  return canonical(contentOf(a)) === canonical(contentOf(b));
}

function contentOf(r: PolicyReport): unknown {
  return {
    kind: r.kind,
    name: r.metadata?.name,
    namespace: r.metadata?.namespace ?? '',
    managedBy: r.metadata?.labels?.[MANAGED_BY_LABEL],
    owners: (r.metadata?.ownerReferences ?? []).map((o) => ({ apiVersion: o.apiVersion, kind: o.kind, name: o.name, uid: o.uid })),
    scope: r.scope,
    summary: r.summary,
    results: (r.results ?? []).map((x) => ({ ...x, timestamp: null, properties: withoutVolatile(x.properties) })),
  };
}

/** JSON with sorted object keys, so key order (which the API server may change) never matters. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      return Object.fromEntries(Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)));
    }
    return v;
  });
}
