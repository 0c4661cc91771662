/**
 * The admission webhook server factory (fastify, HTTPS only). Returns an
 * un-listened instance: the CLI listens, tests use `inject()` or port 0.
 *
 * Fail closed (docs/design.md §3): a request is allowed only when the engine decided
 * so; not ready, an exception, or a rejection all answer `allowed: false`.
 * The parts: answerer.ts (one request, from body to answer), error-answers.ts
 * (what went wrong outside a decision), fast-path.ts (the API server's
 * request shape without fastify's machinery), limits.ts (the port's bounds),
 * connection-guard.ts (the connection cap, the body rate), peer-queue.ts
 * (fair turns per remote address), acceptors.ts (several sockets accept).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import { fastify, type FastifyInstance, type FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import type { AdmissionMetrics } from '../observability/metrics.ts';
import { PORTAL_KINDS, type PortalKind } from '../policy/portal-kinds.ts';
import { addAcceptors } from './acceptors.ts';
import { Answerer, type AnswererDeps } from './answerer.ts';
import { guardConnections, type ConnectionGuard } from './connection-guard.ts';
import type { ExemptNamespaces } from '../policy/review/answer.ts';
import type { AnswerReview } from './decision.ts';
import { errorHandler, internalErrorAnswer, statusBody, type ErrorAnswerDeps } from './error-answers.ts';
import { fastPathServerFactory, type WireAnswer } from './fast-path.ts';
import { ADMISSION_BODY_LIMIT, CONNECTION_LIMITS, type ConnectionLimits } from './limits.ts';
import { PeerQueue } from './peer-queue.ts';
import { answerPortalKinds, PORTAL_KINDS_PATH } from './portal-kinds.ts';
import { toError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';
import type { ReadinessGate } from './readiness.ts';
import { secureContextOptions, type TlsMaterial } from './tls-reload.ts';


export interface AdmissionServerOptions {
  /**
   * Where decisions come from: the whole review answered by the evaluation
   * pool (adr/0013, `EvaluationPool.review`); while the replica is ready the
   * main thread parses nothing.
   */
  answerReview: AnswerReview;
  tls: TlsMaterial;
  /** Readiness: `/validate` denies while `gate.synced()` is false; outcomes are recorded in it. */
  gate: ReadinessGate;
  /** The namespaces allowed unevaluated, built once (replica.ts) and shared with the pool: for the answers given here (not ready, refused by the pool). */
  exempt: ExemptNamespaces;
  metrics: AdmissionMetrics;
  /**
   * The `kind` label for a request's kind: a bounded set, never the raw
   * string (kind-label.ts maps kinds no rule names to `other`).
   */
  kindLabel: (kind: string) => string;
  logger: Logger;
  /** @default ADMISSION_BODY_LIMIT */
  bodyLimit?: number;
  /** @default CONNECTION_LIMITS */
  limits?: Partial<ConnectionLimits>;
  /** What `POST /validate-portal-kinds` checks (issue 15 item 2). @default PORTAL_KINDS */
  portalKinds?: Readonly<Record<string, PortalKind>>;
  /** One info line per denied request (denial-log.ts); absent: none. */
  denials?: AnswererDeps['denials'];
};

export type AdmissionServer = FastifyInstance<HttpsServer>;

export function buildAdmissionServer(opts: AdmissionServerOptions): AdmissionServer {
  const limits: ConnectionLimits = { ...CONNECTION_LIMITS, ...opts.limits };
  const bodyLimit = opts.bodyLimit ?? ADMISSION_BODY_LIMIT;
  const errors: ErrorAnswerDeps = { gate: opts.gate, metrics: opts.metrics, log: opts.logger, bodyLimit, drainBytes: limits.drainBytes };
  const answerer = new Answerer({
    answerReview: opts.answerReview,
    gate: opts.gate,
    exempt: opts.exempt,
    metrics: opts.metrics,
    kindLabel: opts.kindLabel,
    log: opts.logger,
    denials: opts.denials,
  });
  const answer = (body: unknown, peer?: string): WireAnswer | Promise<WireAnswer> => answerer.answer(body, peer);
  // The guard is made once the server exists; a queued request reaches it only later.
  const made: { guard?: ConnectionGuard } = {};
  const turns = (dispatch: (req: IncomingMessage, res: ServerResponse) => void): ((req: IncomingMessage, res: ServerResponse) => void) => {
    const queue = new PeerQueue({
      maxActive: limits.maxActive,
      maxActivePerPeer: limits.maxActivePerPeer,
      dispatch,
      onWait: (req) => made.guard?.waiting(req),
      onTurn: (req) => made.guard?.reading(req),
      onWaiting: (n) => opts.metrics.requestsWaiting.set(n),
    });
    return (req, res) => queue.enter(req, res);
  };
  const app = fastify({
    https: httpsOptions(opts.tls, limits),
    // POST /validate as kube-apiserver sends it skips fastify's per-request
    // machinery (src/admission/fast-path.ts); everything else is fastify's.
    // The server (and so every limit above and maxConnections below) is the
    // same for both paths; bodies over the limit always go to fastify's 413.
    serverFactory: fastPathServerFactory({ path: '/validate', bodyLimit, answer, onError: (err, body) => internalErrorAnswer(errors, err, body), turns }),
    bodyLimit,
    requestTimeout: limits.requestMs,
    logger: false,
    // Idle keep-alive connections are closed on shutdown; in-flight requests finish.
    forceCloseConnections: 'idle',
  }) as unknown as AdmissionServer;

  // The cap is the guard's, not Node's `maxConnections` (which would refuse
  // the new connection even when idle ones hold the cap).
  made.guard = guardConnections(app.server, {
    maxConnections: limits.maxConnections,
    maxPerPeer: limits.maxPerPeer,
    bodyRate: { graceMs: limits.bodyGraceMs, minBytesPerSecond: limits.minBodyBytesPerSecond, checkIntervalMs: limits.checkIntervalMs },
    onClose: (reason) => opts.metrics.connectionsClosed.inc({ reason }),
    onCount: (open) => opts.metrics.connections.set(open),
  });

  addAcceptors(app.server, {
    count: limits.acceptors,
    onError: (err) => opts.logger.warn({ [LogKey.error]: toError(err) }, 'the webhook port accepts on one socket only (SO_REUSEPORT refused)'),
  });

  // We parse JSON ourselves so a malformed body still gets our clear 400
  // (and any other media type fastify's 415).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  app.setErrorHandler(errorHandler(errors));
  addRoutes(app, answer, opts.portalKinds ?? PORTAL_KINDS, opts.metrics);
  return app;
}

function httpsOptions(tls: TlsMaterial, limits: ConnectionLimits): Record<string, unknown> {
  return {
    ...secureContextOptions(tls),
    // With a client CA, a peer without a certificate it signed is refused
    // in the TLS handshake: before any HTTP parsing, and before it can
    // hold more than a handshaking connection (connection-guard.ts).
    ...(tls.ca !== undefined ? { requestCert: true, rejectUnauthorized: true } : {}),
    handshakeTimeout: limits.handshakeMs,
    // http.Server options, which https.createServer passes through.
    headersTimeout: limits.headersMs,
    requestTimeout: limits.requestMs,
    connectionsCheckingInterval: limits.checkIntervalMs,
  };
}

function addRoutes(app: AdmissionServer, answer: (body: unknown, peer?: string) => WireAnswer | Promise<WireAnswer>, portalKinds: Readonly<Record<string, PortalKind>>, metrics: AdmissionMetrics): void {
  // kube-apiserver only ever POSTs; anything else is a client mistake worth a
  // precise answer rather than a 404.
  app.route({
    method: ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE'],
    url: '/validate',
    handler: (_req, reply) => reply.code(405).header('Allow', 'POST').send(statusBody(405, 'method not allowed: send the AdmissionReview with POST')),
  });
  // Requests the fast path does not take (e.g. a charset-less content type
  // variant, chunked bodies) arrive here; same answer function. The handler
  // stays synchronous unless the answer is a promise: at thousands of
  // requests per second the extra microtask hops are measurable.
  app.post('/validate', (req, reply) => {
    const a = answer(req.body, req.socket.remoteAddress);
    return a instanceof Promise ? a.then((done) => send(reply, done)) : send(reply, a);
  });
  // Portal's own kinds (the chart's second webhook, failurePolicy Ignore): validated like
  // the RuleSet compiles them (a rule on a thread, on a replica). Rare requests, so fastify's
  // ordinary route; a throw or a rejection goes to the error handler, which denies with the uid.
  app.post(PORTAL_KINDS_PATH, (req, reply) => {
    const a = answerPortalKinds(req.body, portalKinds, metrics, req.socket.remoteAddress);
    return a instanceof Promise ? a.then((done) => send(reply, done)) : send(reply, a);
  });
}

function send(reply: FastifyReply, a: WireAnswer): FastifyReply {
  return reply.code(a.status).header('content-type', 'application/json').send(a.payload);
}
