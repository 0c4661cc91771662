/**
 * metadata.managedFields as kube-apiserver's field manager keeps them:
 * Update entries record what each writer changed, Apply entries what each
 * applier applied; an apply that changes a field another manager owns is a
 * 409 unless forced (then ownership moves); fields an applier stops
 * applying are removed when nobody else owns them. Pure over the
 * fieldset module; the clock is a parameter.
 */
import { ApiError } from '../status.ts';
import { isPlainObject, jsonEqual, type Obj } from '../types.ts';
import {
  decodeFieldsV1, encodeFieldsV1, members, mergeApplied, pathString, removePath,
  type Member, type PathKey, type SchemaNav,
} from './fieldset.ts';

export interface ManagedEntry {
  manager: string;
  operation: 'Apply' | 'Update';
  apiVersion: string;
  time: string;
  fieldsType: 'FieldsV1';
  fieldsV1: Obj;
  subresource?: string;
}

/** `dirty`: the set changed, so fieldsV1 must be encoded again (a new time alone keeps the encoding). */
interface State { entry: ManagedEntry; set: Set<PathKey>; dirty: boolean }

/** Decoded FieldsV1 by object: stored objects are never mutated, so their entries decode once. */
const decoded = new WeakMap<object, Set<PathKey>>();

function decodeCached(fields: unknown): Set<PathKey> {
  if (!isPlainObject(fields)) return new Set();
  let set = decoded.get(fields);
  if (!set) {
    set = decodeFieldsV1(fields);
    decoded.set(fields, set);
  }
  return new Set(set);
}

export interface Typing { nav: SchemaNav; root: Obj | undefined }

/** The write's context: who, at which version, on which subresource, and when. */
export interface Writer {
  manager: string;
  apiVersion: string;
  subresource: string;
  /** Resource has a status subresource: the main resource does not own status, and vice versa. */
  hasStatus: boolean;
  now: string;
}

/** Fields the field manager never tracks (kube's stripped metadata). */
const STRIPPED_META = new Set(['name', 'namespace', 'creationTimestamp', 'selfLink', 'uid', 'generation', 'managedFields', 'resourceVersion',
  'deletionTimestamp', 'deletionGracePeriodSeconds']);

function tracked(key: PathKey, w: Writer): boolean {
  const cut = key.indexOf('\u0000');
  const first = cut < 0 ? key : key.slice(0, cut);
  if (first === 'f:apiVersion' || first === 'f:kind') return false;
  if (first === 'f:metadata' && cut >= 0) {
    const end = key.indexOf('\u0000', cut + 1);
    if (STRIPPED_META.has(key.slice(cut + 3, end < 0 ? undefined : end))) return false;
  }
  if (!w.hasStatus) return true;
  return w.subresource === 'status' ? first === 'f:status' : first !== 'f:status';
}

/**
 * Tracked members by object and mode. Stored objects are never mutated, so
 * the members of the object a write replaces were usually computed when it
 * was written.
 */
const memberCache = new WeakMap<object, Map<string, Map<PathKey, Member>>>();

function trackedMembers(t: Typing, value: Obj, w: Writer, cache = true): Map<PathKey, Member> {
  const mode = `${w.subresource}|${w.hasStatus}`;
  let byMode = memberCache.get(value);
  const hit = byMode?.get(mode);
  if (hit) return hit;
  const all = members(t.nav, t.root, value);
  for (const k of [...all.keys()]) if (!tracked(k, w)) all.delete(k);
  if (!cache) return all;
  if (!byMode) memberCache.set(value, (byMode = new Map()));
  byMode.set(mode, all);
  return all;
}

function readEntries(obj: Obj): State[] {
  const m = isPlainObject(obj['metadata']) ? obj['metadata'] : {};
  return readList(Array.isArray(m['managedFields']) ? m['managedFields'] : []);
}

function readList(list: readonly unknown[]): State[] {
  return list.filter(isPlainObject).map((e) => ({ entry: e as unknown as ManagedEntry, set: decodeCached(e['fieldsV1']), dirty: false }));
}

function sameManager(e: ManagedEntry, manager: string, operation: string, subresource: string): boolean {
  return e.manager === manager && e.operation === operation && (e.subresource ?? '') === subresource;
}

function writeEntries(states: State[]): ManagedEntry[] {
  return states.filter((s) => s.set.size > 0).map((s) => (s.dirty ? { ...s.entry, fieldsV1: encodeFieldsV1(s.set) } : s.entry));
}

/** Paths of `next` that are new or whose leaf value differs from `prev` (structured-merge-diff's Added + Modified). */
function changed(prev: Map<PathKey, Member>, next: Map<PathKey, Member>): Set<PathKey> {
  const out = new Set<PathKey>();
  for (const [k, m] of next) {
    const p = prev.get(k);
    if (!p || (m.leaf && !jsonEqual(p.value, m.value))) out.add(k);
  }
  return out;
}

function entryFor(states: State[], w: Writer, operation: 'Apply' | 'Update'): State {
  let st = states.find((s) => sameManager(s.entry, w.manager, operation, w.subresource));
  if (!st) {
    const entry: ManagedEntry = { manager: w.manager, operation, apiVersion: w.apiVersion, time: w.now, fieldsType: 'FieldsV1', fieldsV1: {} };
    if (w.subresource) entry.subresource = w.subresource;
    st = { entry, set: new Set(), dirty: true };
    states.push(st);
  }
  st.entry = { ...st.entry, apiVersion: w.apiVersion, time: w.now };
  return st;
}

/** managedFields after a create/update/non-apply patch from `old` (undefined on create) to `next`; `sent`: the managedFields in the request's object. */
export function recordUpdate(t: Typing, old: Obj | undefined, next: Obj, w: Writer, sent?: readonly unknown[]): ManagedEntry[] {
  // managedFields the writer sent replace the stored ones (kubectl's client-side to
  // server-side apply migration does this; `[{}]` clears them), as in kube.
  const states = sent && sent.length > 0 ? readList(sent) : old ? readEntries(old) : [];
  const before = old ? trackedMembers(t, old, w) : new Map<PathKey, Member>();
  const after = trackedMembers(t, next, w);
  const mine = changed(before, after);
  const removed = [...before.keys()].filter((k) => !after.has(k));
  if (mine.size === 0 && removed.length === 0) return writeEntries(states);
  const me = entryFor(states, w, 'Update');
  for (const s of states) {
    if (s !== me) for (const k of mine) if (s.set.delete(k)) s.dirty = true;
    for (const k of removed) if (s.set.delete(k)) s.dirty = true;
  }
  for (const k of mine) {
    if (me.set.has(k)) continue;
    me.set.add(k);
    me.dirty = true;
  }
  return writeEntries(states);
}

export interface ApplyResult { object: Obj; managedFields: ManagedEntry[] }

/**
 * Server-side apply of `config` onto `live` (undefined: the object does not
 * exist yet). Throws kube's 409 on conflicts unless `force`.
 */
export function recordApply(t: Typing, live: Obj | undefined, config: Obj, w: Writer, force: boolean): ApplyResult {
  const states = live ? readEntries(live) : [];
  const applied = new Map([...trackedMembers(t, config, w)].filter(([, m]) => !m.container));
  const merged = (live ? mergeApplied(t.nav, t.root, live, config) : structuredClone(config)) as Obj;
  // `merged` is pruned below: its members must not be cached.
  const diff = changed(live ? trackedMembers(t, live, w) : new Map(), trackedMembers(t, merged, w, false));
  const conflicts: { manager: ManagedEntry; path: PathKey }[] = [];
  for (const s of states) {
    if (sameManager(s.entry, w.manager, 'Apply', w.subresource)) continue;
    for (const k of s.set) if (diff.has(k)) conflicts.push({ manager: s.entry, path: k });
  }
  if (conflicts.length && !force) throw conflictError(conflicts);
  for (const c of conflicts) {
    const owner = states.find((s) => s.entry === c.manager);
    if (owner?.set.delete(c.path)) owner.dirty = true;
  }
  const me = entryFor(states, w, 'Apply');
  const previous = me.set;
  me.set = new Set(applied.keys());
  if (me.set.size !== previous.size || [...me.set].some((k) => !previous.has(k))) me.dirty = true;
  const ownedByOthers = new Set<PathKey>();
  for (const s of states) if (s !== me) for (const k of s.set) ownedByOthers.add(k);
  // A dropped container whose children someone still owns stays (structured-merge-diff
  // removes it and adds the owned items back). Deepest first, so removing an item
  // never shifts a path still to be removed.
  const owned = [...me.set, ...ownedByOthers];
  const drop = [...previous]
    .filter((k) => !me.set.has(k) && !ownedByOthers.has(k) && !owned.some((o) => o.startsWith(`${k}\u0000`)))
    .sort((a, b) => b.length - a.length);
  for (const k of drop) removePath(t.nav, t.root, merged, k);
  return { object: merged, managedFields: writeEntries(states) };
}

/** How kube-apiserver names a manager in a conflict (Update managers with their API version). */
function printManager(e: ManagedEntry): string {
  let s = JSON.stringify(e.manager);
  if (e.subresource) s += ` with subresource ${JSON.stringify(e.subresource)}`;
  if (e.operation === 'Update') s += ` using ${e.apiVersion}`;
  return s;
}

function conflictError(conflicts: { manager: ManagedEntry; path: PathKey }[]): ApiError {
  const causes = conflicts.map((c) => ({ reason: 'FieldManagerConflict', message: `conflict with ${printManager(c.manager)}`, field: pathString(c.path) }));
  let message: string;
  if (conflicts.length === 1) {
    message = `Apply failed with 1 conflict: conflict with ${printManager(conflicts[0]!.manager)}: ${pathString(conflicts[0]!.path)}`;
  } else {
    const by = new Map<string, string[]>();
    for (const c of conflicts) {
      const name = printManager(c.manager);
      by.set(name, [...(by.get(name) ?? []), pathString(c.path)]);
    }
    const lines: string[] = [];
    for (const name of [...by.keys()].sort()) {
      lines.push(`conflicts with ${name}:`);
      for (const p of by.get(name)!) lines.push(`- ${p}`);
    }
    message = `Apply failed with ${conflicts.length} conflicts: ${lines.join('\n')}`;
  }
  return new ApiError(409, 'Conflict', message, { causes });
}

/** The default manager of a request without fieldManager: the User-Agent up to its first '/', as kube-apiserver. */
export function managerFromUserAgent(ua: string | undefined): string {
  return (ua ?? '').split('/')[0]!.slice(0, 128);
}
