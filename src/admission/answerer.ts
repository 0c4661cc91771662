/**
 * One admission request on the main thread, from its body to the text on
 * the wire, shared by fastify's route and the fast path: readiness, the
 * decision (the whole review sent to the evaluation pool), and the
 * bookkeeping (readiness window, metrics, logs).
 *
 * One way to a decision (adr/0013): while the replica is ready, the body
 * goes to a worker as text (`answerReview`) and comes back as the answer's
 * text. The main thread parses nothing: it keeps TLS, HTTP, metrics and the
 * fail-closed answers. Tests take the same path (test/admission/helpers.ts
 * builds the real pool).
 * While not ready the review is read here: exempt requests are still
 * allowed and the others denied "not ready", with their uid.
 */
import type { Logger } from 'pino';
import { ErrorCode, isPortalError, PortalError, toError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';
import type { AdmissionMetrics } from '../observability/metrics.ts';
import { exemptOutcome, failedOutcome, readReview, serialize, summary, type AnsweredReview, type ExemptNamespaces, type Outcome } from '../policy/review/answer.ts';
import type { AdmissionRequest, ReviewVersion } from '../policy/review/codec.ts';
import type { AnswerReview } from './decision.ts';
import type { WireAnswer } from './fast-path.ts';
import type { ReadinessGate } from './readiness.ts';
import type { DenialLog } from './denial-log.ts';

export interface AnswererDeps {
  /** Whole reviews answered by the evaluation pool (`EvaluationPool.review`). */
  answerReview: AnswerReview;
  gate: ReadinessGate;
  /** Namespaces allowed unevaluated, for the answers given here (not ready, refused by the pool). */
  exempt: ExemptNamespaces;
  metrics: AdmissionMetrics;
  kindLabel: (kind: string) => string;
  log: Logger;
  /** The info line of each denied request (rate-limited); absent: none. */
  denials?: Pick<DenialLog, 'denied'> | undefined;
};

export type Answer = (body: unknown, peer?: string) => WireAnswer | Promise<WireAnswer>;

export class Answerer {
  readonly #deps: AnswererDeps;

  constructor(deps: AnswererDeps) {
    this.#deps = deps;
  }

  /** Decides on a raw body and serialises the answer. A throw is the caller's to answer (error-answers.ts). */
  answer(body: unknown, peer?: string): WireAnswer | Promise<WireAnswer> {
    const started = performance.now();
    this.#deps.metrics.inFlight.inc();
    let out: Outcome;
    try {
      if (typeof body === 'string' && this.#deps.gate.synced()) {
        return this.#deps.answerReview(body, peer).then(
          (a) => this.#answered(a, started),
          (err: unknown) => this.#finish(this.#rejected(body, err), started),
        );
      }
      out = this.#handle(body);
    } catch (err) {
      this.#deps.metrics.inFlight.dec();
      throw err;
    }
    return this.#finish(out, started);
  }

  /** Not sent to the pool (not ready): the review read here, exempt or denied "not ready". */
  #handle(body: unknown): Outcome {
    const read = readReview(body);
    if (!read.ok) return read.outcome;
    const { apiVersion, request } = read;
    const exempt = exemptOutcome(apiVersion, request, this.#deps.exempt);
    if (exempt !== undefined) return exempt;
    const notReady = this.#deps.gate.sourceReasons();
    if (notReady.length > 0) return notReadyOutcome(apiVersion, request, notReady);
    // A ready replica's reviews went to the pool (answer()); readiness does not change within one turn, so this is a bug: fail closed.
    return failedOutcome(apiVersion, request, new PortalError(ErrorCode.Internal, 'ready, but the review was not sent to the evaluation workers'));
  }

  /**
   * The pool refused or lost the review: read here for the uid; exemptions
   * still hold. Overload (its flow's queue full, or it could not start in
   * time) is answered as overload, not as an internal error.
   */
  #rejected(body: string, err: unknown): Outcome {
    const read = readReview(body);
    if (!read.ok) return read.outcome;
    const exempt = exemptOutcome(read.apiVersion, read.request, this.#deps.exempt);
    if (exempt !== undefined) return exempt;
    if (isPortalError(err, ErrorCode.QueueFull)) return overloadedOutcome(read.apiVersion, read.request, err.message);
    return failedOutcome(read.apiVersion, read.request, err);
  }

  #answered(a: AnsweredReview, started: number): WireAnswer {
    this.#deps.metrics.inFlight.dec();
    if (a.encodeError !== undefined) this.#logEncodeError(a.outcome, new Error(a.encodeError));
    try {
      this.#account(a.outcome, started);
    } catch (err) {
      // Decided, but not recorded: still answered with its uid, as a denial (see finish).
      if (a.outcome.request) return this.#wire(this.#failedAndNoted(a.outcome.apiVersion, a.outcome.request, err));
    }
    return { status: a.outcome.httpStatus, payload: a.payload };
  }

  #finish(out: Outcome, started: number): WireAnswer {
    this.#deps.metrics.inFlight.dec();
    let result = out;
    try {
      this.#account(out, started);
    } catch (err) {
      // The decision is made but could not be recorded: the request is
      // still answered, with its uid, and as a denial (fail closed): a
      // replica whose bookkeeping is broken must not keep admitting unseen.
      if (out.request) result = this.#failedAndNoted(out.apiVersion, out.request, err);
    }
    return this.#wire(result);
  }

  #wire(out: Outcome): WireAnswer {
    const { payload, encodeError } = serialize(out);
    if (encodeError !== undefined) this.#logEncodeError(out, encodeError);
    return { status: out.httpStatus, payload };
  }

  #logEncodeError(out: Outcome, err: unknown): void {
    try {
      this.#deps.log.error({ [LogKey.error]: toError(err), [LogKey.uid]: out.response.uid }, 'cannot encode the admission answer');
    } catch {
      // The denial still goes out.
    }
  }

  /** Readiness, metrics and the log of one outcome. */
  #account(out: Outcome, started: number): void {
    switch (out.decision) {
      case 'allow':
      case 'warn':
      case 'deny':
        if (out.exempted !== undefined) for (const e of out.exempted) this.#deps.metrics.exceptionsApplied.inc({ exception: e.exception, rule: e.rule });
        this.#deps.gate.record(false);
        break;
      case 'error':
        this.#noteFailure(out);
        break;
      case 'invalid':
        this.#deps.metrics.errors.inc({ reason: 'invalid_input' });
        break;
      // Overload (and not ready) says nothing of whether this replica decides correctly: not in the readiness window.
      case 'overloaded':
      default:
    }
    this.#observe(out, started);
  }

  /** Never throws: the answer that carries the uid must not depend on the logger or the metrics working. */
  #noteFailure(out: Outcome): void {
    try {
      this.#deps.gate.record(true);
      this.#deps.metrics.errors.inc({ reason: 'internal' });
      this.#deps.log.error({ [LogKey.error]: toError(out.cause), [LogKey.uid]: out.response.uid }, 'internal error while deciding');
    } catch {
      // Bookkeeping is broken too; the denial still goes out.
    }
  }

  #failedAndNoted(apiVersion: ReviewVersion, request: NonNullable<Outcome['request']>, err: unknown): Outcome {
    const out = failedOutcome(apiVersion, request, err);
    this.#noteFailure(out);
    return out;
  }

  #observe(out: Outcome, started: number): void {
    const r = out.request;
    const ms = performance.now() - started;
    this.#deps.metrics.answered(r?.operation ?? '', r ? this.#deps.kindLabel(r.kind.kind) : '', out.decision, ms / 1000);
    if (out.decision === 'deny') this.#deps.denials?.denied(out);
    if (out.decision === 'error' || this.#deps.log.isLevelEnabled('debug')) {
      // Identifiers only: never the object (it can be a Secret).
      this.#deps.log[out.decision === 'error' ? 'warn' : 'debug'](
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

}

function notReadyOutcome(apiVersion: ReviewVersion, request: AdmissionRequest, reasons: string[]): Outcome {
  return {
    httpStatus: 200,
    apiVersion,
    request,
    decision: 'not_ready',
    response: {
      uid: request.uid,
      allowed: false,
      status: { code: 503, reason: 'ServiceUnavailable', message: `portal is not ready (${reasons.join('; ')}); the request is denied until it is` },
    },
  };
}

/**
 * A denial for overload (fail closed), 429 as the API server's own Priority
 * and Fairness answers: its message names the flow and says it is not a
 * policy verdict (evaluation/pool.ts).
 */
function overloadedOutcome(apiVersion: ReviewVersion, request: AdmissionRequest, message: string): Outcome {
  return {
    httpStatus: 200,
    apiVersion,
    request: summary(request),
    decision: 'overloaded',
    response: { uid: request.uid, allowed: false, status: { code: 429, reason: 'TooManyRequests', message } },
  };
}
