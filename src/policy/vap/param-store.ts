/**
 * The param objects of ValidatingAdmissionPolicies (paramKind), as the
 * audit reads them: fed by the replica's param informers on the main thread
 * and mirrored into every evaluation worker (../replicated.ts), so a worker
 * looks params up without reaching the informers.
 */
import { selectorMatches } from '../label-selector.ts';
import { ChangeFeed, type Replicated } from '../replicated.ts';
import type { KubeObject, LabelSelector } from '../types.ts';
import type { ParamKind, ParamLookup, ParamProvider } from './types.ts';

/** What is known of a paramKind: served (namespaced or not), or why not. */
export type ParamScope = { ok: true; namespaced: boolean } | { ok: false; error: string };

export type ParamChange =
  | { op: 'scope'; kind: string; scope: ParamScope }
  | { op: 'put'; kind: string; object: KubeObject }
  | { op: 'delete'; kind: string; namespace: string; name: string };

/** The key of a paramKind: `apiVersion/Kind`. */
export function paramKindKey(kind: ParamKind): string {
  return `${kind.apiVersion}/${kind.kind}`;
}

const objectKey = (namespace: string, name: string): string => `${namespace}/${name}`;

export class ParamStore implements ParamProvider, Replicated<ParamChange> {
  readonly #kinds = new Map<string, { scope: ParamScope; objects: Map<string, KubeObject> }>();
  readonly #feed = new ChangeFeed<ParamChange>();

  /** A paramKind resolved (served, with its scope) or found not served. Objects already held stay. */
  setScope(kind: string, scope: ParamScope): void {
    const k = this.#kinds.get(kind);
    if (k) k.scope = scope;
    else this.#kinds.set(kind, { scope, objects: new Map() });
    this.#feed.emit({ op: 'scope', kind, scope });
  }

  put(kind: string, object: KubeObject): void {
    const k = this.#kinds.get(kind);
    if (!k) return;
    k.objects.set(objectKey(object.metadata?.namespace ?? '', object.metadata?.name ?? ''), object);
    this.#feed.emit({ op: 'put', kind, object });
  }

  delete(kind: string, namespace: string, name: string): void {
    if (!this.#kinds.get(kind)?.objects.delete(objectKey(namespace, name))) return;
    this.#feed.emit({ op: 'delete', kind, namespace, name });
  }

  scope(kind: ParamKind): ParamScope {
    const k = this.#kinds.get(paramKindKey(kind));
    return k?.scope ?? { ok: false, error: `paramKind kind \`${kind.apiVersion}, Kind=${kind.kind}\` is not synced yet` };
  }

  find(kind: ParamKind, namespace: string, ref: { name: string } | { selector: LabelSelector }): ParamLookup {
    const k = this.#kinds.get(paramKindKey(kind));
    if (!k?.scope.ok) return { ok: false, error: `paramKind kind \`${kind.apiVersion}, Kind=${kind.kind}\` not known` };
    const ns = k.scope.namespaced ? namespace : '';
    if ('name' in ref) {
      const o = k.objects.get(objectKey(ns, ref.name));
      return { ok: true, objects: o ? [o] : [] };
    }
    const objects = [...k.objects.values()].filter((o) => (o.metadata?.namespace ?? '') === ns && selectorMatches(ref.selector, o.metadata?.labels));
    return { ok: true, objects };
  }

  onChange(listener: (change: ParamChange) => void): () => void {
    return this.#feed.subscribe(listener);
  }

  snapshot(): ParamChange[] {
    const out: ParamChange[] = [];
    for (const [kind, k] of this.#kinds) {
      out.push({ op: 'scope', kind, scope: k.scope });
      for (const object of k.objects.values()) out.push({ op: 'put', kind, object });
    }
    return out;
  }

  apply(change: ParamChange): void {
    if (change.op === 'scope') this.setScope(change.kind, change.scope);
    else if (change.op === 'put') this.put(change.kind, change.object);
    else this.delete(change.kind, change.namespace, change.name);
  }
}
