/**
 * What a controller sees of the embedded API server: reads straight from the
 * store (the controller-manager reads from its informer caches), writes
 * through the Cluster's REST semantics as a named identity, so every write is
 * validated and goes through the admission chain exactly as a client's would.
 */
import type { Cluster, RequestScope } from '../apiserver/cluster.ts';
import { storeKey, type ResourceDef } from '../apiserver/registry.ts';
import type { StoreEvent } from '../apiserver/store.ts';
import { objKey } from '../apiserver/store.ts';
import { meta, type Obj, type UserInfo } from '../apiserver/types.ts';

export interface Gvr { group: string; version: string; resource: string }

export const PODS: Gvr = { group: '', version: 'v1', resource: 'pods' };
export const NODES: Gvr = { group: '', version: 'v1', resource: 'nodes' };
export const EVENTS: Gvr = { group: '', version: 'v1', resource: 'events' };
export const REPLICASETS: Gvr = { group: 'apps', version: 'v1', resource: 'replicasets' };
export const DEPLOYMENTS: Gvr = { group: 'apps', version: 'v1', resource: 'deployments' };
export const JOBS: Gvr = { group: 'batch', version: 'v1', resource: 'jobs' };
export const CRONJOBS: Gvr = { group: 'batch', version: 'v1', resource: 'cronjobs' };

/** The identity of a kube-controller-manager controller: `system:serviceaccount:kube-system:<name>`. */
export function controllerIdentity(name: string): UserInfo {
  return {
    username: `system:serviceaccount:kube-system:${name}`,
    uid: `portal-dev-${name}`,
    groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'],
  };
}

export interface Host {
  get(r: Gvr, namespace: string, name: string): Obj | undefined;
  list(r: Gvr, namespace?: string): Obj[];
  /** Store events of one resource; returns the unsubscribe function. */
  watch(r: Gvr, fn: (ev: StoreEvent) => void): () => void;
  create(as: UserInfo, r: Gvr, namespace: string, obj: Obj, opts?: { skipAdmission?: boolean }): Promise<Obj>;
  /** PUT with the object's resourceVersion as precondition (409 if it moved). */
  update(as: UserInfo, r: Gvr, obj: Obj, subresource?: '' | 'status', opts?: { skipAdmission?: boolean }): Promise<Obj>;
  delete(as: UserInfo, r: Gvr, namespace: string, name: string, opts?: { uid?: string }): Promise<void>;
}

/** The field manager each component writes as on a real cluster. */
function agentOf(as: UserInfo): string {
  if (as.username.startsWith('system:node:')) return 'kubelet/v1.35.0';
  if (as.username === 'system:kube-scheduler') return 'kube-scheduler/v1.35.0';
  return 'kube-controller-manager/v1.35.0';
}

export function clusterHost(cluster: Cluster): Host {
  const def = (r: Gvr): ResourceDef => {
    const d = cluster.registry.get(r.group, r.version, r.resource);
    if (!d) throw new Error(`${r.resource}.${r.group} is not served`);
    return d;
  };
  const scope = (as: UserInfo, r: Gvr, namespace: string, name: string, subresource = ''): RequestScope =>
    ({ def: def(r), namespace, name, subresource, user: as, query: new URLSearchParams(), warnings: [], userAgent: agentOf(as) });
  return {
    get: (r, namespace, name) => cluster.store.get(storeKey(def(r)), objKey(namespace, name)),
    list: (r, namespace) => cluster.store.list(storeKey(def(r)), namespace),
    watch: (r, fn) => cluster.store.subscribe(storeKey(def(r)), fn),
    async create(as, r, namespace, obj, opts = {}) {
      return (await cluster.create(scope(as, r, namespace, ''), obj, opts)).body as Obj;
    },
    async update(as, r, obj, subresource = '', opts = {}) {
      const m = meta(obj);
      return (await cluster.update(scope(as, r, m.namespace ?? '', m.name ?? '', subresource), obj, opts)).body as Obj;
    },
    async delete(as, r, namespace, name, opts = {}) {
      await cluster.delete(scope(as, r, namespace, name), opts.uid ? { preconditions: { uid: opts.uid } } : {});
    },
  };
}

/** The controller ownerReference of `o`, if any. */
export function controllerRef(o: Obj): { kind: string; name: string; uid: string } | undefined {
  return (meta(o).ownerReferences ?? []).find((r) => r.controller === true);
}

export function ownerRef(apiVersion: string, kind: string, owner: Obj): NonNullable<ReturnType<typeof meta>['ownerReferences']>[number] {
  const m = meta(owner);
  return { apiVersion, kind, name: m.name ?? '', uid: m.uid ?? '', controller: true, blockOwnerDeletion: true };
}

/**
 * Objects of one resource grouped by the uid of their controller owner,
 * kept current from store events, so a sync reads its dependents without
 * scanning (1,000 Pods would otherwise make every sync O(n)).
 */
export class OwnedIndex {
  private readonly byOwner = new Map<string, Map<string, Obj>>();
  private readonly ownerOf = new Map<string, string>();
  readonly stop: () => void;

  constructor(host: Host, r: Gvr, private readonly onChange: (ownerUid: string, ev: StoreEvent) => void) {
    for (const o of host.list(r)) this.put(o);
    this.stop = host.watch(r, (ev) => {
      const key = objKey(meta(ev.object).namespace ?? '', meta(ev.object).name ?? '');
      const before = this.ownerOf.get(key);
      if (ev.type === 'DELETED') this.drop(key);
      else this.put(ev.object);
      const after = this.ownerOf.get(key);
      if (before !== undefined) this.onChange(before, ev);
      if (after !== undefined && after !== before) this.onChange(after, ev);
    });
  }

  owned(ownerUid: string): Obj[] {
    return [...(this.byOwner.get(ownerUid)?.values() ?? [])];
  }

  private put(o: Obj): void {
    const m = meta(o);
    const key = objKey(m.namespace ?? '', m.name ?? '');
    this.drop(key);
    const ref = controllerRef(o);
    if (!ref) return;
    let set = this.byOwner.get(ref.uid);
    if (!set) {
      set = new Map();
      this.byOwner.set(ref.uid, set);
    }
    set.set(key, o);
    this.ownerOf.set(key, ref.uid);
  }

  private drop(key: string): void {
    const uid = this.ownerOf.get(key);
    if (uid === undefined) return;
    this.ownerOf.delete(key);
    const set = this.byOwner.get(uid);
    set?.delete(key);
    if (set && set.size === 0) this.byOwner.delete(uid);
  }
}
