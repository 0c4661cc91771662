/**
 * The abort signal of one task, as piscina reads it (`aborted`, one 'abort'
 * listener): an AbortController per task costs more than it needs to.
 */
export class TaskAbort {
  aborted = false;
  #listener: (() => void) | undefined;

  addEventListener(_type: 'abort', listener: () => void): void {
    this.#listener = listener;
  }

  removeEventListener(): void {
    this.#listener = undefined;
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const l = this.#listener;
    this.#listener = undefined;
    l?.();
  }
}
