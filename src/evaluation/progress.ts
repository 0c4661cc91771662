/**
 * The main thread's side of the progress slots (protocol.ts): reset before a
 * batch is sent, closed to take back the items its worker has not claimed,
 * read to learn which item and which rule (or VAP) it is on, and what each
 * item it finished took.
 */
import { CLAIM_CLOSED, SLOT_BYTES, SLOT_CLAIM, SLOT_COMPILE_MS, SLOT_COMPILING, SLOT_HEADER, SLOT_ID, SLOT_ITEM, SLOT_KEY_BYTES, SLOT_KEY_LENGTH, SLOT_TIMES } from './protocol.ts';

export class ProgressSlots {
  readonly #words: Int32Array;
  readonly #bytes: Uint8Array;
  readonly #decoder = new TextDecoder();

  constructor(progress: SharedArrayBuffer) {
    this.#words = new Int32Array(progress);
    this.#bytes = new Uint8Array(progress);
  }

  /** Before a batch of `items` is sent in `slot`: nothing claimed, nothing running, nothing timed. */
  reset(slot: number, items: number): void {
    const words = (slot * SLOT_BYTES) / 4;
    this.#words[words + SLOT_ID] = 0;
    this.#words[words + SLOT_KEY_LENGTH] = 0;
    this.#words[words + SLOT_CLAIM] = 0;
    this.#words[words + SLOT_ITEM] = -1;
    this.#words[words + SLOT_COMPILING] = 0;
    this.#words[words + SLOT_COMPILE_MS] = 0;
    const times = (slot * SLOT_BYTES + SLOT_TIMES) / 4;
    this.#words.fill(0, times, times + items);
  }

  /** How long item `index` of the slot's batch took its worker, in ms (0: it did not finish). */
  timeMs(slot: number, index: number): number {
    return (this.#words[(slot * SLOT_BYTES + SLOT_TIMES) / 4 + index] ?? 0) / 1000;
  }

  /** Closes the slot's claim counter; returns how many items were claimed before (the worker is on the last of them). */
  close(slot: number): number {
    return Atomics.exchange(this.#words, (slot * SLOT_BYTES) / 4 + SLOT_CLAIM, CLAIM_CLOSED);
  }

  /** The index of the item task `id`'s worker is on (-1: none yet, or the slot holds another task). */
  runningIndex(slot: number, id: number): number {
    const words = (slot * SLOT_BYTES) / 4;
    return this.#words[words + SLOT_ID] === id ? (this.#words[words + SLOT_ITEM] ?? -1) : -1;
  }

  /**
   * What first-use rule compiles (protocol.ts) add to the running item's own
   * deadline, in ms: what they took so far, plus `bound` while one runs; 0
   * when the slot holds another task.
   */
  compileAllowanceMs(slot: number, id: number, bound: number): number {
    const words = (slot * SLOT_BYTES) / 4;
    if (this.#words[words + SLOT_ID] !== id) return 0;
    return (this.#words[words + SLOT_COMPILE_MS] ?? 0) + (this.#words[words + SLOT_COMPILING] === 1 ? bound : 0);
  }

  /** The key task `id`'s worker wrote (the rule or VAP it was running), if any. */
  runningKey(slot: number, id: number): string | undefined {
    const words = (slot * SLOT_BYTES) / 4;
    if (this.#words[words + SLOT_ID] !== id) return undefined;
    const n = this.#words[words + SLOT_KEY_LENGTH] ?? 0;
    if (n <= 0 || n > SLOT_KEY_BYTES) return undefined;
    const start = slot * SLOT_BYTES + SLOT_HEADER;
    // Copy out of shared memory before decoding (TextDecoder refuses shared views).
    return this.#decoder.decode(this.#bytes.slice(start, start + n));
  }
}

/** Encoded rule keys, so recording progress costs one copy per rule (a thread sees the same few keys again and again). */
const encoded = new Map<string, Uint8Array>();
const encoder = new TextEncoder();

/**
 * A thread's side of one progress slot: the task it is on, the item, and
 * the key of the rule (or VAP) about to run, read with ProgressSlots when
 * the thread is terminated or dies. The pool's workers (worker.ts) record
 * keys with it; `portal test`'s evaluation thread (src/cli/offline) also
 * runs one item at a time outside the pool's batches.
 */
export class ProgressSlotWriter {
  readonly #words: Int32Array;
  readonly #bytes: Uint8Array;
  readonly #base: number;

  constructor(progress: SharedArrayBuffer, slot: number) {
    this.#words = new Int32Array(progress);
    this.#bytes = new Uint8Array(progress);
    this.#base = slot * SLOT_BYTES;
  }

  /** Item `index` of task `id` starts: no key yet. */
  item(id: number, index: number): void {
    const words = this.#base / 4;
    this.#words[words + SLOT_ID] = id;
    this.#words[words + SLOT_KEY_LENGTH] = 0;
    this.#words[words + SLOT_ITEM] = index;
  }

  /** The rule (or VAP) about to run. */
  readonly key = (key: string): void => {
    let bytes = encoded.get(key);
    if (bytes === undefined) {
      if (encoded.size > 10_000) encoded.clear();
      bytes = encoder.encode(key).subarray(0, SLOT_KEY_BYTES);
      encoded.set(key, bytes);
    }
    this.#bytes.set(bytes, this.#base + SLOT_HEADER);
    this.#words[this.#base / 4 + SLOT_KEY_LENGTH] = bytes.length;
  };
}
