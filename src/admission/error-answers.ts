/**
 * The answers to requests that went wrong before or outside a decision:
 * fastify's errors (413, 415, a throw that escaped the route) and the fast
 * path's throw. Fail closed (docs/design.md §2, §3): a review whose uid can be read
 * is answered with a denial that echoes it; anything else is a Status.
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { toError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';
import type { AdmissionMetrics } from '../observability/metrics.ts';
import { internalErrorReview, reviewIdentity } from '../policy/review/answer.ts';
import type { WireAnswer } from './fast-path.ts';
import type { ReadinessGate } from './readiness.ts';

export interface ErrorAnswerDeps {
  gate: ReadinessGate;
  metrics: AdmissionMetrics;
  log: Logger;
  bodyLimit: number;
  /** Bytes of an over-limit body read and discarded so the client gets its 413 (limits.ts). */
  drainBytes: number;
}

export function statusBody(code: number, message: string): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', code, message };
}

/** Books an internal error (readiness when it was a review, metrics, log); never throws: the answer must still go out. */
function noteInternal(deps: ErrorAnswerDeps, err: unknown, uid: string | undefined): void {
  try {
    if (uid !== undefined) deps.gate.record(true);
    else deps.metrics.requests.inc({ operation: '', kind: '', decision: 'invalid' });
    deps.metrics.errors.inc({ reason: 'internal' });
    deps.log.error({ [LogKey.error]: toError(err), ...(uid !== undefined ? { [LogKey.uid]: uid } : {}) }, 'unexpected error in the admission server');
  } catch {
    // Still answer.
  }
}

/** The fast path's answer to a throw: a denial echoing the uid when the body has one. */
export function internalErrorAnswer(deps: ErrorAnswerDeps, err: unknown, body: string, code = 500): WireAnswer {
  const identity = reviewIdentity(body);
  noteInternal(deps, err, identity?.uid);
  if (identity) return { status: 200, payload: internalErrorReview(identity.apiVersion, identity.uid, 'internal error') };
  return { status: code, payload: JSON.stringify(statusBody(code, 'internal error')) };
}

/** fastify's error handler: 413 after draining, 415, 4xx as fastify names them, and a 5xx as above. */
export function errorHandler(deps: ErrorAnswerDeps): (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => unknown {
  const { metrics, bodyLimit } = deps;
  return (err, req, reply) => {
    const code = err.statusCode ?? 500;
    if (code === 413) {
      metrics.requests.inc({ operation: '', kind: '', decision: 'invalid' });
      metrics.errors.inc({ reason: 'invalid_input' });
      const tooLarge = (): FastifyReply =>
        reply
          .code(413)
          .header('connection', 'close')
          .send(statusBody(413, `request body is larger than the limit of ${bodyLimit} bytes; an AdmissionReview from the API server is at most ${bodyLimit} bytes`));
      return drain(req.raw, deps.drainBytes).then(tooLarge);
    }
    if (code >= 500) {
      // An error after the review was read (the route guards every step it knows of; this catches the rest).
      const a = internalErrorAnswer(deps, err, typeof req.body === 'string' ? req.body : '', code);
      return reply.code(a.status).header('content-type', 'application/json').send(a.payload);
    }
    const message = code === 415 ? 'unsupported content type; send an AdmissionReview as application/json' : err.message;
    metrics.requests.inc({ operation: '', kind: '', decision: 'invalid' });
    metrics.errors.inc({ reason: 'invalid_input' });
    return reply.code(code).send(statusBody(code, message));
  };
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
