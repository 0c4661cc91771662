/**
 * Late fencing for leader-only writes, on public Node APIs only: the term is
 * checked again at the last moment the process can still decide not to send
 * — synchronously before the request's first byte is handed to a connected
 * socket — not only before the client library starts its (asynchronous)
 * request.
 *
 * Why: between a caller's `term.assertValid()` and the socket write, a
 * request awaits authentication, client-node's middleware chain, and possibly
 * a TCP connect plus TLS handshake. A leader paused anywhere in there
 * (SIGSTOP, a long GC) wakes with the request still queued and would send it
 * after its successor took over (ADR 0004, "Residual window").
 *
 * How (ADR 0004, "Late check"), three public seams:
 * 1. {@link ConnectedHttpAgent} / {@link ConnectedHttpsAgent} override
 *    `Agent#createConnection(options, callback)` (documented: a custom agent
 *    may hand its socket over asynchronously through `callback`) and hand a
 *    socket to a request only once it is connected — for TLS, once the
 *    handshake is done (`secureConnect`). Pooled keep-alive sockets are
 *    connected by definition. So when a request gets its socket, no further
 *    network round trip stands between it and the write.
 * 2. `http.request()` writes nothing before the first `write()`/`end()`
 *    (no `flushHeaders()`), so {@link sendFenced} does not call `end(body)`
 *    until the request's documented `'socket'` event. There it runs the fence
 *    and then, in the same synchronous turn, `req.end(body)`: the headers and
 *    body go to the connected socket (a synchronous write attempt to the
 *    kernel) with no I/O wait between check and write. A failed check
 *    destroys the request and its socket before anything was written: the
 *    server sees nothing, or (on a fresh socket) a connection that closes
 *    without a request.
 * 3. {@link FencedHttpLibrary} is client-node's public `HttpLibrary` seam:
 *    requests that carry a fence (registered by `callOptions({ fence })`,
 *    see {@link fenceMiddleware}) are sent by {@link sendFenced}; the others
 *    go through client-node's own node-fetch library on the same pooled
 *    agents.
 *
 * The remaining window is the synchronous code between the check and the
 * write syscall (microseconds, no I/O); a pause there is covered by the
 * term's safety margin, as a pause inside the syscall would be.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import {
  IsomorphicFetchHttpLibrary,
  Observable,
  ResponseContext,
  type HttpLibrary,
  type ObservableMiddleware,
  type RequestContext,
} from '@kubernetes/client-node';
import { ErrorCode, PortalError, toError } from '../observability/errors.ts';

/** Throws (a PortalError(TermExpired)) when the side effect must not be sent any more. */
export type Fence = () => void;

/** Sockets our agents handed over connected (TLS: handshake done); pooled ones stay in the set. */
const connected = new WeakSet<Duplex>();

type ConnectCallback = (err: Error | null, stream: Duplex) => void;

/** Waits for `ready` before handing `socket` to the agent's callback. */
function handOverWhenConnected(socket: Duplex, ready: 'connect' | 'secureConnect', callback: ConnectCallback): void {
  const onReady = () => {
    socket.off('error', onError);
    connected.add(socket);
    callback(null, socket);
  };
  const onError = (err: Error) => {
    socket.off(ready, onReady);
    socket.destroy();
    callback(err, socket);
  };
  socket.once(ready, onReady);
  socket.once('error', onError);
}

/** An http.Agent that hands a socket to a request only once it is connected. */
export class ConnectedHttpAgent extends http.Agent {
  override createConnection(options: http.ClientRequestArgs, callback?: ConnectCallback): Duplex | null | undefined {
    const socket = super.createConnection(options) as Duplex;
    if (!callback) throw new Error('ConnectedHttpAgent: Node did not pass a createConnection callback');
    handOverWhenConnected(socket, 'connect', callback);
    return undefined;
  }
}

/** An https.Agent that hands a socket to a request only once its TLS handshake is done. */
export class ConnectedHttpsAgent extends https.Agent {
  override createConnection(options: http.ClientRequestArgs, callback?: ConnectCallback): Duplex | null | undefined {
    // https.Agent's own createConnection: servername, session reuse, the agent's TLS options.
    const socket = super.createConnection(options) as Duplex;
    if (!callback) throw new Error('ConnectedHttpsAgent: Node did not pass a createConnection callback');
    handOverWhenConnected(socket, socket instanceof TLSSocket ? 'secureConnect' : 'connect', callback);
    return undefined;
  }
}

export type ConnectedAgent = ConnectedHttpAgent | ConnectedHttpsAgent;

/** Stops pooling on `agent`: idle sockets close now, busy ones when their request is done. */
export function retireAgent(agent: http.Agent): void {
  agent.keepSocketAlive = () => false;
  for (const sockets of Object.values(agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
}

export interface FencedSendOptions {
  method: string;
  headers?: Record<string, string>;
  body?: string | Buffer | undefined;
  /** A {@link ConnectedHttpAgent} / {@link ConnectedHttpsAgent} matching the URL's protocol. */
  agent: ConnectedAgent;
  signal?: AbortSignal | undefined;
  /** Checked before the request starts and synchronously before its first byte reaches the connected socket. */
  fence: Fence;
}

export interface FencedResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * One HTTP request whose bytes are written only if `fence()` passes at the
 * moment its connected socket is assigned (see the module comment). Rejects
 * with the fence's error when fenced, with `signal.reason` when aborted,
 * otherwise with the transport error.
 */
export function sendFenced(url: string, options: FencedSendOptions): Promise<FencedResponse> {
  return new Promise((resolve, reject) => {
    const { signal, fence, agent } = options;
    if (signal?.aborted) return reject(signal.reason as Error);
    try {
      fence();
    } catch (err) {
      return reject(err as Error);
    }
    const target = new URL(url);
    const isTls = target.protocol === 'https:';
    if (isTls !== agent instanceof ConnectedHttpsAgent) return reject(new PortalError(ErrorCode.Internal, `fenced request to ${target.origin} needs a ${isTls ? 'ConnectedHttpsAgent' : 'ConnectedHttpAgent'}`));
    const body = options.body === undefined ? undefined : Buffer.isBuffer(options.body) ? options.body : Buffer.from(options.body);
    const headers: Record<string, string> = { ...options.headers };
    if (body) headers['content-length'] = String(body.length);
    let fenceError: unknown;
    const req = (isTls ? https : http).request(target, { method: options.method, headers, agent });
    const onAbort = () => req.destroy(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
    signal?.addEventListener('abort', onAbort, { once: true });
    let settled = false;
    const settle = (err: unknown, res?: FencedResponse) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      if (res) resolve(res);
      else reject((fenceError ?? (signal?.aborted ? signal.reason : err)) as Error);
    };
    req.once('socket', (socket: Duplex) => {
      // Nothing of this request has been written yet (no write/end before this point).
      if (!connected.has(socket)) {
        fenceError = new PortalError(ErrorCode.Internal, 'fenced request got a socket its agent did not connect first');
        req.destroy(fenceError as Error);
        return;
      }
      try {
        fence();
      } catch (err) {
        fenceError = err;
        req.destroy(toError(err));
        return;
      }
      req.end(body);
    });
    req.on('error', (err) => settle(err));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (err) => settle(err));
      res.on('end', () => {
        const out: Record<string, string> = {};
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v;
        settle(undefined, { status: res.statusCode ?? 0, headers: out, body: Buffer.concat(chunks) });
      });
    });
  });
}

/** Per-request fences, registered by the call's middleware and read by the HTTP library. */
const fences = new WeakMap<RequestContext, Fence>();

/** Registers `fence` for one request (what {@link fenceMiddleware} does, for APIs that take no per-call middleware). */
export function registerFence(request: RequestContext, fence: Fence): void {
  fences.set(request, fence);
}

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

export interface FencedHttpLibraryOptions {
  /**
   * Refuse requests other than GET/HEAD that carry no fence: set for the
   * transport that exists only for leader-only writes (FencedWriter), so a
   * write cannot leave it unfenced by mistake. @default false
   */
  requireFenceForWrites?: boolean;
}

/**
 * client-node's HTTP library with pooled keep-alive connections (per TLS
 * identity) and the late fence for requests that carry one (see the module
 * comment). `close()` closes idle sockets and refuses further requests.
 */
export class FencedHttpLibrary implements HttpLibrary {
  readonly #inner = new IsomorphicFetchHttpLibrary();
  readonly #agents = new Map<string, ConnectedAgent>();
  readonly #requireFence: boolean;
  readonly #inFlight = new Set<Promise<void>>();
  #closed = false;

  constructor(options: FencedHttpLibraryOptions = {}) {
    this.#requireFence = options.requireFenceForWrites ?? false;
  }

  send(request: RequestContext): Observable<ResponseContext> {
    if (this.#closed) return new Observable(Promise.reject(new PortalError(ErrorCode.Closed, 'the Kubernetes transport is closed')));
    const fence = fences.get(request);
    const method = request.getHttpMethod().toString();
    if (!fence && this.#requireFence && method !== 'GET' && method !== 'HEAD') {
      return new Observable(Promise.reject(new PortalError(ErrorCode.Internal, `${method} ${new URL(request.getUrl()).pathname}: a leader-only write without a term (pass the writer's options)`)));
    }
    const given = request.getAgent();
    // A proxy's agent (kubeconfig proxy-url) is kept as it is; it cannot hand over connected sockets.
    const isProxy = given !== undefined && given.constructor !== https.Agent && given.constructor !== http.Agent;
    if (!fence) {
      if (!isProxy) request.setAgent(this.#shared(given, request.getUrl().startsWith('https:')));
      return this.#inner.send(request);
    }
    if (isProxy) return new Observable(Promise.reject(new PortalError(ErrorCode.ConfigInvalid, 'leader-only writes cannot be fenced through a proxy (kubeconfig proxy-url); connect to the API server directly')));
    const agent = this.#shared(given, request.getUrl().startsWith('https:'));
    const body = request.getBody();
    if (body !== undefined && typeof body !== 'string' && !Buffer.isBuffer(body)) {
      return new Observable(Promise.reject(new PortalError(ErrorCode.Internal, 'fenced requests take a string or Buffer body')));
    }
    const sent = sendFenced(request.getUrl(), { method, headers: request.getHeaders(), body, agent, signal: request.getSignal(), fence }).then(
      (res) => new ResponseContext(res.status, res.headers, { text: () => Promise.resolve(res.body.toString('utf8')), binary: () => Promise.resolve(res.body) }),
    );
    const settled = sent.then(
      () => undefined,
      () => undefined,
    );
    this.#inFlight.add(settled);
    void settled.then(() => this.#inFlight.delete(settled));
    return new Observable(sent);
  }

  /** Resolves once the fenced requests sent so far have settled. */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.#inFlight]);
  }

  /** Refuses further requests; idle sockets close now, requests in flight finish (and close their sockets). Idempotent. */
  close(): void {
    this.#closed = true;
    for (const agent of this.#agents.values()) retireAgent(agent);
    this.#agents.clear();
  }

  /** The shared keep-alive, connect-first equivalent of a per-request agent from KubeConfig. */
  #shared(agent: http.Agent | https.Agent | undefined, isTls: boolean): ConnectedAgent {
    const options = ((agent as (http.Agent & { options?: Record<string, unknown> }) | undefined)?.options ?? {}) as Record<string, unknown>;
    const key = digest([isTls ? 'https' : 'http', ...AGENT_OPTION_KEYS.map((k) => options[k])]);
    let shared = this.#agents.get(key);
    if (!shared) {
      const picked = Object.fromEntries(AGENT_OPTION_KEYS.filter((k) => options[k] !== undefined).map((k) => [k, options[k]]));
      // keepAliveMsecs: TCP keep-alive probe delay on idle pooled sockets (Node's default, 1 s).
      shared = isTls ? new ConnectedHttpsAgent({ ...picked, keepAlive: true, keepAliveMsecs: 1000 }) : new ConnectedHttpAgent({ keepAlive: true, keepAliveMsecs: 1000 });
      this.#agents.set(key, shared);
      if (this.#agents.size > MAX_SHARED_AGENTS) {
        const [oldestKey, oldest] = this.#agents.entries().next().value as [string, ConnectedAgent];
        this.#agents.delete(oldestKey);
        retireAgent(oldest);
      }
    }
    return shared;
  }
}
