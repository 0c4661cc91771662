/**
 * Policy state that worker threads mirror (adr/0013). Compiled rules
 * (ajv's functions, CEL closures) cannot cross threads, so what travels is
 * the *source* of each change; every thread compiles its own copy (a rule
 * on its first use there, rule-code.ts).
 *
 * A store on the main thread records its changes in order; a mirror in a
 * worker applies them in the same order and ends up with the same entries
 * in force (a rejected new version keeps the last good one: the change
 * sequence, not only the latest objects, decides that, so `snapshot()`
 * replays it). A new kind of policy object stored in one of these stores
 * (e.g. an exception kept in the RuleSet) adds its operation to the store's
 * change type, to `snapshot()` and to `apply()`; the pool carries changes
 * opaquely and needs nothing new.
 */
export interface Replicated<C> {
  /** Called after every change that can alter an evaluation, in order. Returns unsubscribe. */
  onChange(listener: (change: C) => void): () => void;
  /** Changes that rebuild the current state on an empty instance. */
  snapshot(): C[];
  /** Applies a change recorded by another instance of the same store. */
  apply(change: C): void;
}

/** The listener list of a {@link Replicated} store. */
export class ChangeFeed<C> {
  readonly #listeners = new Set<(change: C) => void>();

  subscribe(listener: (change: C) => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  emit(change: C): void {
    for (const l of this.#listeners) l(change);
  }
}
