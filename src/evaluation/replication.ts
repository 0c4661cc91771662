/**
 * The policy stores' changes, from the main thread to every evaluation
 * worker (adr/0013): each change numbered (`seq`) and broadcast; a worker
 * that says `hello` (start-up, replacement) gets a snapshot of every store;
 * a worker that holds one says `synced`. Tasks carry the `seq` they must be
 * evaluated at (protocol.ts).
 */
import { randomUUID } from 'node:crypto';
import { BroadcastChannel } from 'node:worker_threads';
import type { Replicated } from '../policy/index.ts';
import type { ChannelMessage, StoreName } from './protocol.ts';

/** The stores the workers mirror, by name; absent ones are not mirrored. */
export type MirroredStores = Partial<Record<StoreName, Replicated<unknown> | undefined>>;

// The rules before the pairs remembered about them (poison-pairs.ts): a pair names a rule version.
const ORDER: readonly StoreName[] = ['rules', 'vaps', 'params', 'namespaces', 'poison'];

export class PolicyReplication {
  readonly channelName: string;
  readonly #stores: MirroredStores;
  readonly #channel: BroadcastChannel;
  readonly #unsubscribe: (() => void)[] = [];
  #seq = 0;
  #snapshotQueued = false;
  /** Threads that have held a snapshot (ever), and those of them that were destroyed since. */
  readonly #synced = new Set<number>();
  readonly #destroyed = new Set<number>();
  #syncWaiters: (() => void)[] = [];
  #closed = false;

  /** Opens the channel and starts recording the stores' changes. */
  constructor(name: string, stores: MirroredStores) {
    this.#stores = stores;
    this.channelName = `portal-evaluation-${name}-${randomUUID()}`;
    const channel = new BroadcastChannel(this.channelName);
    channel.unref();
    channel.onmessage = (event: unknown) => {
      const m = (event as { data: ChannelMessage }).data;
      if (m?.type === 'hello') this.#queueSnapshot();
      else if (m?.type === 'synced') {
        this.#synced.add(m.thread);
        for (const w of this.#syncWaiters.splice(0)) w();
      }
    };
    this.#channel = channel;
    for (const store of ORDER) {
      const s = stores[store];
      if (s) this.#unsubscribe.push(s.onChange((change) => this.#publish(store, change)));
    }
  }

  /** The policy revision: the number of the last change broadcast. */
  get seq(): number {
    return this.#seq;
  }

  /** Distinct threads that have held a snapshot, ever. */
  get everSynced(): number {
    return this.#synced.size;
  }

  /** Threads holding the policies now (a replacement counts once it has its snapshot). */
  liveSynced(): number {
    return [...this.#synced].filter((id) => !this.#destroyed.has(id)).length;
  }

  workerDestroyed(id: number): void {
    if (id >= 0) this.#destroyed.add(id);
  }

  /** Resolves once `threads` distinct workers have held a snapshot; false if closed first (nobody waits for ever on a closed pool). */
  async whenSynced(threads: number): Promise<boolean> {
    while (this.#synced.size < threads && !this.#closed) await new Promise<void>((resolve) => this.#syncWaiters.push(resolve));
    return this.#synced.size >= threads;
  }

  /** Stops recording changes (the channel stays open for the workers still draining). */
  unsubscribe(): void {
    for (const u of this.#unsubscribe.splice(0)) u();
  }

  close(): void {
    this.#closed = true;
    for (const w of this.#syncWaiters.splice(0)) w();
    this.unsubscribe();
    this.#channel.close();
  }

  #publish(store: StoreName, change: unknown): void {
    const seq = this.#seq + 1;
    this.#channel.postMessage({ type: 'change', seq, store, change } satisfies ChannelMessage);
    this.#seq = seq;
  }

  /** Several workers starting at once say hello together: one snapshot answers them all. */
  #queueSnapshot(): void {
    if (this.#snapshotQueued) return;
    this.#snapshotQueued = true;
    setImmediate(() => {
      this.#snapshotQueued = false;
      const changes: { store: StoreName; change: unknown }[] = [];
      for (const store of ORDER) for (const change of this.#stores[store]?.snapshot() ?? []) changes.push({ store, change });
      this.#channel.postMessage({ type: 'snapshot', seq: this.#seq, changes } satisfies ChannelMessage);
    });
  }
}
