/**
 * The answer to one AdmissionReview, from its text to the text sent back,
 * without I/O: read it (depth, JSON, shape), apply the exemptions, shape the
 * engine's decision into an AdmissionResponse, serialise it. Pure, so that
 * both threads use the same code (adr/0013, "Reviews read in the worker"):
 * the evaluation worker runs {@link answerReview} whole and the main thread
 * never parses a review on the common path; the admission server uses the
 * parts on the paths that stay on the main thread (not ready, an in-process
 * decider, internal errors). Bookkeeping (readiness, metrics, logs) is the
 * caller's, on the main thread, from the {@link Outcome}.
 */
import { clipText, MAX_WARNING_LENGTH, type AdmissionOutcome, type Exempted } from '../decision.ts';
import { decideAdmission, type EvaluationBudget, type RuleSet } from '../index.ts';
import type { EvaluationInput, GroupVersionKind, Operation, RuleVerdict } from '../types.ts';
import { decodeReview, encodeReview, type AdmissionRequest, type AdmissionResponseBody, type ReviewVersion } from './codec.ts';
import { exemption } from './exemptions.ts';
import { depthExceededAt, MAX_JSON_DEPTH } from './json-depth.ts';

/** A rule a PortalException exempted the request from. */
export type Exemption = Exempted;

/** What a decider answers (the engine's AdmissionDecision, or a test's). */
export type Decision =
  | { allowed: true; warnings: string[]; exempted?: Exemption[] }
  | { allowed: false; code: number; message: string; warnings: string[]; exempted?: Exemption[]; deniedBy?: string[] };

/**
 * The AdmissionResponse `auditAnnotations` key naming the exceptions that
 * exempted a request (comma-joined): the API server records it, prefixed
 * with the webhook's name, in the request's audit event.
 */
export const EXCEPTION_AUDIT_ANNOTATION = 'portal.dev/exception';

/** Labels of a namespace (for namespaceSelector), `undefined` when unknown. */
export type NamespaceLabels = (namespace: string) => Record<string, string> | undefined;

/** File mode has no cluster: a namespace's only known label is the immutable name label every namespace carries. */
export const nameOnlyNamespaceLabels: NamespaceLabels = (namespace) => (namespace === '' ? undefined : { 'kubernetes.io/metadata.name': namespace });

/** The request's identifiers: what logs and metrics name (never the object, which can be a Secret). */
export interface RequestSummary {
  uid: string;
  operation: Operation;
  kind: GroupVersionKind;
  namespace: string;
  name: string;
  /** Who asked (`userInfo.username`), for the denial's log line. */
  user?: string | undefined;
  /** A dry run (`kubectl --dry-run=server`), set on denials: no denial Event for it (the webhook declares no side effects). */
  dryRun?: boolean | undefined;
}

/** One request's answer before it is serialised, and what the bookkeeping needs. */
export interface Outcome {
  httpStatus: number;
  apiVersion: ReviewVersion;
  response: AdmissionResponseBody;
  decision: AdmissionOutcome;
  /** Absent when the review could not be read. */
  request?: RequestSummary | undefined;
  /** Exceptions applied (metrics). */
  exempted?: Exemption[] | undefined;
  /** The rules that denied it (`decision: 'deny'`), for the log. */
  deniedBy?: string[] | undefined;
  /** Why the answer is an internal error (`decision: 'error'`), for the log. */
  cause?: unknown;
}

/** An outcome with its text: what a worker sends back (structured-cloneable). */
export interface AnsweredReview {
  outcome: Outcome;
  payload: string;
  /** Set when the outcome could not be encoded and `payload` is the last-resort denial. */
  encodeError?: string | undefined;
  /** The rules' `error` verdicts (the main thread reports them). */
  ruleErrors?: RuleVerdict[] | undefined;
}

export type ReadReview = { ok: true; apiVersion: ReviewVersion; request: AdmissionRequest } | { ok: false; outcome: Outcome };

/** Reads a body into a review, or the 400 that says what is wrong with it. Never throws. */
export function readReview(body: unknown): ReadReview {
  if (typeof body !== 'string' || body.trim() === '') return { ok: false, outcome: invalidOutcome('empty body; send an AdmissionReview as JSON') };
  // Refused before parsing, and as malformed input (400): it is the
  // client's, so it never counts against readiness (json-depth.ts).
  const tooDeep = depthExceededAt(body);
  if (tooDeep >= 0) return { ok: false, outcome: invalidOutcome(tooDeepMessage(tooDeep)) };
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (err) {
    return { ok: false, outcome: invalidOutcome(`malformed JSON: ${(err as Error).message}`) };
  }
  const decoded = decodeReview(parsed);
  if (!decoded.ok) return { ok: false, outcome: invalidOutcome(decoded.message, decoded.uid, decoded.apiVersion) };
  return decoded;
}

/** The exemption's answer (allowed unevaluated), or undefined when the request is evaluated. */
export function exemptOutcome(apiVersion: ReviewVersion, request: AdmissionRequest, exempt: ReadonlySet<string>): Outcome | undefined {
  if (exemption(request, exempt) === undefined) return undefined;
  return { httpStatus: 200, apiVersion, request: summary(request), decision: 'exempt', response: { uid: request.uid, allowed: true } };
}

export function summary(r: RequestSummary): RequestSummary {
  return { uid: r.uid, operation: r.operation, kind: r.kind, namespace: r.namespace, name: r.name };
}

/** The answer to a decision; a decision that is not one (a decider's bug) or cannot be shaped is an internal error. */
export function decidedOutcome(apiVersion: ReviewVersion, request: RequestSummary, decision: Decision): Outcome {
  try {
    return shape(apiVersion, request, decision);
  } catch (err) {
    return failedOutcome(apiVersion, request, err);
  }
}

function shape(apiVersion: ReviewVersion, request: RequestSummary, decision: Decision): Outcome {
  if (decision === null || typeof decision !== 'object' || typeof decision.allowed !== 'boolean' || !Array.isArray(decision.warnings)) {
    return failedOutcome(apiVersion, request, new TypeError('the engine returned no decision'));
  }
  const exempted = decision.exempted !== undefined && decision.exempted.length > 0 ? decision.exempted : undefined;
  if (decision.allowed && decision.warnings.length === 0 && exempted === undefined) {
    return { httpStatus: 200, apiVersion, request, decision: 'allow', response: { uid: request.uid, allowed: true } };
  }
  // The apiserver shows warnings to users; Portal keeps each under 120 characters (docs/design.md §2), whatever the decider returned.
  const warnings = decision.warnings.map((w) => clipText(w, MAX_WARNING_LENGTH));
  const response: AdmissionResponseBody = decision.allowed
    ? { uid: request.uid, allowed: true }
    : {
        uid: request.uid,
        allowed: false,
        status: { code: decision.code, reason: decision.code === 403 ? 'Forbidden' : 'InternalError', message: decision.message },
      };
  if (warnings.length > 0) response.warnings = warnings;
  if (exempted !== undefined) {
    // Who was exempted and by what, in the API server's audit log (issue 18).
    response.auditAnnotations = { [EXCEPTION_AUDIT_ANNOTATION]: [...new Set(exempted.map((e) => e.exception))].join(',') };
  }
  if (!decision.allowed) return { httpStatus: 200, apiVersion, request, response, decision: 'deny', exempted, deniedBy: decision.deniedBy };
  const label: AdmissionOutcome = warnings.length > 0 ? 'warn' : 'allow';
  return { httpStatus: 200, apiVersion, request, response, decision: label, exempted };
}

/** Portal's own failure on a readable review: a denial with code 500 that echoes the uid. Never throws. */
export function failedOutcome(apiVersion: ReviewVersion, request: RequestSummary, err: unknown): Outcome {
  const what = `${request.kind.kind} ${request.namespace ? `${request.namespace}/` : ''}${request.name || '(unnamed)'}`;
  return {
    httpStatus: 200,
    apiVersion,
    request,
    decision: 'error',
    cause: err,
    response: {
      uid: request.uid,
      allowed: false,
      status: { code: 500, reason: 'InternalError', message: `internal error evaluating ${what}: ${clipText(errorMessage(err), 200)}` },
    },
  };
}

export function invalidOutcome(message: string, uid?: string, apiVersion?: ReviewVersion): Outcome {
  return {
    httpStatus: 400,
    apiVersion: apiVersion ?? 'admission.k8s.io/v1',
    decision: 'invalid',
    response: { uid: uid ?? '', allowed: false, status: { code: 400, reason: 'BadRequest', message } },
  };
}

/** The outcome's text; an outcome that cannot be encoded (say, a message that is not a string) becomes a denial with its uid. */
export function serialize(out: Outcome): { payload: string; encodeError?: unknown } {
  try {
    return { payload: serializeReview(out.apiVersion, out.response) };
  } catch (err) {
    // Not the error handler's answer without a uid: the API server rejects an answer whose uid differs.
    return { payload: internalErrorReview(out.apiVersion, out.response.uid, 'internal error encoding the answer'), encodeError: err };
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

/** A denial built only from strings known to encode: the last resort that still carries the uid. */
export function internalErrorReview(apiVersion: ReviewVersion, uid: string, message: string): string {
  return JSON.stringify(encodeReview(apiVersion, { uid, allowed: false, status: { code: 500, reason: 'InternalError', message } }));
}

/** The uid and version of the review in a body, if it has them: an error must still be answered with the request's uid. */
export function reviewIdentity(body: unknown): { uid: string; apiVersion: ReviewVersion } | undefined {
  if (typeof body !== 'string' || depthExceededAt(body) >= 0) return undefined;
  try {
    const d = decodeReview(JSON.parse(body));
    if (d.ok) return { uid: d.request.uid, apiVersion: d.apiVersion };
    return d.uid !== undefined ? { uid: d.uid, apiVersion: d.apiVersion ?? 'admission.k8s.io/v1' } : undefined;
  } catch {
    return undefined;
  }
}

export function toInput(r: AdmissionRequest, namespaceLabels: NamespaceLabels): EvaluationInput {
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

/**
 * The namespaces allowed unevaluated (`--exempt-namespace`, the install
 * namespace included): built once from the configuration
 * ({@link exemptNamespaces}) and handed to every place that answers a review
 * (the admission server's own answers, the pool, its workers).
 */
export type ExemptNamespaces = ReadonlySet<string> & { readonly [exemptBrand]: true };
declare const exemptBrand: unique symbol;

export function exemptNamespaces(names: readonly string[]): ExemptNamespaces {
  return new Set(names) as unknown as ExemptNamespaces;
}

/** What a whole review is answered with: the policies and the replica's settings. */
export interface ReviewContext {
  rules: RuleSet;
  exempt: ExemptNamespaces;
  namespaceLabels: NamespaceLabels;
}

/**
 * A review's text to its answer's text: the evaluation worker's whole job
 * for a request (the main thread checked readiness before sending it). The
 * same function settles, on the main thread and with a passed deadline, a
 * review whose evaluation was abandoned twice.
 */
export function answerReview(body: string, ctx: ReviewContext, budget: EvaluationBudget): AnsweredReview {
  let outcome: Outcome;
  let ruleErrors: RuleVerdict[] | undefined;
  const read = readReview(body);
  if (!read.ok) outcome = read.outcome;
  else {
    const { apiVersion, request } = read;
    outcome = exemptOutcome(apiVersion, request, ctx.exempt) ?? decidedOutcome(apiVersion, summary(request), evaluateRequest(request, ctx, budget, (v) => (ruleErrors ??= []).push(v)));
    // Who was denied, for the denial's log line (an allow does not carry it: it travels packed).
    if (outcome.decision === 'deny' && outcome.request !== undefined) {
      outcome.request.user = request.user;
      if (request.dryRun) outcome.request.dryRun = true;
    }
  }
  if (outcome.cause !== undefined) outcome.cause = errorMessage(outcome.cause);
  const { payload, encodeError } = serialize(outcome);
  return { outcome, payload, ...(encodeError !== undefined ? { encodeError: errorMessage(encodeError) } : {}), ...(ruleErrors ? { ruleErrors } : {}) };
}

function evaluateRequest(request: AdmissionRequest, ctx: ReviewContext, budget: EvaluationBudget, onError: (v: RuleVerdict) => void): Decision {
  return decideAdmission(ctx.rules, toInput(request, ctx.namespaceLabels), budget, onError);
}

export function tooDeepMessage(at: number): string {
  return `request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep (at character ${at}); Portal does not evaluate input nested this deep, and no Kubernetes object needs it`;
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
