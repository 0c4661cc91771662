/**
 * The four PATCH content types of kube-apiserver, applied to plain JSON.
 * Strategic merge and server-side apply use a fixed table of list merge keys
 * (the `patchMergeKey` tags of the built-in Go types we serve); server-side
 * apply is approximated by a strategic merge of the applied configuration.
 */
import { ApiError, errors } from './status.ts';
import { clone, isPlainObject, type Obj } from './types.ts';

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return clone(patch);
  const out: Obj = isPlainObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function unescapePointer(seg: string): string {
  return seg.replace(/~1/g, '/').replace(/~0/g, '~');
}

function parsePointer(p: unknown): string[] {
  if (typeof p !== 'string') throw new Error('path must be a string');
  if (p === '') return [];
  if (!p.startsWith('/')) throw new Error(`invalid JSON pointer "${p}"`);
  return p.slice(1).split('/').map(unescapePointer);
}

function getAt(doc: unknown, path: string[]): unknown {
  let cur = doc;
  for (const seg of path) {
    if (Array.isArray(cur)) {
      const i = Number(seg);
      if (!/^\d+$/.test(seg) || i >= cur.length) throw new Error(`array index "${seg}" out of bounds`);
      cur = cur[i];
    } else if (isPlainObject(cur)) {
      if (!Object.hasOwn(cur, seg)) throw new Error(`missing key "${seg}"`);
      cur = cur[seg];
    } else throw new Error(`cannot traverse "${seg}"`);
  }
  return cur;
}

function parentOf(doc: unknown, path: string[]): { parent: unknown; key: string } {
  if (path.length === 0) throw new Error('operation on document root is not supported');
  return { parent: getAt(doc, path.slice(0, -1)), key: path[path.length - 1]! };
}

function addAt(doc: unknown, path: string[], value: unknown): unknown {
  if (path.length === 0) return value;
  const { parent, key } = parentOf(doc, path);
  if (Array.isArray(parent)) {
    const i = key === '-' ? parent.length : Number(key);
    if (!/^(\d+|-)$/.test(key) || i > parent.length) throw new Error(`array index "${key}" out of bounds`);
    parent.splice(i, 0, value);
  } else if (isPlainObject(parent)) parent[key] = value;
  else throw new Error(`cannot add at "${key}": parent is not a container`);
  return doc;
}

function removeAt(doc: unknown, path: string[]): unknown {
  const { parent, key } = parentOf(doc, path);
  const old = getAt(doc, path);
  if (Array.isArray(parent)) parent.splice(Number(key), 1);
  else delete (parent as Obj)[key];
  return old;
}

/** RFC 6902 JSON patch. A non-array body is 400, a failing operation 422 (as kube-apiserver). */
export function jsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) {
    throw errors.badRequest('json: cannot unmarshal object into Go value of type jsonpatch.Patch');
  }
  let doc = clone(target);
  for (const op of ops) {
    try {
      if (!isPlainObject(op)) throw new Error('operation must be an object');
      const path = parsePointer(op['path']);
      switch (op['op']) {
        case 'add': doc = addAt(doc, path, clone(op['value'])); break;
        case 'remove': removeAt(doc, path); break;
        case 'replace':
          getAt(doc, path);
          if (path.length === 0) doc = clone(op['value']);
          else { const { parent, key } = parentOf(doc, path); (parent as Obj)[Array.isArray(parent) ? Number(key) : key] = clone(op['value']); }
          break;
        case 'move': { const v = removeAt(doc, parsePointer(op['from'])); doc = addAt(doc, path, v); break; }
        case 'copy': doc = addAt(doc, path, clone(getAt(doc, parsePointer(op['from'])))); break;
        case 'test':
          if (JSON.stringify(getAt(doc, path)) !== JSON.stringify(op['value'])) throw new Error(`testing value ${String(op['path'])} failed`);
          break;
        default: throw new Error(`unexpected operation "${String(op['op'])}"`);
      }
    } catch (e) {
      if (e instanceof ApiError) throw e;
      throw new ApiError(422, 'Invalid', `the server rejected our request due to an error in our request: ${(e as Error).message}`);
    }
  }
  return doc;
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
