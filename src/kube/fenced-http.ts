/**
 * Late fencing for leader-only writes: the term is checked again at the last
 * moment the process can still decide not to send — in the socket's write
 * path, synchronously before the request bytes are handed to the kernel —
 * not only before the client library starts its (asynchronous) request.
 *
 * Why: between a caller's `term.assertValid()` and the actual socket write,
 * client-node 1.4.0 awaits authentication, its middleware chain, and a TCP
 * connect plus TLS handshake (it builds a new https.Agent, so a new
 * connection, for every request). A leader paused anywhere in there (SIGSTOP,
 * a long GC) wakes with the request still queued and used to send it after
 * its successor had taken over (ADR 0004, "Residual window").
 *
 * How:
 * - {@link FencedHttpLibrary} replaces client-node's HTTP library: requests
 *   share one keep-alive agent per TLS identity (fewer connects, so fewer
 *   windows), the fence registered for the request (by {@link fenceMiddleware},
 *   i.e. `callOptions({ fence })`) runs once more right before node-fetch is
 *   called, and a fence failure surfaces as the fence's own error (a
 *   PortalError(TermExpired)) instead of node-fetch's FetchError.
 * - {@link armRequest} hooks the request's socket: its `_writeGeneric` (the
 *   one function every net.Socket write passes through, including the
 *   deferred write after a connect) calls the fence immediately before the
 *   write syscall; on a fresh TLS connection the write is held until the
 *   handshake finished, so the check is not followed by a handshake round
 *   trip. A failed check destroys the socket: the server sees a connection
 *   that closes without (or in the middle of) a request and does nothing.
 *
 * `_writeGeneric` is internal to Node (stable since v10, present in 20 and
 * 22); test/kube/fenced-http.test.ts fails if a Node upgrade bypasses it.
 */
import { createHash } from 'node:crypto';
import http, { type ClientRequest } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import {
  IsomorphicFetchHttpLibrary,
  Observable,
  type HttpLibrary,
  type ObservableMiddleware,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';

/** Throws (a PortalError(TermExpired)) when the side effect must not be sent any more. */
export type Fence = () => void;

/** Where the first fence failure of a request is kept, so it can replace the transport's error. */
export interface FenceState {
  error?: unknown;
}

type WriteGeneric = (writev: boolean, data: unknown, encoding: string, cb: (err?: Error | null) => void) => unknown;
interface HookedSocket extends Socket {
  _writeGeneric: WriteGeneric;
  [ARMED]?: { fence: Fence; state: FenceState } | undefined;
  [HOOKED]?: true;
}
interface TlsInternals {
  _secureEstablished?: boolean;
}

const ARMED = Symbol('portal.fence.armed');
const HOOKED = Symbol('portal.fence.hooked');

/** Installs the write hook on a socket (once; it is inert while no request is armed). */
function hookSocket(socket: HookedSocket): void {
  if (socket[HOOKED]) return;
  const original = socket._writeGeneric;
  if (typeof original !== 'function') throw new Error('net.Socket#_writeGeneric is missing: fencing cannot hook this Node version');
  socket[HOOKED] = true;
  socket._writeGeneric = function fencedWrite(this: HookedSocket, writev, data, encoding, cb) {
    const armed = this[ARMED];
    // While connecting, net buffers the data and calls _writeGeneric again on
    // 'connect' (through this property, so through here): check then.
    if (armed && !this.connecting) {
      if (this instanceof TLSSocket && (this as TLSSocket & TlsInternals)._secureEstablished === false) {
        // Hold the data until the handshake is done (the same pattern net uses while connecting).
        const onSecure = () => {
          this.off('close', onClose);
          this._writeGeneric(writev, data, encoding, cb);
        };
        const onClose = () => {
          this.off('secureConnect', onSecure);
          cb(new Error('socket closed before the TLS handshake completed'));
        };
        this.once('secureConnect', onSecure);
        this.once('close', onClose);
        return false;
      }
      try {
        armed.fence();
      } catch (err) {
        armed.state.error ??= err;
        // The write callback's error destroys the socket (autoDestroy), and the request fails with it.
        cb(err instanceof Error ? err : new Error(String(err)));
        return false;
      }
    }
    return original.call(this, writev, data, encoding, cb);
  };
}

/**
 * Arms a request: every write of it to its socket (fresh or reused from the
 * pool) is preceded by `fence()`. Call before the request is flushed, i.e.
 * synchronously after `http.request()` or from `agent.addRequest`.
 */
export function armRequest(req: ClientRequest, fence: Fence, state: FenceState): void {
  req.once('socket', (s: Socket) => {
    const socket = s as HookedSocket;
    hookSocket(socket);
    const armed = { fence, state };
    socket[ARMED] = armed;
    const disarm = () => {
      if (socket[ARMED] === armed) socket[ARMED] = undefined;
    };
    req.once('finish', disarm);
    req.once('close', disarm);
  });
}

/** A view of `agent` whose requests are armed with `fence` (the pool stays the shared agent's). */
export function fencedAgent<A extends http.Agent>(agent: A, fence: Fence, state: FenceState): A {
  const view = Object.create(agent) as A & { addRequest(req: ClientRequest, options: unknown): void };
  const shared = agent as unknown as { addRequest(req: ClientRequest, options: unknown): void };
  view.addRequest = (req: ClientRequest, options: unknown) => {
    armRequest(req, fence, state);
    shared.addRequest(req, options);
  };
  return view;
}

/** Per-request fences, registered by the call's middleware and read by the HTTP library. */
const fences = new WeakMap<RequestContext, Fence>();

/** Call-time middleware (see `callOptions({ fence })`): the request is sent only if `fence()` passes at the socket. */
export function fenceMiddleware(fence: Fence): ObservableMiddleware {
  return {
    pre: (request: RequestContext) => {
      fences.set(request, fence);
      return new Observable(Promise.resolve(request));
    },
    post: (response: ResponseContext) => new Observable(Promise.resolve(response)),
  };
}

/**
 * Keep-alive agents are shared per TLS identity. KubeConfig builds a fresh
 * agent per request from the same options (CA, client certificate, server
 * name); an exec credential plugin may rotate the client certificate, so the
 * key is a digest of exactly those options. A handful is plenty; the oldest
 * is dropped (and its idle sockets closed) beyond that.
 */
const MAX_SHARED_AGENTS = 4;
const AGENT_OPTION_KEYS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'] as const;

function digest(value: unknown): string {
  const h = createHash('sha256');
  const feed = (v: unknown): void => {
    if (v === undefined || v === null) h.update('\0u');
    else if (Buffer.isBuffer(v)) h.update('\0b').update(v);
    else if (Array.isArray(v)) {
      h.update('\0[');
      v.forEach(feed);
      h.update('\0]');
    } else h.update(`\0s${String(v)}`);
  };
  feed(value);
  return h.digest('hex');
}

/** Stops pooling on `agent`: idle sockets close now, busy ones when their request is done. */
function retire(agent: http.Agent): void {
  (agent as http.Agent & { keepSocketAlive(socket: Socket): boolean }).keepSocketAlive = () => false;
  for (const sockets of Object.values(agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
}

export class FencedHttpLibrary implements HttpLibrary {
  readonly #inner = new IsomorphicFetchHttpLibrary();
  readonly #agents = new Map<string, http.Agent>();

  send(request: RequestContext): Observable<ResponseContext> {
    const agent = this.#shared(request.getAgent());
    if (agent) request.setAgent(agent);
    const fence = fences.get(request);
    if (!fence) return this.#inner.send(request);
    const state: FenceState = {};
    try {
      // Authentication and middleware awaited since the caller checked; check again before the transport starts.
      fence();
    } catch (err) {
      return new Observable(Promise.reject(err as Error));
    }
    request.setAgent(fencedAgent(agent ?? (request.getUrl().startsWith('https:') ? https.globalAgent : http.globalAgent), fence, state));
    const sent = this.#inner.send(request).toPromise();
    return new Observable(
      sent.catch((err: unknown) => {
        throw state.error ?? err;
      }),
    );
  }

  /** Idle sockets are closed; requests in flight finish (and close their sockets). */
  close(): void {
    for (const agent of this.#agents.values()) retire(agent);
    this.#agents.clear();
  }

  /** The shared keep-alive equivalent of a per-request agent from KubeConfig; proxies' agents are kept as they are. */
  #shared(agent: http.Agent | https.Agent | undefined): http.Agent | undefined {
    if (!agent) return undefined;
    const ctor = agent.constructor;
    if (ctor !== https.Agent && ctor !== http.Agent) return agent;
    const options = (agent as http.Agent & { options: Record<string, unknown> }).options;
    const key = digest([ctor === https.Agent ? 'https' : 'http', ...AGENT_OPTION_KEYS.map((k) => options[k])]);
    let shared = this.#agents.get(key);
    if (!shared) {
      const picked = Object.fromEntries(AGENT_OPTION_KEYS.filter((k) => options[k] !== undefined).map((k) => [k, options[k]]));
      // keepAliveMsecs: TCP keep-alive probe delay on idle pooled sockets (Node's default, 1 s).
      shared = ctor === https.Agent ? new https.Agent({ ...picked, keepAlive: true, keepAliveMsecs: 1000 }) : new http.Agent({ ...picked, keepAlive: true, keepAliveMsecs: 1000 });
      this.#agents.set(key, shared);
      if (this.#agents.size > MAX_SHARED_AGENTS) {
        const [oldestKey, oldest] = this.#agents.entries().next().value as [string, http.Agent];
        this.#agents.delete(oldestKey);
        retire(oldest);
      }
    }
    return shared;
  }
}

export interface FencedRequestOptions {
  method: string;
  headers?: Record<string, string>;
  body?: string;
  signal: AbortSignal;
  /** Checked before the request starts and synchronously before its bytes reach the socket. */
  fence?: Fence;
}

export interface FencedResponse {
  status: number;
  text: string;
}

/** Keep-alive pools for {@link fencedRequest} (idle sockets are unref'd by Node, so they never hold the process open). */
const plainAgent = new http.Agent({ keepAlive: true });
const tlsAgent = new https.Agent({ keepAlive: true });

/**
 * A minimal HTTP request for side effects outside Kubernetes (Alertmanager):
 * like `fetch`, but with the same socket-level fence as the Kubernetes
 * client. Rejects with the fence's error when fenced, with `signal.reason`
 * when aborted, otherwise with the transport error.
 */
export function fencedRequest(url: string, options: FencedRequestOptions): Promise<FencedResponse> {
  return new Promise((resolve, reject) => {
    const state: FenceState = {};
    const { signal, fence } = options;
    if (signal.aborted) return reject(signal.reason as Error);
    try {
      fence?.();
    } catch (err) {
      return reject(err as Error);
    }
    const target = new URL(url);
    const isTls = target.protocol === 'https:';
    const body = options.body !== undefined ? Buffer.from(options.body) : undefined;
    const headers = { ...options.headers, ...(body ? { 'content-length': String(body.length) } : {}) };
    const req = (isTls ? https : http).request(target, { method: options.method, headers, agent: isTls ? tlsAgent : plainAgent });
    if (fence) armRequest(req, fence, state);
    const onAbort = () => req.destroy(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    const settle = (err: unknown, res?: FencedResponse) => {
      signal.removeEventListener('abort', onAbort);
      if (res) resolve(res);
      else reject((state.error ?? (signal.aborted ? signal.reason : err)) as Error);
    };
    req.on('error', (err) => settle(err));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (err) => settle(err));
      res.on('end', () => settle(undefined, { status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.end(body);
  });
}
