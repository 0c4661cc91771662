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

/**
 * Bounds on every connection, each derived from the API server's side of
 * the call: a webhook's timeoutSeconds is at most 30, and client-go's
 * transport (which the API server's webhook client uses) abandons a TLS
 * handshake after 10 s (TLSHandshakeTimeout). Time the API server no longer
 * waits for is time an attacker could hold a socket for free.
 */
export interface ConnectionLimits {
  /** A TLS handshake unfinished after this is dropped (Node's default: 120 s). @default 10 s, client-go's TLSHandshakeTimeout */
  handshakeMs: number;
  /** Request headers must be complete this long after the connection (or the previous request). The API server writes them at once. @default 10 s */
  headersMs: number;
  /** Headers and body must be complete within this (answered 408, closed). @default 30 s, the longest webhook timeout */
  requestMs: number;
  /**
   * How often Node checks the two timeouts above. Its default (30 s) let a
   * 30 s request timeout hold a 1 byte/s body for 66 s; 1 s keeps each
   * bound within a second. @default 1 s
   */
  checkIntervalMs: number;
  /**
   * Open connections per replica. Each API server has at most 200
   * mutating requests in flight (its default
   * --max-mutating-requests-inflight), each waiting on at most one
   * connection to this webhook, plus 25 idle keep-alive ones (client-go's
   * idle pool per host): 512 covers two API servers sending everything to
   * one replica (2 × 225), while bounding sockets and buffered bodies. At
   * the cap an idle connection is closed to make room; only when all have a
   * request in flight is the new one refused (connection-guard.ts).
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
   * After a body goes over the limit, up to this many more bytes are read
   * and discarded so that the client, still sending, gets the 413 instead
   * of a reset (closing a socket with unread data makes TCP send RST, and
   * the client may lose the answer). No API server sends such a body, so
   * this only bounds the courtesy. @default 4 × ADMISSION_BODY_LIMIT
   */
  drainBytes: number;
}

export const CONNECTION_LIMITS: Readonly<ConnectionLimits> = Object.freeze({
  handshakeMs: 10_000,
  headersMs: 10_000,
  requestMs: 30_000,
  checkIntervalMs: 1_000,
  maxConnections: 512,
  maxPerPeer: 256,
  drainBytes: 4 * ADMISSION_BODY_LIMIT,
});
