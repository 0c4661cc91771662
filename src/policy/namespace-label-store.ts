/**
 * Namespace name → labels, as a store the evaluation workers mirror like
 * the rules (adr/0013, "Reviews read in the worker"): a worker answers a
 * whole review, namespaceSelector included, and the labels of cluster mode
 * come from the main thread's Namespace informer. Only label changes
 * travel (a Namespace's other updates do not).
 */
import { ChangeFeed, type Replicated } from './replicated.ts';

/** `labels: null` removes the namespace. */
export interface NamespaceLabelChange {
  name: string;
  labels: Readonly<Record<string, string>> | null;
}

export class NamespaceLabelStore implements Replicated<NamespaceLabelChange> {
  readonly #labels = new Map<string, Readonly<Record<string, string>>>();
  readonly #feed = new ChangeFeed<NamespaceLabelChange>();

  /** Records a namespace's labels (`null`: it is gone); emits a change only when they differ. */
  set(name: string, labels: Readonly<Record<string, string>> | null): void {
    const old = this.#labels.get(name);
    if (labels === null) {
      if (old === undefined) return;
      this.#labels.delete(name);
    } else {
      if (old !== undefined && sameLabels(old, labels)) return;
      this.#labels.set(name, Object.freeze({ ...labels }));
    }
    this.#feed.emit({ name, labels: labels === null ? null : (this.#labels.get(name) ?? null) });
  }

  /** A namespace's labels, `undefined` when it is not known (callers treat that as "cannot decide", not "no labels"). */
  labels(name: string): Record<string, string> | undefined {
    const l = this.#labels.get(name);
    return l === undefined ? undefined : { ...l };
  }

  get size(): number {
    return this.#labels.size;
  }

  onChange(listener: (change: NamespaceLabelChange) => void): () => void {
    return this.#feed.subscribe(listener);
  }

  snapshot(): NamespaceLabelChange[] {
    return [...this.#labels].map(([name, labels]) => ({ name, labels }));
  }

  apply(change: NamespaceLabelChange): void {
    this.set(change.name, change.labels);
  }
}

function sameLabels(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) if (a[k] !== b[k]) return false;
  return true;
}
