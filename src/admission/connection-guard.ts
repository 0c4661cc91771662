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
 * - at the cap, the connection least likely to be doing work is closed to
 *   make room: first one still in its TLS handshake (oldest first), then
 *   one that never carried a request (oldest first), then one with no
 *   request in flight (idle the longest);
 *   only when every connection has a request in flight is the new one
 *   refused. Requests in flight are never cut.
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
}

export interface ConnectionGuard {
  /** Open connections and distinct peers, for /debug/vars. */
  stats(): { open: number; peers: number };
}

/** The connection to close at the cap (`byKey` in age order), or undefined when every one has a request in flight. */
function victim(byKey: ReadonlyMap<string, Conn>): [string, Conn] | undefined {
  let silent: [string, Conn] | undefined;
  let idle: [string, Conn] | undefined;
  for (const entry of byKey) {
    const c = entry[1];
    if (!c.secure) return entry; // oldest unfinished handshake
    if (c.inFlight !== 0) continue;
    // A connection that never carried a request goes before a keep-alive client's idle one: closing the
    // latter races with the client's next request on it (which then fails), and it is what a real client holds.
    if (!c.served) silent ??= entry; // oldest silent one
    else if (idle === undefined || c.idleSince < idle[1].idleSince) idle = entry;
  }
  return silent ?? idle;
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
    if (peer === undefined || port === undefined) {
      raw.destroy(); // already gone
      return;
    }
    if ((perPeer.get(peer) ?? 0) >= opts.maxPerPeer) {
      raw.destroy();
      opts.onClose?.('peer_limit');
      return;
    }
    if (byKey.size >= opts.maxConnections) {
      const v = victim(byKey);
      if (v === undefined) {
        raw.destroy();
        opts.onClose?.('cap_all_busy');
        return;
      }
      forget(v[1], v[0]);
      v[1].raw.destroy();
      opts.onClose?.('cap_idle_closed');
    }
    const key = `${peer}|${port}`;
    const conn: Conn = { raw, peer, secure: !handshake, inFlight: 0, served: false, idleSince: now(), gone: false };
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

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const conn = bySocket.get(req.socket);
    if (conn === undefined) return;
    conn.inFlight++;
    conn.served = true;
    res.once('close', () => {
      conn.inFlight--;
      conn.idleSince = now();
    });
  });

  return { stats: () => ({ open: byKey.size, peers: perPeer.size }) };
}
