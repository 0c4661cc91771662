/**
 * The admission hot path without fastify's per-request machinery.
 *
 * Why: measured with bench/admission.ts on the same machine and run, a
 * fastify route that only parses the review and echoes an allow costs about
 * 10 µs of CPU per request more than the bare Node HTTPS ceiling (request
 * and reply objects, hooks, the content-type parser's async scope, reply
 * serialisation checks): about half of everything Portal adds on top of the
 * ceiling, more than evaluating the 20 shipped rules' schemas. kube-apiserver
 * sends one request shape only, so that shape is served here directly and
 * every other request (another method or path, another content type, no or
 * too large a Content-Length, chunked bodies, a second route) goes to fastify
 * unchanged, with its 404/405/413/415 answers and error handler.
 *
 * The seam is fastify's documented `serverFactory`: the HTTPS server is
 * created here with fastify's own TLS options, and its request listener
 * chooses between this path and fastify's handler. Both paths call the same
 * `answer` function (decode, decide, metrics, logs), so they cannot disagree
 * on a decision.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server as HttpsServer, type ServerOptions } from 'node:https';

/** An answer ready for the wire. */
export interface WireAnswer {
  status: number;
  /** JSON text. */
  payload: string;
}

export interface FastPathOptions {
  /** The webhook path (a query string such as `?timeout=10s` is allowed). */
  path: string;
  /** Larger bodies go to fastify, which answers 413. */
  bodyLimit: number;
  /** Decides on a raw body; may throw or reject. */
  answer: (body: string, peer?: string) => WireAnswer | Promise<WireAnswer>;
  /** The answer when `answer` throws or rejects (a denial with the uid when known). */
  onError: (err: unknown, body: string) => WireAnswer;
  /**
   * Takes every request before either path and starts it (calls the
   * given dispatch) when its turn comes (peer-queue.ts). @default at once
   */
  turns?: (dispatch: (req: IncomingMessage, res: ServerResponse) => void) => (req: IncomingMessage, res: ServerResponse) => void;
}

const JSON_WITH_PARAMS = /^application\/json\s*;/;
const DIGITS = /^\d+$/;

/** Whether `req` is the common, well-formed webhook call this path serves. */
export function takesFastPath(req: IncomingMessage, path: string, bodyLimit: number): boolean {
  if (req.method !== 'POST') return false;
  const url = req.url;
  if (url !== path && !(url !== undefined && url.startsWith(path) && url.charCodeAt(path.length) === 63 /* ? */)) return false;
  const type = req.headers['content-type'];
  if (type !== 'application/json' && (type === undefined || !JSON_WITH_PARAMS.test(type))) return false;
  if (req.headers['transfer-encoding'] !== undefined) return false;
  const length = req.headers['content-length'];
  if (length === undefined || !DIGITS.test(length)) return false;
  const n = Number(length);
  return n > 0 && n <= bodyLimit;
}

function send(res: ServerResponse, a: WireAnswer): void {
  if (res.destroyed) return;
  res.writeHead(a.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(a.payload) });
  res.end(a.payload);
}

/** Reads the body (its length is bounded by takesFastPath) and answers. */
export function serveFast(req: IncomingMessage, res: ServerResponse, opts: FastPathOptions): void {
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    size += chunk.length;
  });
  // A client that goes away mid-body: nothing to answer, the socket is gone.
  req.on('error', () => req.destroy());
  req.on('end', () => {
    const body = chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks, size).toString('utf8');
    let a: WireAnswer | Promise<WireAnswer>;
    try {
      a = opts.answer(body, req.socket.remoteAddress);
    } catch (err) {
      send(res, opts.onError(err, body));
      return;
    }
    if (a instanceof Promise) {
      a.then(
        (done) => send(res, done),
        (err: unknown) => send(res, opts.onError(err, body)),
      );
    } else send(res, a);
  });
}

/**
 * A fastify `serverFactory`: an HTTPS server whose request listener serves
 * the fast path and hands everything else to fastify. Applies the timeouts
 * fastify would have set on a server it created itself.
 */
export function fastPathServerFactory(opts: FastPathOptions) {
  return (
    fastifyHandler: (req: IncomingMessage, res: ServerResponse) => void,
    fastifyOptions: { https?: ServerOptions; keepAliveTimeout?: number; requestTimeout?: number; connectionTimeout?: number; maxRequestsPerSocket?: number },
  ): HttpsServer => {
    const dispatch = (req: IncomingMessage, res: ServerResponse): void => {
      if (takesFastPath(req, opts.path, opts.bodyLimit)) serveFast(req, res, opts);
      else fastifyHandler(req, res);
    };
    const server = createServer(fastifyOptions.https ?? {}, opts.turns ? opts.turns(dispatch) : dispatch);
    // Same as fastify's own server creation (lib/server.js) without a factory.
    if (fastifyOptions.keepAliveTimeout !== undefined) server.keepAliveTimeout = fastifyOptions.keepAliveTimeout;
    if (fastifyOptions.requestTimeout !== undefined) server.requestTimeout = fastifyOptions.requestTimeout;
    server.setTimeout(fastifyOptions.connectionTimeout ?? 0);
    if ((fastifyOptions.maxRequestsPerSocket ?? 0) > 0) server.maxRequestsPerSocket = fastifyOptions.maxRequestsPerSocket ?? 0;
    return server;
  };
}
