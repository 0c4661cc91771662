/**
 * OpenAPI documents: an index at /openapi/v3 and, per group-version, the
 * operations carrying the `fieldValidation` query parameter (kubectl reads
 * them to learn that the server validates fields itself) and the component
 * schemas of every kind served there, with `x-kubernetes-group-version-kind`
 * (what `kubectl explain` and kubectl's strategic merge patch read). The
 * schemas come from openapi/model.ts; /openapi/v2 in JSON carries the same
 * schemas as `definitions`.
 */
import { createHash } from 'node:crypto';
import { REF_PREFIX } from './openapi/builtin.ts';
import { encodeOpenapiV2 } from './openapi/v2-protobuf.ts';
import { closure, typeModel } from './openapi/model.ts';
import { groupVersion, type Registry, type ResourceDef } from './registry.ts';
import type { Obj } from './types.ts';

/** The component schemas of `defs`' kinds and everything they reference. */
function schemasFor(defs: readonly ResourceDef[]): Obj {
  const out: Obj = {};
  for (const d of defs) {
    const model = typeModel(d);
    if (!model) continue;
    for (const n of closure([model.name], model.components)) out[n] ??= model.components.get(n);
  }
  return out;
}

/**
 * Documents are rebuilt only when the served resources change (a CRD is
 * created, updated or deleted replaces its defs): kubectl fetches the index
 * on most commands, and building every document costs tens of milliseconds.
 */
const memo = new WeakMap<Registry, { defs: readonly ResourceDef[]; docs: Map<string, unknown> }>();

function cached<T>(reg: Registry, key: string, build: () => T): T {
  const defs = reg.all();
  let m = memo.get(reg);
  if (!m || m.defs.length !== defs.length || m.defs.some((d, i) => d !== defs[i])) {
    m = { defs: [...defs], docs: new Map() };
    memo.set(reg, m);
  }
  if (!m.docs.has(key)) m.docs.set(key, build());
  return m.docs.get(key) as T;
}

function gvPath(group: string, version: string): string {
  return group ? `apis/${group}/${version}` : `api/${version}`;
}

export function openapiV3Doc(reg: Registry, group: string, version: string): Obj | undefined {
  return cached(reg, `v3:${group}/${version}`, () => buildV3Doc(reg, group, version));
}

function buildV3Doc(reg: Registry, group: string, version: string): Obj | undefined {
  const defs = reg.all().filter((d) => d.group === group && d.version === version);
  if (defs.length === 0) return undefined;
  const paths: Obj = {};
  for (const d of defs) {
    const base = `/${gvPath(group, version)}${d.namespaced ? '/namespaces/{namespace}' : ''}/${d.resource}/{name}`;
    const gvk = { group, version, kind: d.kind };
    const op = (verb: string): Obj => ({
      operationId: `${verb}${d.kind}`,
      'x-kubernetes-action': verb,
      'x-kubernetes-group-version-kind': gvk,
      parameters: ['dryRun', 'fieldManager', 'fieldValidation'].map((name) => ({ name, in: 'query', schema: { type: 'string', uniqueItems: true } })),
      responses: { '200': { description: 'OK' } },
    });
    paths[base] = { get: op('get'), put: op('put'), patch: op('patch'), delete: op('delete') };
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: 'v1.35.0' }, paths, components: { schemas: schemasFor(defs) } };
}

export function openapiV3Index(reg: Registry): Obj {
  return cached(reg, 'v3', () => buildV3Index(reg));
}

function buildV3Index(reg: Registry): Obj {
  const paths: Obj = {};
  const seen = new Set<string>();
  for (const d of reg.all()) {
    const key = groupVersion(d);
    if (seen.has(key)) continue;
    seen.add(key);
    const doc = JSON.stringify(openapiV3Doc(reg, d.group, d.version));
    const hash = createHash('sha512').update(doc).digest('hex').slice(0, 64).toUpperCase();
    paths[gvPath(d.group, d.version)] = { serverRelativeURL: `/openapi/v3/${gvPath(d.group, d.version)}?hash=${hash}` };
  }
  return { paths };
}

/** What kube-openapi answers with (the '@' of the Accept value is not legal in a response media type). */
export const OPENAPI_V2_CONTENT_TYPE = 'application/com.github.proto-openapi.spec.v2.v1.0+protobuf';

/** /openapi/v2 as JSON: every served kind's schema under `definitions`. */
export function openapiV2Json(reg: Registry): Obj {
  return cached(reg, 'v2', () => buildV2Json(reg));
}

function buildV2Json(reg: Registry): Obj {
  const defs = schemasFor(reg.all());
  const text = JSON.stringify(defs).split(`"${REF_PREFIX}`).join('"#/definitions/');
  return { swagger: '2.0', info: { title: 'Kubernetes', version: 'v1.35.0' }, paths: {}, definitions: JSON.parse(text) as Obj };
}

/**
 * GET /openapi/v2 as kubectl asks for it (gnostic openapi_v2.Document in
 * protobuf), with the same definitions as the JSON form.
 */
export function openapiV2Protobuf(reg: Registry): Buffer {
  return cached(reg, 'v2pb', () => encodeOpenapiV2(openapiV2Json(reg)));
}
