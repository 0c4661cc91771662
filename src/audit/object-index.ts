/**
 * What the audit holds about every object (evaluator.ts), indexed the ways
 * its readers ask: by key, by namespace (namespace reports) and by violated
 * rule (the rules' violation counts).
 */
import type { ObjectState } from './audit-step.ts';
import { parseObjectKey } from './work-queue.ts';

export class ObjectIndex {
  readonly #objects = new Map<string, ObjectState>();
  /** Namespace ("" = cluster-scoped) → keys of the objects held in it (namespace reports read it). */
  readonly #byNamespace = new Map<string, Set<string>>();
  /** Rule display key → keys of objects violating it. */
  readonly #violators = new Map<string, Set<string>>();

  get size(): number {
    return this.#objects.size;
  }

  get(key: string): ObjectState | undefined {
    return this.#objects.get(key);
  }

  keys(): IterableIterator<string> {
    return this.#objects.keys();
  }

  entries(): IterableIterator<[string, ObjectState]> {
    return this.#objects.entries();
  }

  /** The objects held in `namespace` ("" = cluster-scoped ones). */
  *in(namespace: string): Iterable<ObjectState> {
    for (const key of this.#byNamespace.get(namespace) ?? []) {
      const st = this.#objects.get(key);
      if (st) yield st;
    }
  }

  /** Objects violating `rule` (display key) right now. */
  violations(rule: string): number {
    return this.#violators.get(rule)?.size ?? 0;
  }

  /**
   * Holds the object's new state; returns the rules (display keys) whose
   * violating objects changed with it.
   */
  hold(key: string, st: ObjectState): Set<string> {
    const prev = this.#objects.get(key);
    if (!prev) {
      const ns = parseObjectKey(key).namespace;
      let set = this.#byNamespace.get(ns);
      if (!set) this.#byNamespace.set(ns, (set = new Set()));
      set.add(key);
    }
    this.#objects.set(key, st);
    const changed = new Set<string>();
    for (const r of prev?.violating ?? []) if (!st.violating.has(r)) changed.add(r);
    for (const r of st.violating) if (!prev?.violating.has(r)) changed.add(r);
    for (const r of changed) {
      let set = this.#violators.get(r);
      if (st.violating.has(r)) {
        if (!set) this.#violators.set(r, (set = new Set()));
        set.add(key);
      } else set?.delete(key);
    }
    return changed;
  }

  forget(key: string): void {
    const st = this.#objects.get(key);
    if (!st) return;
    this.#objects.delete(key);
    const ns = parseObjectKey(key).namespace;
    const set = this.#byNamespace.get(ns);
    set?.delete(key);
    if (set?.size === 0) this.#byNamespace.delete(ns);
    for (const r of st.violating) this.#violators.get(r)?.delete(key);
  }
}
