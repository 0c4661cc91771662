/** Shared shapes of the embedded API server. Objects are plain JSON. */
export type Obj = Record<string, unknown>;

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  managedFields?: unknown[];
  [k: string]: unknown;
}

export interface OwnerReference {
  apiVersion: string; kind: string; name: string; uid: string;
  controller?: boolean; blockOwnerDeletion?: boolean;
}

export function meta(o: Obj): ObjectMeta {
  let m = o['metadata'];
  if (m === null || typeof m !== 'object' || Array.isArray(m)) {
    m = {};
    o['metadata'] = m;
  }
  return m as ObjectMeta;
}

export function isPlainObject(v: unknown): v is Obj {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export function clone<T>(v: T): T {
  return structuredClone(v);
}

/** Deep equality for JSON values (key order ignored). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    return a.every((v, i) => jsonEqual(v, b[i]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    if (ka.length !== kb.length) return false;
    return ka.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
  }
  return false;
}

/** Kube timestamps: RFC 3339 in whole seconds. */
export function nowTimestamp(now = Date.now()): string {
  return new Date(Math.floor(now / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

export interface UserInfo { username: string; uid: string; groups: string[] }
