/**
 * Field ownership (metadata.managedFields) as kube-apiserver's
 * structured-merge-diff keeps it, for the shapes the embedded server knows:
 * maps by field (`f:name`), lists of objects with a merge key (containers by
 * name, ports, env, conditions …) by key (`k:{"name":"app"}`), other lists
 * atomic (owned whole). One entry per (manager, operation, subresource).
 *
 * - create / update / patch: the request's manager (fieldManager, else the
 *   User-Agent's program name) takes every field it set or changed; other
 *   managers lose the fields whose value changed.
 * - apply: a field the applied configuration sets to a value other than the
 *   live one, owned by another manager, is a conflict (409 with kube's
 *   message) unless forced, which takes the ownership away; fields the
 *   manager applied before and no longer applies are removed from the object
 *   unless another manager owns them (pruning).
 */
import { mergeKeyFor } from './patch.ts';
import { ApiError } from './status.ts';
import { isPlainObject, jsonEqual, nowTimestamp, type Obj } from './types.ts';

type Path = string[];
const SEP = '\u0000';

/** Fields never tracked (identity and server-owned metadata). */
const SKIP_META = new Set(['name', 'namespace', 'uid', 'resourceVersion', 'generation', 'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'managedFields', 'selfLink']);

const SAME = 0;
const DIFFERS = 1;
const ABSENT = 2;
type Change = typeof SAME | typeof DIFFERS | typeof ABSENT;

/**
 * The tracked paths of `n` (SEP-joined FieldsV1 elements), each with how it
 * compares to the same path in `o`: one walk of both objects, keyed list items
 * matched through a map, so a write costs O(size of the object).
 */
export function comparePaths(n: unknown, o: unknown, prefix = '', parents: string[] = [], out = new Map<string, Change>()): Map<string, Change> {
  if (!isPlainObject(n)) return out;
  const old = isPlainObject(o) ? o : undefined;
  for (const k of Object.keys(n)) {
    const v = n[k];
    if (v === undefined) continue;
    if (prefix === '' && (k === 'apiVersion' || k === 'kind')) continue;
    if (prefix === 'f:metadata' && SKIP_META.has(k)) continue;
    const ov = old?.[k];
    const p = prefix ? `${prefix}${SEP}f:${k}` : `f:${k}`;
    if (Array.isArray(v)) {
      const key = mergeKeyFor(k, parents);
      if (key && v.length > 0 && v.every(isPlainObject)) {
        const index = new Map<string, Obj>();
        if (Array.isArray(ov)) for (const x of ov) if (isPlainObject(x)) index.set(JSON.stringify(x[key]), x);
        const inner = [...parents, k];
        for (const item of v as Obj[]) {
          const kv = JSON.stringify(item[key]);
          const ip = `${p}${SEP}k:{${JSON.stringify(key)}:${kv}}`;
          const oi = index.get(kv);
          out.set(ip, oi === undefined ? ABSENT : SAME);
          comparePaths(item, oi, ip, inner, out);
        }
        continue;
      }
      out.set(p, ov === undefined ? ABSENT : jsonEqual(v, ov) ? SAME : DIFFERS); // atomic list
      continue;
    }
    if (isPlainObject(v) && Object.keys(v).length > 0) {
      comparePaths(v, ov, p, [...parents, k], out);
      continue;
    }
    out.set(p, ov === undefined ? ABSENT : jsonEqual(v, ov) ? SAME : DIFFERS);
  }
  return out;
}

/** The value at `path` in `o` (undefined when absent). */
export function valueAt(o: unknown, path: Path): unknown {
  let cur: unknown = o;
  for (const el of path) {
    if (el.startsWith('f:')) {
      if (!isPlainObject(cur)) return undefined;
      cur = cur[el.slice(2)];
    } else if (el.startsWith('k:')) {
      if (!Array.isArray(cur)) return undefined;
      const want = JSON.parse(el.slice(2)) as Obj;
      const [k, v] = Object.entries(want)[0]!;
      cur = cur.find((x) => isPlainObject(x) && jsonEqual(x[k], v));
    } else return undefined;
  }
  return cur;
}

/** Removes the value at `path` from `o` (a keyed list item is spliced out). */
function removeAt(o: unknown, path: Path): void {
  if (path.length === 0) return;
  const parent = valueAt(o, path.slice(0, -1));
  const last = path[path.length - 1]!;
  if (last.startsWith('f:') && isPlainObject(parent)) delete parent[last.slice(2)];
  else if (last.startsWith('k:') && Array.isArray(parent)) {
    const [k, v] = Object.entries(JSON.parse(last.slice(2)) as Obj)[0]!;
    const i = parent.findIndex((x) => isPlainObject(x) && jsonEqual(x[k], v));
    if (i >= 0) parent.splice(i, 1);
  }
}

function toFieldsV1(paths: Iterable<string>): Obj {
  const root: Obj = {};
  for (const sp of paths) {
    const path = sp.split(SEP);
    let node = root;
    for (const el of path) node = (node[el] ??= {}) as Obj;
    if (path[path.length - 1]!.startsWith('k:')) node['.'] = {};
  }
  return root;
}

function fromFieldsV1(f: unknown, path: Path = [], out: string[] = []): string[] {
  if (!isPlainObject(f)) return out;
  const keys = Object.keys(f).filter((k) => k !== '.');
  if ((keys.length === 0 || Object.hasOwn(f, '.')) && path.length > 0) out.push(path.join(SEP));
  for (const k of keys) fromFieldsV1(f[k], [...path, k], out);
  return out;
}

interface Entry { manager: string; operation: 'Apply' | 'Update'; apiVersion: string; subresource: string; time: string; fields: Set<string> }

/** Parsed field sets of the managedFields arrays this module wrote (stored objects are never mutated in place). */
const parsed = new WeakMap<object, Entry[]>();

function readEntries(mf: unknown): Entry[] {
  if (!Array.isArray(mf)) return [];
  const hit = parsed.get(mf);
  if (hit) return hit.map((e) => ({ ...e, fields: new Set(e.fields) }));
  return mf.filter(isPlainObject).map((e) => ({
    manager: String(e['manager'] ?? ''), operation: e['operation'] === 'Apply' ? 'Apply' : 'Update',
    apiVersion: String(e['apiVersion'] ?? ''), subresource: String(e['subresource'] ?? ''), time: String(e['time'] ?? nowTimestamp()),
    fields: new Set(fromFieldsV1(e['fieldsV1'])),
  }));
}

function writeEntries(entries: Entry[]): Obj[] {
  return entries.filter((e) => e.fields.size > 0).map((e) => ({
    manager: e.manager, operation: e.operation, apiVersion: e.apiVersion, time: e.time, fieldsType: 'FieldsV1',
    fieldsV1: toFieldsV1([...e.fields].sort()), ...(e.subresource ? { subresource: e.subresource } : {}),
  }));
}

/** kube's default manager: the User-Agent's program name ("kubectl/v1.35.0 (…)" → "kubectl"). */
export function managerName(fieldManager: string | null, userAgent: string | undefined): string {
  if (fieldManager) return fieldManager;
  const ua = (userAgent ?? '').split('/')[0]!.trim();
  return ua || 'unknown';
}

export interface Write {
  manager: string;
  apiVersion: string;
  subresource: string;
  /** For apply: the applied configuration and whether --force-conflicts was given. */
  apply?: { config: Obj; force: boolean };
}

function display(sp: string): string {
  return sp.split(SEP).map((el) => (el.startsWith('f:') ? `.${el.slice(2)}` : `[${el.slice(2).replace(/^\{"?(\w+)"?:/, '$1=').replace(/\}$/, '')}]`)).join('');
}

/**
 * Computes the new managedFields for `next` (taking over `next`, which an
 * apply may prune) given the stored `old` object ('' for a create).
 */
export function track(old: Obj | undefined, next: Obj, w: Write): void {
  const meta = (next['metadata'] ??= {}) as Obj;
  const entries = readEntries(old ? (old['metadata'] as Obj | undefined)?.['managedFields'] : undefined);
  const time = nowTimestamp();
  const operation = w.apply ? 'Apply' : 'Update';
  let mine = entries.find((e) => e.manager === w.manager && e.operation === operation && e.subresource === w.subresource);
  if (!mine) {
    mine = { manager: w.manager, operation, apiVersion: w.apiVersion, subresource: w.subresource, time, fields: new Set() };
    entries.push(mine);
  }
  const others = entries.filter((e) => e !== mine);
  if (w.apply) {
    const applied = comparePaths(w.apply.config, old);
    const conflicts: { manager: string; apiVersion: string; field: string }[] = [];
    for (const [sp, change] of applied) {
      // Only a different live value conflicts (a keyed item's own entry is about existence: never DIFFERS).
      if (change !== DIFFERS) continue;
      for (const e of others) {
        if (!e.fields.has(sp)) continue;
        if (w.apply.force) e.fields.delete(sp);
        else conflicts.push({ manager: e.manager, apiVersion: e.apiVersion, field: display(sp) });
      }
    }
    if (conflicts.length) throw conflictError(conflicts);
    // Pruning: applied before, not now, and nobody else owns it.
    for (const sp of mine.fields) {
      if (applied.has(sp)) continue;
      if (others.some((e) => e.fields.has(sp))) continue;
      removeAt(next, sp.split(SEP));
    }
    mine.fields = new Set(applied.keys());
  } else {
    const now = comparePaths(next, old);
    for (const [sp, change] of now) {
      if (change === SAME) continue;
      mine.fields.add(sp);
      for (const e of others) e.fields.delete(sp);
    }
    for (const e of entries) for (const sp of e.fields) if (!now.has(sp)) e.fields.delete(sp);
  }
  mine.time = time;
  mine.apiVersion = w.apiVersion;
  const written = writeEntries(entries);
  parsed.set(written, entries.filter((e) => e.fields.size > 0));
  if (written.length) meta['managedFields'] = written;
  else delete meta['managedFields'];
}

function conflictError(conflicts: { manager: string; apiVersion: string; field: string }[]): ApiError {
  const n = conflicts.length;
  let message: string;
  if (n === 1) {
    const c = conflicts[0]!;
    message = `Apply failed with 1 conflict: conflict with "${c.manager}" using ${c.apiVersion}: ${c.field}`;
  } else {
    const byManager = new Map<string, string[]>();
    for (const c of conflicts) {
      const k = `"${c.manager}" using ${c.apiVersion}`;
      byManager.set(k, [...(byManager.get(k) ?? []), c.field]);
    }
    message = `Apply failed with ${n} conflicts: ` + [...byManager].map(([k, fields]) =>
      fields.length === 1 ? `conflict with ${k}: ${fields[0]!}` : `conflicts with ${k}:\n${fields.map((f) => `- ${f}`).join('\n')}`).join('\n');
  }
  return new ApiError(409, 'Conflict', message, {
    causes: conflicts.map((c) => ({ reason: 'FieldManagerConflict', message: `conflict with "${c.manager}" using ${c.apiVersion}`, field: c.field })),
  });
}
