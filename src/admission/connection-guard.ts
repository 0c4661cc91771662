/**
 * The webhook's connection cap, made so that clients doing nothing cannot
 * hold it (issue 16: 520 idle TCP connections filled the 512 of
 * `--webhook-max-connections`, and the API server's requests were reset
 * for as long as the attacker kept reconnecting).
 *
 * Node's own `server.maxConnections` refuses the NEW connection at the cap,
 * whoever holds the others. Instead, on every new TCP connection (before
 * its TLS handshake):
 * - a remote address already holding `maxPerPeer` connections is refused;
 * - at the cap, the connection furthest from completing a request is
 *   closed to make room (issue 31): first one still in its TLS handshake
 *   (oldest first), then one that never carried a request (oldest first),
 *   then one with no request in flight (idle the longest), then one whose
 *   request body is still arriving, the smallest share of its promised
 *   body first (a request waiting its turn in peer-queue.ts has read none);
 *   within each kind, the peer holding the most connections loses one first;
 *   only when every connection has a request whose body is complete (being
 *   answered) is the new one refused. Requests being answered are never cut.
 * And every `checkIntervalMs`, a request whose body arrives slower than
 * `minBodyBytesPerSecond` after `bodyGraceMs` of reading is closed (limits.ts):
 * a body trickled a byte at a time holds its connection for seconds, not
 * for the whole request timeout.
 * The TLS handshake deadline (`handshakeTimeout`) and the header/request
 * timeouts still bound how long any one connection lives.
 *
 * Public seams only: the server's `connection` event (the raw socket, before
 * tls.Server wraps it), `secureConnection` and `request`. A raw connection
 * and its TLS socket are the same remote address and port.
 */
import type { Socket } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import type { ConnectionCloseReason } from '../observability/metrics.ts';


export interface ConnectionGuardOptions {
  maxConnections: number;
  maxPerPeer: number;
  /**
   * Whether connections start with a TLS handshake (the webhook). A plain
   * HTTP server (the probes) has none: a connection is ready for requests at
   * once, and only its requests in flight protect it. @default true
   */
  tls?: boolean;
  /** Body rate floor (limits.ts); without it, bodies are bounded by the request timeout alone. */
  bodyRate?: { graceMs: number; minBytesPerSecond: number; checkIntervalMs: number };
  /** Called for every connection the guard closes. */
  onClose?: (reason: ConnectionCloseReason) => void;
  /** Called with the number of open connections whenever it changes. */
  onCount?: (open: number) => void;
  /** Monotonic clock in ms. @default performance.now */
  now?: () => number;
}

interface Conn {
  raw: Socket;
  peer: string;
  /** TLS handshake done. */
  secure: boolean;
  /** Requests read (headers complete) and not yet answered or aborted. */
  inFlight: number;
  /** Whether it ever carried a request (a keep-alive client's idle connection, not a silent one). */
  served: boolean;
  /** When the last request ended (or the handshake did). */
  idleSince: number;
  /** Already uncounted (closed by the guard, or its socket closed). */
  gone: boolean;
  /** The request in flight, while its body is still arriving (else undefined). */
  req: IncomingMessage | undefined;
  /** Body bytes promised (Content-Length; chunked: unknown, counted as 1 so any progress is little). */
  promised: number;
  /** When its body started being read; undefined while it waits its turn unread (peer-queue.ts). */
  readingSince: number | undefined;
  /** The TLS (or plain) socket's bytesRead when the previous request ended: what came before this request. */
  before: number;
}

export interface ConnectionGuard {
  /** Open connections and distinct peers, for /debug/vars. */
  stats(): { open: number; peers: number };
  /** `req` waits its turn unread: its body clock stops, and at the cap it counts as having read nothing. */
  waiting(req: IncomingMessage): void;
  /** `req`'s body starts being read now: the rate floor counts from here. */
  reading(req: IncomingMessage): void;
}

/**
 * The size of `req`'s request line and headers as sent (bar whitespace a
 * client may add): computed only when the guard needs a body's progress,
 * not per request.
 */
function headBytes(req: IncomingMessage): number {
  let n = (req.method ?? '').length + (req.url ?? '').length + req.httpVersion.length + 13; // "M U HTTP/v\r\n" and the blank line
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) n += Buffer.byteLength(raw[i] as string) + Buffer.byteLength(raw[i + 1] as string) + 4;
  return n;
}

/** Body bytes of the request in flight read from the socket so far (Node reads ahead of its consumer, even while it waits its turn). */
function bodyRead(c: Conn, req: IncomingMessage): number {
  return req.socket.bytesRead - c.before - headBytes(req);
}

/** Share of the promised body read so far (0 while waiting its turn: it has had no chance yet). */
function progress(c: Conn): number {
  if (c.readingSince === undefined || c.req === undefined) return 0;
  return bodyRead(c, c.req) / c.promised;
}

/**
 * At the cap: the connection to close for a newcomer from `peer`, or why the
 * newcomer is refused instead. Every open one has a request being answered:
 * `cap_all_busy`. The newcomer's address already holds more connections than
 * the one that would lose its own: `cap_newcomer_refused` (a flood at the
 * cap must not take a client's few, e.g. the API server's pooled keep-alive
 * connections among attackers busy with requests: closing an idle one races
 * with that client's next request on it, which then fails with ECONNRESET).
 */
function roomFor(peer: string, byKey: ReadonlyMap<string, Conn>, perPeer: ReadonlyMap<string, number>): [string, Conn] | ConnectionCloseReason {
  const v = victim(byKey, perPeer);
  if (v === undefined) return 'cap_all_busy';
  return v[1].peer !== peer && (perPeer.get(peer) ?? 0) > (perPeer.get(v[1].peer) ?? 0) ? 'cap_newcomer_refused' : v;
}

/**
 * The connection to close at the cap (`byKey` in age order), or undefined when
 * every one has a request being answered. Within each kind, the connection of
 * the peer holding the most goes first (then the oldest, or the least read):
 * a client with a few connections (the kubelet, an API server among many
 * attackers) is the last to lose one.
 */
function victim(byKey: ReadonlyMap<string, Conn>, perPeer: ReadonlyMap<string, number>): [string, Conn] | undefined {
  let handshaking: [string, Conn] | undefined;
  let silent: [string, Conn] | undefined;
  let idle: [string, Conn] | undefined;
  let unfinished: [string, Conn] | undefined;
  let least = Infinity;
  const more = (c: Conn, than: [string, Conn] | undefined): boolean => than === undefined || (perPeer.get(c.peer) ?? 0) > (perPeer.get(than[1].peer) ?? 0);
  const same = (c: Conn, as: [string, Conn]): boolean => (perPeer.get(c.peer) ?? 0) === (perPeer.get(as[1].peer) ?? 0);
  for (const entry of byKey) {
    const c = entry[1];
    if (!c.secure) {
      if (more(c, handshaking)) handshaking = entry; // the oldest of the biggest peer's
      continue;
    }
    if (c.inFlight !== 0) {
      // A body still arriving: the least of its promise read goes first. A complete one is being answered: never cut.
      if (c.req !== undefined && !c.req.complete) {
        const p = progress(c);
        if (more(c, unfinished) || (unfinished !== undefined && same(c, unfinished) && p < least)) {
          least = p;
          unfinished = entry;
        }
      }
      continue;
    }
    // A connection that never carried a request goes before a keep-alive client's idle one: closing the
    // latter races with the client's next request on it (which then fails), and it is what a real client holds.
    if (!c.served) {
      if (more(c, silent)) silent = entry;
    } else if (more(c, idle) || (idle !== undefined && same(c, idle) && c.idleSince < idle[1].idleSince)) idle = entry;
  }
  return handshaking ?? silent ?? idle ?? unfinished;
}

/** Whether `c`'s body has fallen behind the rate floor. */
function tooSlow(c: Conn, at: number, rate: NonNullable<ConnectionGuardOptions['bodyRate']>): boolean {
  if (c.req === undefined || c.readingSince === undefined || c.req.complete) return false;
  const late = at - c.readingSince - rate.graceMs;
  if (late <= 0) return false;
  const read = bodyRead(c, c.req);
  return read < Math.min(c.promised, (rate.minBytesPerSecond * late) / 1000);
}

/** Answers 408 naming the floor, as Node does at its request timeout, and closes the connection (at once if the answer cannot be flushed). */
function closeSlow(c: Conn, minBytesPerSecond: number): void {
  const text = `request body arrived slower than ${minBytesPerSecond} bytes/s\n`;
  const sock = c.req?.socket;
  if (sock === undefined || sock.destroyed) {
    c.raw.destroy();
    return;
  }
  sock.end(`HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ${text.length}\r\n\r\n${text}`);
  setTimeout(() => c.raw.destroy(), 1_000).unref();
}

/** The peer queue's hooks: a request waiting its turn stops its body clock; its turn starts it again. */
function bodyClock(bySocket: WeakMap<object, Conn>, now: () => number): Pick<ConnectionGuard, 'waiting' | 'reading'> {
  const connOf = (req: IncomingMessage): Conn | undefined => {
    const c = bySocket.get(req.socket);
    return c?.req === req ? c : undefined;
  };
  return {
    waiting: (req) => {
      const c = connOf(req);
      if (c !== undefined) c.readingSince = undefined;
    },
    reading: (req) => {
      const c = connOf(req);
      if (c !== undefined) c.readingSince = now();
    },
  };
}

/** Every `checkIntervalMs` until the server closes: closes the connections whose body fell behind the floor. */
function sweepSlowBodies(
  server: TlsServer | HttpServer,
  byKey: ReadonlyMap<string, Conn>,
  rate: NonNullable<ConnectionGuardOptions['bodyRate']>,
  now: () => number,
  forget: (c: Conn, key: string) => void,
  onClose: ConnectionGuardOptions['onClose'],
): void {
  const sweep = setInterval(() => {
    const at = now();
    for (const [key, c] of byKey) {
      if (!tooSlow(c, at, rate)) continue;
      forget(c, key);
      closeSlow(c, rate.minBytesPerSecond);
      onClose?.('slow_body');
    }
  }, rate.checkIntervalMs);
  sweep.unref();
  server.once('close', () => clearInterval(sweep));
}

export function guardConnections(server: TlsServer | HttpServer, opts: ConnectionGuardOptions): ConnectionGuard {
  const handshake = opts.tls ?? true;
  const now = opts.now ?? (() => performance.now());
  // Insertion order is age order: the eviction scan meets the oldest first.
  const byKey = new Map<string, Conn>();
  const bySocket = new WeakMap<object, Conn>();
  const perPeer = new Map<string, number>();

  const forget = (conn: Conn, key: string): void => {
    if (conn.gone) return;
    conn.gone = true;
    byKey.delete(key);
    const n = (perPeer.get(conn.peer) ?? 1) - 1;
    if (n <= 0) perPeer.delete(conn.peer);
    else perPeer.set(conn.peer, n);
    opts.onCount?.(byKey.size);
  };

  // Prepended: runs before tls.Server's own listener wraps the socket, so a
  // refused connection costs no TLS state (the wrapper sees a destroyed
  // socket and ends with a tlsClientError, which Node handles).
  server.prependListener('connection', (raw: Socket) => {
    const peer = raw.remoteAddress;
    const port = raw.remotePort;
    if (peer === undefined || port === undefined) return void raw.destroy(); // already gone
    if ((perPeer.get(peer) ?? 0) >= opts.maxPerPeer) return void (raw.destroy(), opts.onClose?.('peer_limit'));
    if (byKey.size >= opts.maxConnections) {
      const v = roomFor(peer, byKey, perPeer);
      if (typeof v === 'string') {
        raw.destroy();
        opts.onClose?.(v);
        return;
      }
      forget(v[1], v[0]);
      v[1].raw.destroy();
      opts.onClose?.(v[1].inFlight === 0 ? 'cap_idle_closed' : 'cap_unfinished_closed');
    }
    const key = `${peer}|${port}`;
    const conn: Conn = { raw, peer, secure: !handshake, inFlight: 0, served: false, idleSince: now(), gone: false, req: undefined, promised: 1, readingSince: undefined, before: 0 };
    byKey.set(key, conn);
    bySocket.set(raw, conn);
    perPeer.set(peer, (perPeer.get(peer) ?? 0) + 1);
    opts.onCount?.(byKey.size);
    raw.once('close', () => forget(conn, key));
  });

  server.on('secureConnection', (tls: Socket) => {
    const conn = byKey.get(`${tls.remoteAddress}|${tls.remotePort}`);
    if (conn === undefined) return;
    conn.secure = true;
    conn.idleSince = now();
    bySocket.set(tls, conn);
  });

  // Prepended: the request is known here before the server's own listener may queue it (waiting()).
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    const conn = bySocket.get(req.socket);
    if (conn === undefined) return;
    conn.inFlight++;
    conn.served = true;
    conn.req = req;
    conn.promised = Math.max(1, Number(req.headers['content-length']) || 1);
    conn.readingSince = now();
    res.once('close', () => {
      conn.inFlight--;
      if (conn.req === req) conn.req = undefined;
      conn.idleSince = now();
      conn.before = req.socket.bytesRead;
    });
  });

  if (opts.bodyRate !== undefined) sweepSlowBodies(server, byKey, opts.bodyRate, now, forget, opts.onClose);

  return { stats: () => ({ open: byKey.size, peers: perPeer.size }), ...bodyClock(bySocket, now) };
}
