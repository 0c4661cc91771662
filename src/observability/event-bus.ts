/**
 * A tiny typed, synchronous event bus for in-process notifications
 * (leadership changes, rule reloads, certificate rotations). A listener that
 * throws is reported to `onListenerError` and never breaks the emitter or the
 * other listeners.
 */
export type EventMap = Record<string, unknown>;
type Listener<T> = (payload: T) => void;

export class EventBus<M extends EventMap> {
  readonly #listeners = new Map<keyof M, Set<Listener<never>>>();
  readonly #onListenerError: (event: keyof M, err: unknown) => void;

  constructor(onListenerError: (event: keyof M, err: unknown) => void = () => {}) {
    this.#onListenerError = onListenerError;
  }

  /** Subscribes; returns the function that unsubscribes. */
  on<K extends keyof M>(event: K, listener: Listener<M[K]>): () => void {
    let set = this.#listeners.get(event);
    if (!set) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener as Listener<never>);
    return () => {
      set.delete(listener as Listener<never>);
    };
  }

  emit<K extends keyof M>(event: K, payload: M[K]): void {
    const set = this.#listeners.get(event);
    if (!set) return;
    for (const listener of [...set]) {
      try {
        (listener as Listener<M[K]>)(payload);
      } catch (err) {
        this.#onListenerError(event, err);
      }
    }
  }

  listenerCount(event: keyof M): number {
    return this.#listeners.get(event)?.size ?? 0;
  }
}
