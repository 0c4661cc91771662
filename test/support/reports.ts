/**
 * Reports in tests: the four report shapes (API × granularity), listing a
 * namespace's (or the cluster's) reports of one API, and validation of a
 * report against the CRD schema of its API as the chart ships it (lax: the
 * schema itself; strict: every object with `properties` closed, since the API
 * server prunes unknown fields silently and a field the schema does not know
 * would vanish from the stored report).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Ajv, type ValidateFunction } from 'ajv';
import { parse } from 'yaml';
import { REPORT_API_INFO, type ReportApi, type ReportGranularity } from '../../src/policy/report-api.ts';
import type { Report } from '../../src/policy/report-shape.ts';

export const REPORT_SHAPES: ReadonlyArray<{ api: ReportApi; granularity: ReportGranularity }> = [
  { api: 'openreports', granularity: 'namespace' },
  { api: 'openreports', granularity: 'resource' },
  { api: 'wgpolicyk8s', granularity: 'namespace' },
  { api: 'wgpolicyk8s', granularity: 'resource' },
];

const crdDir = new URL('../../charts/portal/files/crds/', import.meta.url);

function crdSchema(api: ReportApi, plural: string): object {
  const info = REPORT_API_INFO[api];
  const crd = parse(readFileSync(new URL(`${info.group}_${plural}.yaml`, crdDir), 'utf8')) as { spec: { versions: Array<{ name: string; schema: { openAPIV3Schema: object } }> } };
  return crd.spec.versions.find((v) => v.name === info.version)!.schema.openAPIV3Schema;
}

const validators = new Map<string, { lax: ValidateFunction; strict: ValidateFunction }>();

/** Asserts that `report` is valid against its CRD's schema and that no field of it would be pruned. */
export function assertValidReport(report: unknown): void {
  const r = report as Report;
  const api = (Object.keys(REPORT_API_INFO) as ReportApi[]).find((a) => REPORT_API_INFO[a].apiVersion === r.apiVersion);
  assert.ok(api, `unknown report apiVersion ${r.apiVersion}`);
  const info = REPORT_API_INFO[api];
  const plural = r.kind === info.namespaced.kind ? info.namespaced.plural : r.kind === info.cluster.kind ? info.cluster.plural : undefined;
  assert.ok(plural, `${r.kind} is not a kind of ${r.apiVersion}`);
  const key = `${api}/${plural}`;
  let v = validators.get(key);
  if (!v) {
    const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
    const lax = crdSchema(api, plural);
    const strict = JSON.parse(JSON.stringify(lax), function (this: unknown, _k, value: unknown) {
      if (value && typeof value === 'object' && !Array.isArray(value) && 'properties' in value && !('additionalProperties' in value)) return { ...value, additionalProperties: false };
      return value;
    }) as object;
    v = { lax: ajv.compile(lax), strict: ajv.compile(strict) };
    validators.set(key, v);
  }
  // Server-set metadata is not the schema's business (metadata is `type: object`).
  assert.ok(v.lax(report), `${r.kind} ${r.metadata?.name}: ${JSON.stringify(v.lax.errors)}`);
  assert.ok(v.strict(report), `${r.kind} ${r.metadata?.name}: a field would be pruned: ${JSON.stringify(v.strict.errors)}`);
}

/** Something that can GET a path of the API server (DevApiClient). */
export interface Getter {
  request(method: 'GET', path: string): Promise<{ status: number; body: unknown }>;
}

/** The reports of `api` in `namespace` ("" = the cluster reports). */
export async function listReports(client: Getter, api: ReportApi, namespace: string): Promise<Report[]> {
  const info = REPORT_API_INFO[api];
  const path = namespace ? `/apis/${info.group}/${info.version}/namespaces/${namespace}/${info.namespaced.plural}` : `/apis/${info.group}/${info.version}/${info.cluster.plural}`;
  const res = await client.request('GET', path);
  if (res.status === 404) return [];
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return (res.body as { items: Report[] }).items;
}
