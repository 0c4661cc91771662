/**
 * The garbage collector controller's part of kube-apiserver's world: objects
 * whose owners are gone are deleted in the background (Background
 * propagation), or lose the owner reference (Orphan).
 */
import { objKey, type Store } from './store.ts';
import { storeKey, type Registry, type ResourceDef } from './registry.ts';
import { clone, meta, type Obj } from './types.ts';

/** One def per store (CRDs with several versions share one). */
export function servedByStore(registry: Registry): ResourceDef[] {
  const seen = new Map<string, ResourceDef>();
  for (const d of registry.all()) if (!seen.has(storeKey(d))) seen.set(storeKey(d), d);
  return [...seen.values()];
}

export class GarbageCollector {
  private readonly queue = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  /** `remove` deletes without admission (Cluster.removeInternal), so finalizers still hold an object. */
  constructor(
    private readonly store: Store,
    private readonly registry: Registry,
    private readonly remove: (def: ResourceDef, namespace: string, name: string) => void,
  ) {}

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
  }

  /** After a write: an object with owners is checked once its owners may be gone. */
  written(def: ResourceDef, obj: Obj): void {
    if ((meta(obj).ownerReferences ?? []).length > 0) this.enqueue(storeKey(def), objKey(meta(obj).namespace ?? '', meta(obj).name ?? ''));
  }

  /** After `gone` was removed: its dependents are collected, or orphaned. */
  removed(gone: Obj, propagation: string): void {
    const uid = meta(gone).uid;
    if (!uid) return;
    // Dependents are found by scanning: deletions are rare next to writes,
    // and a scan keeps no index to go stale.
    for (const d of servedByStore(this.registry)) {
      // Unsorted and uncopied (store.values): this scan runs once per deletion.
      const dependents: Obj[] = [];
      for (const o of this.store.values(storeKey(d))) if ((meta(o).ownerReferences ?? []).some((r) => r.uid === uid)) dependents.push(o);
      const key = (o: Obj): string => objKey(meta(o).namespace ?? '', meta(o).name ?? '');
      dependents.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0)); // etcd's order, as before
      for (const o of dependents) {
        const refs = meta(o).ownerReferences ?? [];
        if (propagation === 'Orphan') {
          const copy = clone(o);
          meta(copy).ownerReferences = refs.filter((r) => r.uid !== uid);
          this.store.put(storeKey(d), copy);
        } else this.enqueue(storeKey(d), key(o));
      }
    }
  }

  private enqueue(sk: string, key: string): void {
    this.queue.add(`${sk}\u0000${key}`);
    // Background collection, like the garbage collector controller: a
    // short delay so an owner created just after its dependent is seen.
    this.timer ??= setTimeout(() => this.run(), 20);
  }

  private run(): void {
    this.timer = undefined;
    if (this.closed) return;
    const items = [...this.queue];
    this.queue.clear();
    for (const item of items) {
      const [sk, key] = item.split('\u0000') as [string, string];
      const o = this.store.get(sk, key);
      if (!o) continue;
      const m = meta(o);
      const refs = m.ownerReferences ?? [];
      if (refs.length === 0) continue;
      const ownerAlive = refs.some((r) => {
        const ownerDef = this.registry.byKind(r.apiVersion, r.kind);
        if (!ownerDef) return true; // unresolvable kind: never collect on a guess
        const owner = this.store.byUid(r.uid);
        if (!owner) return false;
        const om = meta(owner);
        return om.name === r.name && (!ownerDef.namespaced || om.namespace === m.namespace);
      });
      if (ownerAlive) continue;
      const def = servedByStore(this.registry).find((d) => storeKey(d) === sk);
      if (def) this.remove(def, m.namespace ?? '', m.name ?? '');
    }
  }
}
