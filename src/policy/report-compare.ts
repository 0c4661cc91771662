/**
 * Whether two reports (or two results) say the same thing (report.ts): what
 * decides that the audit writes a report, so a new leader rewrites nothing
 * its predecessor wrote and a timestamp or epoch alone is never a change.
 */
import { CURRENT_AS_OF_ANNOTATION, MANAGED_BY_LABEL } from './report-api.ts';
import type { Report, ReportResult } from './report-shape.ts';

export function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function withoutVolatile(properties: Record<string, string> | undefined): Record<string, string> {
  const { epoch: _epoch, ...rest } = properties ?? {};
  return rest;
}

export function resultContentEqual(a: ReportResult, b: ReportResult): boolean {
  return canonical({ ...a, timestamp: null, properties: withoutVolatile(a.properties) }) === canonical({ ...b, timestamp: null, properties: withoutVolatile(b.properties) });
}

const OWN_PREFIX = 'reports.portal.dev/';

/** The labels or annotations Portal owns (others, set by users or tools, are not Portal's content). */
function own(map: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(map ?? {})) if (k === MANAGED_BY_LABEL || (k.startsWith(OWN_PREFIX) && k !== CURRENT_AS_OF_ANNOTATION)) out[k] = v;
  return out;
}

/**
 * True when `a` and `b` say the same thing: same kind, place, Portal's labels
 * and annotations, owner, scope, source, limits, summary and results,
 * ignoring timestamps, the epoch property, how current the report says it
 * is (CURRENT_AS_OF_ANNOTATION) and server-set metadata. A stored
 * report (from the API, with extra metadata and reordered keys) compares
 * equal to a freshly built one.
 */
export function reportContentEqual(a: Report | undefined, b: Report | undefined): boolean {
  if (!a || !b) return a === b;
  return canonical(contentOf(a)) === canonical(contentOf(b));
}

function contentOf(r: Report): unknown {
  return {
    apiVersion: r.apiVersion,
    kind: r.kind,
    name: r.metadata?.name,
    namespace: r.metadata?.namespace ?? '',
    labels: own(r.metadata?.labels),
    annotations: own(r.metadata?.annotations),
    owners: (r.metadata?.ownerReferences ?? []).map((o) => ({ apiVersion: o.apiVersion, kind: o.kind, name: o.name, uid: o.uid })),
    scope: r.scope,
    source: r.source,
    configuration: r.configuration,
    summary: r.summary,
    results: (r.results ?? []).map((x) => ({ ...x, timestamp: null, properties: withoutVolatile(x.properties) })),
  };
}

/** JSON with sorted object keys, so key order (which the API server may change) never matters. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      return Object.fromEntries(Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined).sort(([x], [y]) => compare(x, y)));
    }
    return v;
  });
}
