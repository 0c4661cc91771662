// Kept here: merge patch, as json-merge-patch 1.0.2 mutates the target, shares the patch's arrays with the result and stops silently at a `__proto__` key; strategic merge, which no library knows our types for.
/**
 * The four PATCH content types of kube-apiserver, applied to plain JSON.
 * Strategic merge and server-side apply use a fixed table of list merge keys
 * (the `patchMergeKey` tags of the built-in Go types we serve); server-side
 * apply is approximated by a strategic merge of the applied configuration.
 */
import { ApiError, errors } from './status.ts';
import YAML from 'yaml';
import type { ResourceDef } from './registry.ts';
import { clone, isPlainObject, type Obj } from './types.ts';
import fastJsonPatch, { type Operation } from 'fast-json-patch';

/** RFC 7396 JSON merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return clone(patch);
  const out: Obj = isPlainObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    // A `__proto__` key stays a plain field (as in Go) instead of setting the prototype.
    else Object.defineProperty(out, k, { value: mergePatch(out[k], v), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/**
 * RFC 6902 JSON patch (fast-json-patch). A non-array body is 400, a failing
 * operation 422, as kube-apiserver (evanphx/json-patch) answers; removing the
 * document itself is refused there too. The library's own message carries the
 * whole document, so only its first line goes into ours.
 */
export function jsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) {
    throw errors.badRequest('json: cannot unmarshal object into Go value of type jsonpatch.Patch');
  }
  const invalid = (index: number, why: string): ApiError =>
    new ApiError(422, 'Invalid', `the server rejected our request due to an error in our request: operation ${index}: ${why}`);
  ops.forEach((op: unknown, i) => {
    if (isPlainObject(op) && (op['path'] === '' && op['op'] === 'remove' || op['from'] === '' && op['op'] === 'move')) throw invalid(i, 'operation on document root is not supported');
  });
  try {
    return fastJsonPatch.applyPatch(clone(target), ops as Operation[], true, true).newDocument;
  } catch (e) {
    const index = e instanceof fastJsonPatch.JsonPatchError ? (e.index ?? 0) : 0;
    const op = (ops[index] ?? {}) as Obj;
    throw invalid(index, `${String(op['op'])} ${JSON.stringify(op['path'])}: ${(e as Error).message.split('\n')[0]}`);
  }
}

/**
 * patchMergeKey of list fields by field name (k8s.io/api types). `ports` is
 * keyed by containerPort inside containers and by port in a Service.
 */
const MERGE_KEYS: Record<string, string> = {
  containers: 'name', initContainers: 'name', ephemeralContainers: 'name', volumes: 'name',
  volumeMounts: 'mountPath', volumeDevices: 'devicePath', env: 'name', imagePullSecrets: 'name',
  conditions: 'type', ownerReferences: 'uid', hostAliases: 'ip', resourceClaims: 'name',
  topologySpreadConstraints: 'topologyKey', secrets: 'name',
};
/** Primitive lists with patchStrategy merge (set union). */
const MERGE_PRIMITIVE = new Set(['finalizers']);

export function mergeKeyFor(field: string, path: string[]): string | undefined {
  if (field === 'ports') return path.some((p) => p.endsWith('ontainers')) ? 'containerPort' : 'port';
  return MERGE_KEYS[field];
}

/** Strategic merge patch (subset: merge keys, $patch replace/delete, $deleteFromPrimitiveList, $setElementOrder, $retainKeys). */
export function strategicMerge(target: unknown, patch: unknown, path: string[] = []): unknown {
  if (!isPlainObject(patch)) return clone(patch);
  if (patch['$patch'] === 'replace') {
    const { $patch: _p, ...rest } = patch;
    return clone(rest);
  }
  if (patch['$patch'] === 'delete') return undefined;
  const out: Obj = isPlainObject(target) ? { ...target } : {};
  const retain = Array.isArray(patch['$retainKeys']) ? (patch['$retainKeys'] as string[]) : undefined;
  if (retain) for (const k of Object.keys(out)) if (!retain.includes(k) && !Object.hasOwn(patch, k)) delete out[k];
  const orders: Record<string, unknown[]> = {};
  for (const [k, v] of Object.entries(patch)) {
    if (k === '$retainKeys' || k === '$patch') continue;
    if (k.startsWith('$setElementOrder/')) { orders[k.slice('$setElementOrder/'.length)] = v as unknown[]; continue; }
    if (k.startsWith('$deleteFromPrimitiveList/')) {
      const field = k.slice('$deleteFromPrimitiveList/'.length);
      const cur = out[field];
      if (Array.isArray(cur) && Array.isArray(v)) out[field] = cur.filter((x) => !v.includes(x));
      continue;
    }
    if (v === null) { delete out[k]; continue; }
    const cur = out[k];
    if (Array.isArray(v)) {
      const key = mergeKeyFor(k, path);
      if (key && v.every(isPlainObject)) out[k] = mergeList(Array.isArray(cur) ? cur : [], v as Obj[], key, [...path, k]);
      else if (MERGE_PRIMITIVE.has(k)) out[k] = [...new Set([...(Array.isArray(cur) ? cur : []), ...v])];
      else out[k] = clone(v);
      continue;
    }
    const merged = strategicMerge(cur, v, [...path, k]);
    if (merged === undefined) delete out[k];
    else out[k] = merged;
  }
  for (const [field, order] of Object.entries(orders)) {
    const cur = out[field];
    if (!Array.isArray(cur)) continue;
    const key = mergeKeyFor(field, path);
    const id = (x: unknown): unknown => (key && isPlainObject(x) ? x[key] : x);
    const pos = new Map(order.map((o, i) => [JSON.stringify(id(o)), i]));
    out[field] = [...cur].sort((a, b) => (pos.get(JSON.stringify(id(a))) ?? 1e9) - (pos.get(JSON.stringify(id(b))) ?? 1e9));
  }
  return out;
}

function mergeList(cur: unknown[], patch: Obj[], key: string, path: string[]): unknown[] {
  if (patch.some((p) => p['$patch'] === 'replace')) return patch.filter((p) => p['$patch'] !== 'replace').map((p) => clone(p));
  const out = cur.map((x) => clone(x));
  for (const p of patch) {
    const idx = out.findIndex((x) => isPlainObject(x) && x[key] === p[key]);
    if (p['$patch'] === 'delete') {
      if (idx >= 0) out.splice(idx, 1);
      continue;
    }
    if (idx >= 0) out[idx] = strategicMerge(out[idx], p, path);
    else out.push(strategicMerge({}, p, path));
  }
  return out;
}

/** A PATCH body: YAML for server-side apply, JSON for the others (400 when it does not parse). */
export function decodePatchBody(type: string, raw: string): unknown {
  try {
    return type === 'application/apply-patch+yaml' ? YAML.parse(raw) : JSON.parse(raw);
  } catch (e) {
    throw errors.badRequest(`error decoding patch: ${(e as Error).message}`);
  }
}

/** `existing` patched by a merge, JSON or strategic merge patch (415 for another type, or strategic merge on a custom resource). */
export function applyPatchBody(type: string, contentType: string, def: ResourceDef, existing: Obj, patchBody: unknown): unknown {
  switch (type) {
    case 'application/merge-patch+json':
      if (!isPlainObject(patchBody)) throw errors.badRequest('error decoding patch: merge patch must be a JSON object');
      return mergePatch(clone(existing), patchBody);
    case 'application/json-patch+json':
      return jsonPatch(existing, patchBody);
    case 'application/strategic-merge-patch+json':
      if (!def.builtin) throw errors.unsupportedMediaType(contentType);
      if (!isPlainObject(patchBody)) throw errors.badRequest('error decoding patch: strategic merge patch must be a JSON object');
      return strategicMerge(clone(existing), patchBody);
    default:
      throw errors.unsupportedMediaType(contentType);
  }
}
