/**
 * The admission port's bounds: the body limit and the connection limits,
 * each derived from what a real API server sends, so that an attacker
 * cannot hold more than the API server would.
 */
/**
 * Body limit: the apiserver rejects request bodies over 3 MiB, so one object
 * is at most 3 MiB; an UPDATE review carries `object` and `oldObject`
 * (6 MiB), and re-encoding them inside the review can grow strings through
 * JSON escaping, plus the envelope (userInfo, options). 6 MiB + a third for
 * that ≈ 8 MiB. Anything larger cannot come from a real apiserver.
 */
export const ADMISSION_BODY_LIMIT = 8 * 1024 * 1024;

/** admissionregistration/v1: a webhook's timeoutSeconds is at most 30. */
export const MAX_WEBHOOK_TIMEOUT_MS = 30_000;

/**
 * Bounds on every connection and request, each derived from the API
 * server's side of the call. The API server abandons a webhook call after
 * the webhook's timeoutSeconds (T, `--webhook-timeout`: the chart passes
 * its `webhook.timeoutSeconds`) and client-go's transport abandons a TLS
 * handshake after 10 s (TLSHandshakeTimeout). Time the API server no longer
 * waits for is time an attacker could hold a socket for free, so:
 * - the handshake must finish within min(10 s, T);
 * - the headers within T/2: the API server writes its few hundred bytes of
 *   headers with the body, from memory; half of T leaves the other half for
 *   the body, the evaluation and the answer;
 * - headers and body within T (answered 408, closed): past T nobody waits
 *   for the answer;
 * - and while the body arrives, at least `minBodyBytesPerSecond` after a
 *   grace (`bodyGraceMs`): a client trickling a large promised body (issue
 *   31: `Content-Length: 100000`, then a byte every 3 s) is closed within
 *   about grace + one check instead of holding its slot until T.
 */
export interface ConnectionLimits {
  /** A TLS handshake unfinished after this is dropped (Node's default: 120 s). @default min(10 s, T) */
  handshakeMs: number;
  /** Request headers must be complete this long after the connection (or the previous request). @default T/2 */
  headersMs: number;
  /** Headers and body must be complete within this (answered 408, closed). @default T */
  requestMs: number;
  /**
   * How often Node checks the two timeouts above, and the guard the body
   * rate. Node's default (30 s) let a 30 s request timeout hold a 1 byte/s
   * body for 66 s; 1 s keeps each bound within a second. @default 1 s
   */
  checkIntervalMs: number;
  /**
   * A body may arrive at any rate during this long after it is first read
   * (an event-loop or GC pause here, a congested link there); after it, it
   * must keep up with `minBodyBytesPerSecond`. @default 2 s
   */
  bodyGraceMs: number;
  /**
   * The slowest body rate kept after the grace: the rate at which the
   * largest body the port takes (ADMISSION_BODY_LIMIT) still arrives within
   * the longest webhook timeout (30 s, less the grace), ~300 KB/s. An API
   * server writes a review from memory onto a cluster network at tens of
   * MB/s, a hundred times faster. @default ADMISSION_BODY_LIMIT / 28 s
   */
  minBodyBytesPerSecond: number;
  /**
   * Open connections per replica. Each API server has at most 200
   * mutating requests in flight (its default
   * --max-mutating-requests-inflight), each waiting on at most one
   * connection to this webhook, plus 25 idle keep-alive ones (client-go's
   * idle pool per host): 512 covers two API servers sending everything to
   * one replica (2 × 225), while bounding sockets and buffered bodies. At
   * the cap the connection furthest from completing a request is closed to
   * make room; only when all have a request being answered is the new one
   * refused (connection-guard.ts).
   * @default 512
   */
  maxConnections: number;
  /**
   * Open connections from one remote address; more are closed at once. One
   * API server needs ~225 (above); half the cap means no single peer can
   * hold what the others need. @default 256
   */
  maxPerPeer: number;
  /**
   * Requests of one remote address read and answered at once; its others
   * wait, unread (their bodies stay in the client's socket), behind their
   * own peer (peer-queue.ts). 32: a full batch of the evaluation pool, and
   * what the admission bench's 32 keep-alive connections use, so the API
   * server's throughput is not capped by it; a flooding peer then has at
   * most 32 reviews buffered and queued for the workers. @default 32
   */
  maxActivePerPeer: number;
  /**
   * Requests read and answered at once, all peers together; past it, peers
   * take turns (round robin) for the next free slot, so a peer with few
   * requests (the API server) waits for at most one turn. 128: the
   * evaluation pool's default queue (QUEUE_PER_WORKER × 2 workers), so the
   * queueing happens here, per peer, instead of in the pool's one queue.
   * @default 128
   */
  maxActive: number;
  /**
   * Sockets listening on the webhook's port (SO_REUSEPORT): libuv accepts
   * one connection per socket per event-loop turn, and the kernel's accept
   * queue is first come, first served, so on a loaded replica a flood of
   * reconnecting clients queued the API server's new connections for
   * seconds behind theirs (acceptors.ts). 8 sockets drain the queue 8
   * times faster at the cost of 7 file descriptors. @default 8
   */
  acceptors: number;
  /**
   * After a body goes over the limit, up to this many more bytes are read
   * and discarded so that the client, still sending, gets the 413 instead
   * of a reset (closing a socket with unread data makes TCP send RST, and
   * the client may lose the answer). No API server sends such a body, so
   * this only bounds the courtesy. @default 4 × ADMISSION_BODY_LIMIT
   */
  drainBytes: number;
}

/** The API server's default timeoutSeconds (admissionregistration/v1), for a webhook configuration that names none. */
export const DEFAULT_WEBHOOK_TIMEOUT_MS = 10_000;

const BODY_GRACE_MS = 2_000;

/** The timeouts of a webhook whose configuration says `timeoutSeconds: timeoutMs / 1000` (see ConnectionLimits). */
export function timeoutLimits(timeoutMs: number): Pick<ConnectionLimits, 'handshakeMs' | 'headersMs' | 'requestMs'> {
  return { handshakeMs: Math.min(10_000, timeoutMs), headersMs: Math.ceil(timeoutMs / 2), requestMs: timeoutMs };
}

export const CONNECTION_LIMITS: Readonly<ConnectionLimits> = Object.freeze({
  ...timeoutLimits(DEFAULT_WEBHOOK_TIMEOUT_MS),
  checkIntervalMs: 1_000,
  bodyGraceMs: BODY_GRACE_MS,
  minBodyBytesPerSecond: Math.floor(ADMISSION_BODY_LIMIT / ((MAX_WEBHOOK_TIMEOUT_MS - BODY_GRACE_MS) / 1000)),
  maxConnections: 512,
  maxPerPeer: 256,
  maxActivePerPeer: 32,
  maxActive: 128,
  acceptors: 8,
  drainBytes: 4 * ADMISSION_BODY_LIMIT,
});
