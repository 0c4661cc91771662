/**
 * Minimal OpenAPI v3 documents: an index at /openapi/v3 and, per
 * group-version, the PATCH operations carrying the `fieldValidation` query
 * parameter and `x-kubernetes-group-version-kind`. That is what kubectl
 * reads to learn that the server validates fields itself (so `--validate`
 * needs no client-side schema); without component schemas kubectl computes
 * strategic merge patches from its compiled-in types, as for any server.
 */
import { createHash } from 'node:crypto';
import { groupVersion, type Registry } from './registry.ts';
import type { Obj } from './types.ts';

function gvPath(group: string, version: string): string {
  return group ? `apis/${group}/${version}` : `api/${version}`;
}

export function openapiV3Doc(reg: Registry, group: string, version: string): Obj | undefined {
  const defs = reg.all().filter((d) => d.group === group && d.version === version);
  if (defs.length === 0) return undefined;
  const paths: Obj = {};
  for (const d of defs) {
    const base = `/${gvPath(group, version)}${d.namespaced ? '/namespaces/{namespace}' : ''}/${d.resource}/{name}`;
    const gvk = [{ group, version, kind: d.kind }];
    const op = (verb: string): Obj => ({
      operationId: `${verb}${d.kind}`,
      'x-kubernetes-action': verb,
      'x-kubernetes-group-version-kind': gvk,
      parameters: ['dryRun', 'fieldManager', 'fieldValidation'].map((name) => ({ name, in: 'query', schema: { type: 'string', uniqueItems: true } })),
      responses: { '200': { description: 'OK' } },
    });
    paths[base] = { get: op('get'), put: op('put'), patch: op('patch'), delete: op('delete') };
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: 'v1.35.0' }, paths, components: { schemas: {} } };
}

export function openapiV3Index(reg: Registry): Obj {
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

function pbString(field: number, s: string | Buffer): Buffer {
  const b = typeof s === 'string' ? Buffer.from(s, 'utf8') : s;
  if (b.length > 127) throw new Error('short protobuf strings only');
  return Buffer.concat([Buffer.from([(field << 3) | 2, b.length]), b]);
}

/**
 * GET /openapi/v2 as kubectl asks for it (gnostic openapi_v2.Document in
 * protobuf): `{swagger: "2.0", info: {title, version}}` and no definitions.
 * kubectl downloads it eagerly for `--validate`; with no definition for a
 * kind it skips client-side validation and relies on the server.
 */
export const OPENAPI_V2_PROTOBUF: Buffer = Buffer.concat([
  pbString(1, '2.0'),
  pbString(2, Buffer.concat([pbString(1, 'Kubernetes'), pbString(2, 'v1.35.0')])),
]);
/** What kube-openapi answers with (the '@' of the Accept value is not legal in a response media type). */
export const OPENAPI_V2_CONTENT_TYPE = 'application/com.github.proto-openapi.spec.v2.v1.0+protobuf';
