/**
 * The audit ledger (pure part): records of side effects that are not visible
 * on the object itself (alerts, evictions), persisted by the leader in
 * ConfigMaps that every replica watches, so the idempotency store is warm on
 * followers. See idempotency.ts for the protocol (intent → send → done).
 *
 * Layout: 16 ConfigMaps `portal-audit-ledger-<0-f>` in the install
 * namespace, sharded by the first hex digit of the action key. A ConfigMap
 * holds at most 1 MiB; an entry is a 64-character key plus a value of about
 * 110 bytes (`{"s":"done","e":"<36-char uid>/<n>","t":…,"u":…,"st":…}`; evictions
 * add `"id":"<36-char pod uid>"`, ~45 bytes more), ~180 bytes with JSON
 * overhead (~225 for an eviction), so one shard holds ~4,600–5,800 entries and
 * we cap it at {@link LEDGER_MAX_ENTRIES_PER_SHARD} = 4,000 for headroom
 * (≤ 0.9 MB even if every entry were an eviction): 64,000
 * entries overall, enough for the 10,000-object sizing point with every
 * action type. Each write is a merge patch of single data keys, so
 * concurrent workers never overwrite each other's entries. The patch also
 * carries the shard's last-seen resourceVersion (ledger-writer.ts): a write
 * delayed past its term then fails with 409 instead of landing late, and the
 * writer re-reads and retries while it still leads.
 */

/** One action as the ledger and the idempotency store record it. */
export interface EmittedAction {
  /** Epoch string of the term that emitted it. */
  epoch: string;
  /** Wall-clock ms when it was emitted (or the intent was recorded). */
  at: number;
  /** `intent` = about to be sent (treated as sent by successors). */
  state: 'intent' | 'done';
  /** Wall-clock ms when the window ends (alerts: re-send due). */
  until?: number;
  /** Alerts: when the alert first fired (kept across re-sends). */
  startsAt?: number;
  /** Evictions: UID of the pod the intent was for (tells "evicted and re-created" from "never evicted"). */
  uid?: string;
}

export const LEDGER_NAME_PREFIX = 'portal-audit-ledger-';
export const LEDGER_SHARDS = 16;
export const LEDGER_MAX_ENTRIES_PER_SHARD = 4_000;
/** Label on every ledger ConfigMap, so one label-selected informer sees all shards. */
export const LEDGER_LABELS: Readonly<Record<string, string>> = Object.freeze({
  'app.kubernetes.io/managed-by': 'portal',
  'app.kubernetes.io/component': 'audit-ledger',
});

/** Name of the ConfigMap that holds `key`. */
export function ledgerShardName(key: string): string {
  return `${LEDGER_NAME_PREFIX}${(key[0] ?? '0').toLowerCase()}`;
}

export function allLedgerShardNames(): string[] {
  return Array.from({ length: LEDGER_SHARDS }, (_, i) => `${LEDGER_NAME_PREFIX}${i.toString(16)}`);
}

interface Wire {
  s: 'intent' | 'done';
  e: string;
  t: number;
  u?: number;
  st?: number;
  /** Evictions: the pod UID. */
  id?: string;
}

export function encodeLedgerEntry(entry: EmittedAction): string {
  const wire: Wire = { s: entry.state, e: entry.epoch, t: entry.at };
  if (entry.until !== undefined) wire.u = entry.until;
  if (entry.startsAt !== undefined) wire.st = entry.startsAt;
  if (entry.uid !== undefined) wire.id = entry.uid;
  return JSON.stringify(wire);
}

/** `undefined` for anything malformed (a hand-edited ConfigMap must not crash a replica). */
export function decodeLedgerEntry(value: string): EmittedAction | undefined {
  let w: Partial<Wire>;
  try {
    w = JSON.parse(value) as Partial<Wire>;
  } catch {
    return undefined;
  }
  if (typeof w !== 'object' || w === null) return undefined;
  if ((w.s !== 'intent' && w.s !== 'done') || typeof w.e !== 'string' || typeof w.t !== 'number') return undefined;
  const entry: EmittedAction = { state: w.s, epoch: w.e, at: w.t };
  if (typeof w.u === 'number') entry.until = w.u;
  if (typeof w.st === 'number') entry.startsAt = w.st;
  if (typeof w.id === 'string') entry.uid = w.id;
  return entry;
}

/** A JSON merge patch for one shard: set entries, delete keys (null). */
export function ledgerPatch(set: Record<string, EmittedAction>, remove: Iterable<string> = []): { data: Record<string, string | null> } {
  const data: Record<string, string | null> = {};
  for (const key of remove) data[key] = null;
  for (const [key, entry] of Object.entries(set)) data[key] = encodeLedgerEntry(entry);
  return { data };
}

/**
 * Keys to delete from a shard: entries whose window ended (`until`, else
 * `at + defaultTtlMs`) and, above the cap, the oldest ones. Dropping an
 * expired entry changes nothing (it no longer suppresses anything);
 * dropping a live one above the cap can at worst allow one early repeat,
 * which is why the cap sits well below the 1 MiB limit.
 */
export function compactLedger(data: Record<string, string> | undefined, now: number, defaultTtlMs: number, maxEntries = LEDGER_MAX_ENTRIES_PER_SHARD): string[] {
  const remove: string[] = [];
  const live: Array<[string, number]> = [];
  for (const [key, value] of Object.entries(data ?? {})) {
    const entry = decodeLedgerEntry(value);
    const end = entry ? (entry.until ?? entry.at + defaultTtlMs) : -Infinity;
    if (end <= now) remove.push(key);
    else live.push([key, entry!.at]);
  }
  if (live.length > maxEntries) {
    live.sort((a, b) => a[1] - b[1]);
    for (const [key] of live.slice(0, live.length - maxEntries)) remove.push(key);
  }
  return remove;
}
