/**
 * Fair turns for the webhook's requests, per remote address (issue 31: 200
 * concurrent 400 KB reviews from one address made 75% of the API server's
 * calls fail).
 *
 * A request is read and answered (its turn) only while its peer has fewer
 * than `maxActivePerPeer` turns and all peers together fewer than
 * `maxActive`; otherwise it waits, unread: its body stays in the client's
 * socket (Node stops reading a request nobody consumes), so a waiting
 * request costs no memory beyond its headers. When a turn ends (the
 * response closes: answered, or the connection gone), the next turn goes to
 * the waiting peer with the fewest turns, each peer's own requests in
 * arrival order. A peer that floods waits behind itself: the API server,
 * with few requests being answered, goes before it at the next free turn. How long a request
 * may wait is bounded by the request timeout (limits.ts): past it the
 * client is answered 408, which is past the API server's own timeout.
 *
 * The peer is the remote address: what the connection guard already counts
 * connections by. Requests waiting are what it closes first at its cap (they
 * have read none of their body).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export type Dispatch = (req: IncomingMessage, res: ServerResponse) => void;

export interface PeerQueueOptions {
  /** Turns at once, all peers together. */
  maxActive: number;
  /** Turns at once of one remote address. */
  maxActivePerPeer: number;
  /** Starts a request's turn: reads and answers it. */
  dispatch: Dispatch;
  /** A request starts waiting (the connection guard stops its body clock). */
  onWait?: (req: IncomingMessage) => void;
  /** A request that waited starts its turn (the body clock starts now). */
  onTurn?: (req: IncomingMessage) => void;
  /** The number of requests waiting changed (a gauge). */
  onWaiting?: (waiting: number) => void;
}

interface Waiter {
  req: IncomingMessage;
  res: ServerResponse;
}

interface Peer {
  key: string;
  active: number;
  /** FIFO: `waiting[head]` is next. */
  waiting: Waiter[];
  head: number;
}

export interface PeerQueueStats {
  active: number;
  waiting: number;
  peers: number;
}

export class PeerQueue {
  readonly #opts: PeerQueueOptions;
  readonly #peers = new Map<string, Peer>();
  /** Peers with requests waiting, in turn order (a Set keeps insertion order; served ones move to the back). */
  readonly #turns = new Set<Peer>();
  #active = 0;
  #waiting = 0;

  constructor(opts: PeerQueueOptions) {
    this.#opts = opts;
  }

  /** Starts `req`'s turn now, or queues it behind its peer's earlier requests. */
  enter(req: IncomingMessage, res: ServerResponse): void {
    const key = req.socket.remoteAddress ?? '';
    let peer = this.#peers.get(key);
    if (peer === undefined) {
      peer = { key, active: 0, waiting: [], head: 0 };
      this.#peers.set(key, peer);
    }
    if (this.#active < this.#opts.maxActive && peer.active < this.#opts.maxActivePerPeer && peer.head === peer.waiting.length) {
      this.#start(peer, req, res);
      return;
    }
    peer.waiting.push({ req, res });
    this.#opts.onWaiting?.(++this.#waiting);
    this.#turns.add(peer);
    this.#opts.onWait?.(req);
  }

  stats(): PeerQueueStats {
    return { active: this.#active, waiting: this.#waiting, peers: this.#peers.size };
  }

  #start(peer: Peer, req: IncomingMessage, res: ServerResponse): void {
    this.#active++;
    peer.active++;
    res.once('close', () => {
      this.#active--;
      peer.active--;
      this.#next();
      if (peer.active === 0 && peer.head === peer.waiting.length) this.#peers.delete(peer.key);
    });
    this.#opts.dispatch(req, res);
  }

  /**
   * Gives each free turn to the waiting peer with the fewest turns (ties:
   * the one served least recently, as `#turns` keeps them in that order):
   * a peer holding many turns waits behind one holding none.
   */
  #next(): void {
    while (this.#active < this.#opts.maxActive) {
      let best: Peer | undefined;
      for (const peer of this.#turns) if (peer.active < this.#opts.maxActivePerPeer && (best === undefined || peer.active < best.active)) best = peer;
      if (best === undefined) return;
      const w = this.#shiftLive(best);
      this.#turns.delete(best);
      if (best.head < best.waiting.length) this.#turns.add(best); // to the back among equals
      if (w === undefined) {
        if (best.active === 0) this.#peers.delete(best.key);
        continue;
      }
      this.#opts.onTurn?.(w.req);
      this.#start(best, w.req, w.res);
    }
  }

  /** The peer's next waiting request whose client is still there; those gone are dropped. */
  #shiftLive(peer: Peer): Waiter | undefined {
    while (peer.head < peer.waiting.length) {
      const w = peer.waiting[peer.head] as Waiter;
      peer.waiting[peer.head++] = undefined as unknown as Waiter;
      this.#opts.onWaiting?.(--this.#waiting);
      if (peer.head === peer.waiting.length) {
        peer.waiting.length = 0;
        peer.head = 0;
      }
      if (!w.res.destroyed && !w.req.socket.destroyed) return w;
    }
    return undefined;
  }
}
