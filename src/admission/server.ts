/**
 * The admission webhook server factory (fastify, HTTPS only). Returns an
 * un-listened instance: the CLI listens, tests use `inject()` or port 0.
 *
 * Fail closed (DESIGN §3): a request is allowed only when the engine decided
 * so; not ready, an exception, or a rejection all answer `allowed: false`.
 */
import type { IncomingMessage } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import { fastify, type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import type { EvaluationInput } from '../policy/types.ts';
import { clipText, MAX_WARNING_LENGTH } from '../policy/decision.ts';
import { LogKey } from '../observability/log-keys.ts';
import type { AdmissionDecision, AdmissionMetrics } from '../observability/metrics.ts';
import { EXCEPTION_AUDIT_ANNOTATION, type Decide, type Decision, type NamespaceLabels } from './decision.ts';
import { guardConnections } from './connection-guard.ts';
import { exemption } from './exemptions.ts';
import { PORTAL_KINDS, type PortalKind } from '../policy/portal-kinds.ts';
import { answerPortalKinds, PORTAL_KINDS_PATH } from './portal-kinds.ts';
import { fastPathServerFactory, type WireAnswer } from './fast-path.ts';
import { depthExceededAt, MAX_JSON_DEPTH } from './json-depth.ts';
import type { ReadinessGate } from './readiness.ts';
import { decodeReview, encodeReview, type AdmissionRequest, type AdmissionResponseBody, type ReviewVersion } from './review.ts';
import { secureContextOptions, type TlsMaterial } from './tls-reload.ts';
import { toError } from '../observability/errors.ts';

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


export interface AdmissionServerOptions {
  tls: TlsMaterial;
  decide: Decide;
  /** Readiness: `/validate` denies while `gate.synced()` is false; outcomes are recorded in it. */
  gate: ReadinessGate;
  /** Already includes the install namespace. */
  exemptNamespaces: readonly string[];
  namespaceLabels: NamespaceLabels;
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
}

export type AdmissionServer = FastifyInstance<HttpsServer>;

interface Outcome {
  httpStatus: number;
  apiVersion: ReviewVersion;
  response: AdmissionResponseBody;
  decision: AdmissionDecision;
  request?: AdmissionRequest;
}

export function buildAdmissionServer(opts: AdmissionServerOptions): AdmissionServer {
  const exempt = new Set(opts.exemptNamespaces);
  const { metrics, gate, logger: log } = opts;

  const limits: ConnectionLimits = { ...CONNECTION_LIMITS, ...opts.limits };
  const bodyLimit = opts.bodyLimit ?? ADMISSION_BODY_LIMIT;
  const app = fastify({
    https: {
      ...secureContextOptions(opts.tls),
      // With a client CA, a peer without a certificate it signed is refused
      // in the TLS handshake: before any HTTP parsing, and before it can
      // hold more than a handshaking connection (connection-guard.ts).
      ...(opts.tls.ca !== undefined ? { requestCert: true, rejectUnauthorized: true } : {}),
      handshakeTimeout: limits.handshakeMs,
      // http.Server options, which https.createServer passes through.
      headersTimeout: limits.headersMs,
      requestTimeout: limits.requestMs,
      connectionsCheckingInterval: limits.checkIntervalMs,
    },
    // POST /validate as kube-apiserver sends it skips fastify's per-request
    // machinery (src/admission/fast-path.ts); everything else is fastify's.
    // The server (and so every limit above and maxConnections below) is the
    // same for both paths; bodies over the limit always go to fastify's 413.
    serverFactory: fastPathServerFactory({
      path: '/validate',
      bodyLimit,
      answer: (body) => answer(body),
      onError: (err, body) => internalError(err, body),
    }),
    bodyLimit,
    requestTimeout: limits.requestMs,
    logger: false,
    // Idle keep-alive connections are closed on shutdown; in-flight requests finish.
    forceCloseConnections: 'idle',
  }) as unknown as AdmissionServer;

  // The cap is the guard's, not Node's `maxConnections` (which would refuse
  // the new connection even when idle ones hold the cap).
  guardConnections(app.server, {
    maxConnections: limits.maxConnections,
    maxPerPeer: limits.maxPerPeer,
    onClose: (reason) => metrics.connectionsClosed.inc({ reason }),
    onCount: (open) => metrics.connections.set(open),
  });

  // We parse JSON ourselves so a malformed body still gets our clear 400
  // (and any other media type fastify's 415).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => done(null, body));

  app.setErrorHandler((err: FastifyError, req, reply) => {
    const code = err.statusCode ?? 500;
    if (code === 413) {
      metrics.requests.inc({ operation: '', kind: '', decision: 'invalid' });
      metrics.errors.inc({ reason: 'invalid_input' });
      const tooLarge = (): FastifyReply =>
        reply
          .code(413)
          .header('connection', 'close')
          .send(statusBody(413, `request body is larger than the limit of ${bodyLimit} bytes; an AdmissionReview from the API server is at most ${bodyLimit} bytes`));
      return drain(req.raw, limits.drainBytes).then(tooLarge);
    }
    const identity = code >= 500 ? reviewIdentity(req.body) : undefined;
    if (identity) {
      // An error after the review was read (the route guards every step it
      // knows of; this catches the rest): a denial that echoes the uid.
      try {
        gate.record(true);
        metrics.errors.inc({ reason: 'internal' });
        log.error({ [LogKey.error]: toError(err), [LogKey.uid]: identity.uid }, 'unexpected error in the admission server');
      } catch {
        // Still answer below.
      }
      return reply.code(200).header('content-type', 'application/json').send(internalErrorReview(identity.apiVersion, identity.uid, 'internal error'));
    }
    let message: string;
    if (code === 415) message = 'unsupported content type; send an AdmissionReview as application/json';
    else if (code < 500) message = err.message;
    else {
      log.error({ [LogKey.error]: toError(err) }, 'unexpected error in the admission server');
      message = 'internal error';
    }
    metrics.requests.inc({ operation: '', kind: '', decision: 'invalid' });
    metrics.errors.inc({ reason: code >= 500 ? 'internal' : 'invalid_input' });
    return reply.code(code).send(statusBody(code, message));
  });

  // The handler stays synchronous unless the decider returns a promise: at
  // thousands of requests per second the extra microtask hops are measurable.
  // kube-apiserver only ever POSTs; anything else is a client mistake worth a
  // precise answer rather than a 404.
  app.route({
    method: ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE'],
    url: '/validate',
    handler: (_req, reply) => reply.code(405).header('Allow', 'POST').send(statusBody(405, 'method not allowed: send the AdmissionReview with POST')),
  });

  // Requests the fast path does not take (e.g. a charset-less content type
  // variant, chunked bodies) arrive here; same answer function.
  app.post('/validate', (req, reply) => {
    const a = answer(req.body);
    return a instanceof Promise ? a.then((done) => send(reply, done)) : send(reply, a);
  });

  // Portal's own kinds (the chart's second webhook, failurePolicy Ignore): validated like
  // the RuleSet compiles them. Rare requests, so fastify's ordinary route; a throw goes to
  // the error handler above, which denies with the uid.
  const portalKinds = opts.portalKinds ?? PORTAL_KINDS;
  app.post(PORTAL_KINDS_PATH, (req, reply) => {
    const a = answerPortalKinds(req.body, portalKinds, metrics);
    return reply.code(a.status).header('content-type', 'application/json').send(a.payload);
  });

  /** Decides on a raw body and serialises the answer; shared by fastify's route and the fast path. */
  function answer(body: unknown): WireAnswer | Promise<WireAnswer> {
    const started = performance.now();
    metrics.inFlight.inc();
    let out: Outcome | Promise<Outcome>;
    try {
      out = handle(body);
    } catch (err) {
      metrics.inFlight.dec();
      throw err;
    }
    if (out instanceof Promise) {
      return out.then(
        (o) => finish(o, started),
        (err: unknown) => {
          metrics.inFlight.dec();
          throw err;
        },
      );
    }
    return finish(out, started);
  }

  /** The fast path's equivalent of the error handler's 5xx branch: a denial echoing the uid when the body has one. */
  function internalError(err: unknown, body: string): WireAnswer {
    const identity = reviewIdentity(body);
    try {
      if (identity) gate.record(true);
      else metrics.requests.inc({ operation: '', kind: '', decision: 'invalid' });
      metrics.errors.inc({ reason: 'internal' });
      log.error({ [LogKey.error]: toError(err), ...(identity ? { [LogKey.uid]: identity.uid } : {}) }, 'unexpected error in the admission server');
    } catch {
      // Still answer below.
    }
    if (identity) return { status: 200, payload: internalErrorReview(identity.apiVersion, identity.uid, 'internal error') };
    return { status: 500, payload: JSON.stringify(statusBody(500, 'internal error')) };
  }

  function finish(out: Outcome, started: number): WireAnswer {
    metrics.inFlight.dec();
    let result = out;
    try {
      observe(out, started);
    } catch (err) {
      // The decision is made but could not be recorded: the request is
      // still answered, with its uid, and as a denial (fail closed): a
      // replica whose bookkeeping is broken must not keep admitting unseen.
      result = out.request ? failed(out.apiVersion, out.request, err) : out;
    }
    return wire(result, log);
  }

  function observe(out: Outcome, started: number): void {
    const r = out.request;
    const ms = performance.now() - started;
    metrics.answered(r?.operation ?? '', r ? opts.kindLabel(r.kind.kind) : '', out.decision, ms / 1000);
    if (out.decision === 'error' || log.isLevelEnabled('debug')) {
      // Identifiers only: never the object (it can be a Secret).
      log[out.decision === 'error' ? 'warn' : 'debug'](
        {
          [LogKey.uid]: out.response.uid,
          [LogKey.operation]: r?.operation,
          [LogKey.kind]: r?.kind.kind,
          [LogKey.namespace]: r?.namespace,
          [LogKey.name]: r?.name,
          [LogKey.decision]: out.decision,
          [LogKey.durationMs]: ms,
          [LogKey.reason]: out.response.status?.message,
        },
        'admission request',
      );
    }
  }

  function handle(body: unknown): Outcome | Promise<Outcome> {
    let parsed: unknown;
    if (typeof body !== 'string' || body.trim() === '') return invalid('empty body; send an AdmissionReview as JSON');
    // Refused before parsing, and as malformed input (400): it is the
    // client's, so it never counts against readiness (json-depth.ts).
    const tooDeep = depthExceededAt(body);
    if (tooDeep >= 0) return invalid(tooDeepMessage(tooDeep));
    try {
      parsed = JSON.parse(body);
    } catch (err) {
      return invalid(`malformed JSON: ${(err as Error).message}`);
    }
    const decoded = decodeReview(parsed);
    if (!decoded.ok) return invalid(decoded.message, decoded.uid, decoded.apiVersion);
    const { apiVersion, request } = decoded;
    const base = { httpStatus: 200, apiVersion, request };

    if (exemption(request, exempt) !== undefined) {
      return { ...base, decision: 'exempt', response: { uid: request.uid, allowed: true } };
    }
    const notReady = gate.sourceReasons();
    if (notReady.length > 0) {
      return {
        ...base,
        decision: 'not_ready',
        response: {
          uid: request.uid,
          allowed: false,
          status: {
            code: 503,
            reason: 'ServiceUnavailable',
            message: `portal is not ready (${notReady.join('; ')}); the request is denied until it is`,
          },
        },
      };
    }

    let result: Decision | Promise<Decision>;
    try {
      result = opts.decide(toInput(request, opts.namespaceLabels), body);
    } catch (err) {
      return failed(apiVersion, request, err);
    }
    // Closures only on the (rare) asynchronous path, not allocated per request.
    return result instanceof Promise
      ? result.then(
          (d) => safeDecided(apiVersion, request, d),
          (err: unknown) => failed(apiVersion, request, err),
        )
      : safeDecided(apiVersion, request, result);
  }

  /** decided(), with a throw while shaping the answer (e.g. a warning that is not a string) turned into a denial that keeps the uid. */
  function safeDecided(apiVersion: ReviewVersion, request: AdmissionRequest, decision: Decision): Outcome {
    try {
      return decided(apiVersion, request, decision);
    } catch (err) {
      return failed(apiVersion, request, err);
    }
  }

  /** Never throws: the answer that carries the uid must not depend on the logger or the metrics working. */
  function failed(apiVersion: ReviewVersion, request: AdmissionRequest, err: unknown): Outcome {
    try {
      gate.record(true);
      metrics.errors.inc({ reason: 'internal' });
      log.error({ [LogKey.error]: toError(err), [LogKey.uid]: request.uid }, 'internal error while deciding');
    } catch {
      // Bookkeeping is broken too; the denial below still goes out.
    }
    const what = `${request.kind.kind} ${request.namespace ? `${request.namespace}/` : ''}${request.name || '(unnamed)'}`;
    return {
      httpStatus: 200,
      apiVersion,
      request,
      decision: 'error',
      response: {
        uid: request.uid,
        allowed: false,
        status: { code: 500, reason: 'InternalError', message: `internal error evaluating ${what}: ${errorMessage(err)}` },
      },
    };
  }

  function decided(apiVersion: ReviewVersion, request: AdmissionRequest, decision: Decision): Outcome {
    if (decision === null || typeof decision !== 'object' || typeof decision.allowed !== 'boolean' || !Array.isArray(decision.warnings)) {
      return failed(apiVersion, request, new TypeError('the engine returned no decision'));
    }
    const exempted = decision.exempted;
    if (decision.allowed && decision.warnings.length === 0 && (exempted === undefined || exempted.length === 0)) {
      gate.record(false);
      return { httpStatus: 200, apiVersion, request, decision: 'allow', response: { uid: request.uid, allowed: true } };
    }
    const warnings = decision.warnings.map(clipWarning);
    const response: AdmissionResponseBody = decision.allowed
      ? { uid: request.uid, allowed: true }
      : {
          uid: request.uid,
          allowed: false,
          status: { code: decision.code, reason: decision.code === 403 ? 'Forbidden' : 'InternalError', message: decision.message },
        };
    if (warnings.length > 0) response.warnings = warnings;
    if (exempted !== undefined && exempted.length > 0) {
      // Who was exempted and by what, in the API server's audit log (issue 18).
      response.auditAnnotations = { [EXCEPTION_AUDIT_ANNOTATION]: [...new Set(exempted.map((e) => e.exception))].join(',') };
      for (const e of exempted) metrics.exceptionsApplied.inc({ exception: e.exception, rule: e.rule });
    }
    gate.record(false);
    return { httpStatus: 200, apiVersion, request, response, decision: !decision.allowed ? 'deny' : warnings.length > 0 ? 'warn' : 'allow' };
  }

  function invalid(message: string, uid?: string, apiVersion?: ReviewVersion): Outcome {
    metrics.errors.inc({ reason: 'invalid_input' });
    return {
      httpStatus: 400,
      apiVersion: apiVersion ?? 'admission.k8s.io/v1',
      decision: 'invalid',
      response: { uid: uid ?? '', allowed: false, status: { code: 400, reason: 'BadRequest', message } },
    };
  }

  return app;
}

function send(reply: FastifyReply, a: WireAnswer): FastifyReply {
  return reply.code(a.status).header('content-type', 'application/json').send(a.payload);
}

/** The answer on the wire; shared by fastify's route and the fast path. */
function wire(out: Outcome, log: Logger): WireAnswer {
  try {
    return { status: out.httpStatus, payload: serializeReview(out.apiVersion, out.response) };
  } catch (err) {
    // The answer could not be encoded (say, a message that is not a
    // string): deny with the uid rather than let the error handler answer
    // without one (the API server rejects an answer whose uid differs).
    try {
      log.error({ [LogKey.error]: toError(err), [LogKey.uid]: out.response.uid }, 'cannot encode the admission answer');
    } catch {
      // Nothing more to do: the denial below still goes out.
    }
    return { status: 200, payload: internalErrorReview(out.apiVersion, out.response.uid, 'internal error encoding the answer') };
  }
}

/**
 * Reads and discards what is left of a request body, up to `max` bytes:
 * resolves when the body has ended, was cut off, or went over `max`. The
 * request timeout still bounds how long this can take.
 */
function drain(req: IncomingMessage, max: number): Promise<void> {
  if (req.complete || req.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let seen = 0;
    const done = (): void => {
      req.off('data', onData);
      req.off('end', done);
      req.off('close', done);
      req.off('error', done);
      resolve();
    };
    const onData = (chunk: Buffer): void => {
      seen += chunk.length;
      if (seen > max) done();
    };
    req.on('data', onData);
    req.once('end', done);
    req.once('close', done);
    req.once('error', done);
    req.resume();
  });
}

/** A denial built only from strings known to encode: the last resort that still carries the uid. */
function internalErrorReview(apiVersion: ReviewVersion, uid: string, message: string): string {
  return JSON.stringify(encodeReview(apiVersion, { uid, allowed: false, status: { code: 500, reason: 'InternalError', message } }));
}

/**
 * The uid and version of the review in a body that fastify handed to the
 * route, for the error handler: an error that escaped the route must still
 * be answered with the request's uid.
 */
function reviewIdentity(body: unknown): { uid: string; apiVersion: ReviewVersion } | undefined {
  if (typeof body !== 'string' || depthExceededAt(body) >= 0) return undefined;
  try {
    const d = decodeReview(JSON.parse(body));
    if (d.ok) return { uid: d.request.uid, apiVersion: d.apiVersion };
    return d.uid !== undefined ? { uid: d.uid, apiVersion: d.apiVersion ?? 'admission.k8s.io/v1' } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The common answer (allowed, no warnings, no status) as a template: the
 * uid is the only variable part and goes through JSON.stringify, so the
 * result is byte-for-byte what JSON.stringify(encodeReview(...)) gives,
 * without building and walking the envelope objects on every request.
 */
function serializeReview(apiVersion: ReviewVersion, response: AdmissionResponseBody): string {
  if (response.allowed && response.status === undefined && response.warnings === undefined && response.auditAnnotations === undefined) {
    return `{"apiVersion":"${apiVersion}","kind":"AdmissionReview","response":{"uid":${JSON.stringify(response.uid)},"allowed":true}}`;
  }
  return JSON.stringify(encodeReview(apiVersion, response));
}

function tooDeepMessage(at: number): string {
  return `request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep (at character ${at}); Portal does not evaluate input nested this deep, and no Kubernetes object needs it`;
}

function statusBody(code: number, message: string): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', code, message };
}

function toInput(r: AdmissionRequest, namespaceLabels: NamespaceLabels): EvaluationInput {
  let labels: Record<string, string> | undefined;
  if (r.kind.group === '' && r.kind.kind === 'Namespace') {
    const meta = (r.object ?? r.oldObject)?.metadata;
    labels = { ...(meta?.labels ?? {}), 'kubernetes.io/metadata.name': r.name };
  } else labels = r.namespace === '' ? undefined : namespaceLabels(r.namespace);
  return {
    operation: r.operation,
    kind: r.kind,
    subResource: r.subResource,
    namespace: r.namespace,
    name: r.name,
    object: r.object,
    oldObject: r.oldObject,
    namespaceLabels: labels,
    // CEL rules read the request's attributes (userInfo, dryRun, …) as `request`.
    request: r as unknown as Readonly<Record<string, unknown>>,
  };
}

/** The apiserver shows warnings to users; Portal keeps each under 120 characters (DESIGN §2), whatever the decider returned. */
function clipWarning(w: string): string {
  return clipText(w, MAX_WARNING_LENGTH);
}

function errorMessage(err: unknown): string {
  const m = err instanceof Error ? err.message : String(err);
  return clipText(m, 200);
}
