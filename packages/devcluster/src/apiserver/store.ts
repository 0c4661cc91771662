/**
 * In-memory storage with one resourceVersion counter shared by every
 * resource (like etcd's revision), a bounded history of events for watches
 * that resume from a resourceVersion, and synchronous fan-out to watchers.
 */
import { meta, type Obj } from './types.ts';

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreEvent {
  rv: number;
  sk: string;
  type: EventType;
  object: Obj;
  /** The previous state (for MODIFIED/DELETED), used to translate selector transitions. */
  old: Obj | undefined;
  /**
   * Wire lines already encoded for this event, by "TYPE apiVersion": each
   * event is serialised once and the same buffer is written to every watcher.
   */
  wire?: Map<string, Buffer>;
}

export type Listener = (ev: StoreEvent) => void;

export function objKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

export class Store {
  private rv = 0;
  private readonly data = new Map<string, Map<string, Obj>>();
  private readonly uids = new Map<string, { sk: string; key: string }>();
  private readonly history: (StoreEvent | undefined)[];
  private head = 0;
  private size = 0;
  /** Highest resourceVersion no longer in the history: watching from below it is 410. */
  private compacted = 0;
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly anyListeners = new Set<Listener>();

  constructor(historyLimit: number) {
    this.history = new Array<StoreEvent | undefined>(Math.max(1, historyLimit));
  }

  currentRv(): number {
    return this.rv;
  }

  compactedRv(): number {
    return this.compacted;
  }

  bucket(sk: string): Map<string, Obj> {
    let b = this.data.get(sk);
    if (!b) {
      b = new Map();
      this.data.set(sk, b);
    }
    return b;
  }

  get(sk: string, key: string): Obj | undefined {
    return this.data.get(sk)?.get(key);
  }

  byUid(uid: string): Obj | undefined {
    const loc = this.uids.get(uid);
    return loc ? this.get(loc.sk, loc.key) : undefined;
  }

  /** Objects of one resource (optionally one namespace), sorted by key like etcd. */
  list(sk: string, namespace?: string): Obj[] {
    const b = this.data.get(sk);
    if (!b) return [];
    const out: [string, Obj][] = [];
    for (const [k, o] of b) if (namespace === undefined || k.startsWith(`${namespace}/`)) out.push([k, o]);
    out.sort((a, b2) => (a[0] < b2[0] ? -1 : a[0] > b2[0] ? 1 : 0));
    return out.map((e) => e[1]);
  }

  /** Objects of one resource in no particular order, without copying (do not add or remove while iterating). */
  values(sk: string): Iterable<Obj> {
    return this.data.get(sk)?.values() ?? [];
  }

  keys(): string[] {
    return [...this.data.keys()];
  }

  /** Stores `obj` (stamping a new resourceVersion) and notifies watchers. */
  put(sk: string, obj: Obj): Obj {
    const m = meta(obj);
    const key = objKey(m.namespace ?? '', m.name ?? '');
    const b = this.bucket(sk);
    const old = b.get(key);
    this.rv++;
    m.resourceVersion = String(this.rv);
    b.set(key, obj);
    if (m.uid) this.uids.set(m.uid, { sk, key });
    this.emit({ rv: this.rv, sk, type: old ? 'MODIFIED' : 'ADDED', object: obj, old });
    return obj;
  }

  /** Removes an object; the DELETED event carries a new resourceVersion. */
  remove(sk: string, namespace: string, name: string): Obj | undefined {
    const key = objKey(namespace, name);
    const b = this.data.get(sk);
    const old = b?.get(key);
    if (!b || !old) return undefined;
    b.delete(key);
    const m = meta(old);
    if (m.uid) this.uids.delete(m.uid);
    this.rv++;
    const gone: Obj = { ...old, metadata: { ...m, resourceVersion: String(this.rv) } };
    this.emit({ rv: this.rv, sk, type: 'DELETED', object: gone, old });
    return gone;
  }

  dropBucket(sk: string): void {
    this.data.delete(sk);
  }

  private emit(ev: StoreEvent): void {
    const slot = (this.head + this.size) % this.history.length;
    if (this.size === this.history.length) {
      this.compacted = this.history[this.head]!.rv;
      this.head = (this.head + 1) % this.history.length;
    } else this.size++;
    this.history[slot] = ev;
    for (const l of this.listeners.get(ev.sk) ?? []) l(ev);
    for (const l of this.anyListeners) l(ev);
    // The encoded lines only serve this fan-out; a watch replaying history re-encodes.
    delete ev.wire;
  }

  /** Events of `sk` after `rv`, or undefined when `rv` is older than the history (410). */
  since(sk: string, rv: number): StoreEvent[] | undefined {
    if (rv < this.compacted) return undefined;
    const out: StoreEvent[] = [];
    for (let i = 0; i < this.size; i++) {
      const ev = this.history[(this.head + i) % this.history.length]!;
      if (ev.rv > rv && ev.sk === sk) out.push(ev);
    }
    return out;
  }

  subscribe(sk: string | null, l: Listener): () => void {
    if (sk === null) {
      this.anyListeners.add(l);
      return () => this.anyListeners.delete(l);
    }
    let set = this.listeners.get(sk);
    if (!set) {
      set = new Set();
      this.listeners.set(sk, set);
    }
    set.add(l);
    return () => set.delete(l);
  }
}
