/**
 * `POST /validate-portal-kinds`: the second webhook of the chart's
 * ValidatingWebhookConfiguration, for Portal's own kinds (issue 15 item 2,
 * adr/0011). A PortalRule or PortalClusterRule that would not compile (a JSON
 * Schema or CEL compile error, with line and column), a regex over the
 * limits, an invalid match block or an unknown field is refused at apply —
 * `kubectl apply` and `--dry-run=server` alike — in kube-apiserver's words
 * for an invalid ValidatingAdmissionPolicy.
 *
 * Not gated on readiness: the answer depends on the object alone (no
 * informer, no rule set), so a replica that is still syncing answers it.
 * The webhook entry has failurePolicy Ignore, so a Portal that is down never
 * blocks fixing or deleting a rule; what gets in meanwhile is handled at
 * evaluation by the rule's failurePolicy and enforcement.
 *
 * On a replica a rule's check runs on a thread (evaluation/rule-check.ts,
 * issue 31 item 5): this only decodes the review and sends its text. A
 * check refused as overload (its namespace's share of the queue full, or it
 * could not start in time) is answered 429 naming the rule and saying to
 * retry: not an internal error, and not counted by the readiness gate (no
 * answer of this webhook is).
 */
import { PORTAL_KINDS_WEBHOOK_PATH } from '../config/webhook-configuration.ts';
import { ErrorCode, isPortalError } from '../observability/errors.ts';
import type { AdmissionMetrics } from '../observability/metrics.ts';
import { clipText, MAX_WARNING_LENGTH, type AdmissionOutcome } from '../policy/decision.ts';
import { invalidMessage, type KindValidation, type PortalKind } from '../policy/portal-kinds.ts';
import { decodeReview, encodeReview, type AdmissionRequest, type AdmissionResponseBody, type ReviewVersion } from '../policy/review/codec.ts';

/** The path of the webhook for Portal's own kinds (the chart's second webhook). */
export const PORTAL_KINDS_PATH = PORTAL_KINDS_WEBHOOK_PATH;

export interface PortalKindsAnswer {
  status: number;
  payload: string;
}

const PORTAL_GROUP = 'portal.dev';

/**
 * Decides on one raw body; later when the kind's check runs on a thread.
 * Throws (or rejects) only on Portal's own errors (the server turns them
 * into a 500 denial with the uid). `peer`: the remote address, which scopes
 * a threaded check's queue (evaluation/flows.ts).
 */
export function answerPortalKinds(body: unknown, kinds: Readonly<Record<string, PortalKind>>, metrics: AdmissionMetrics, peer?: string): PortalKindsAnswer | Promise<PortalKindsAnswer> {
  const started = performance.now();
  let parsed: unknown;
  try {
    parsed = typeof body === 'string' ? JSON.parse(body) : undefined;
  } catch (err) {
    return invalid(`malformed JSON: ${(err as Error).message}`, undefined, undefined, metrics, started);
  }
  const decoded = decodeReview(parsed);
  if (!decoded.ok) return invalid(decoded.message, decoded.uid, decoded.apiVersion, metrics, started);
  const { apiVersion, request } = decoded;
  const kind = request.kind.group === PORTAL_GROUP && request.subResource === '' ? kinds[request.kind.kind] : undefined;
  const finish = (response: AdmissionResponseBody, decision: AdmissionOutcome): PortalKindsAnswer => {
    metrics.answered(request.operation, request.kind.kind, decision, (performance.now() - started) / 1000);
    return { status: 200, payload: JSON.stringify(encodeReview(apiVersion, response)) };
  };
  // Only what the object says is checked: DELETE (and anything the configuration should not send) is allowed.
  if (!kind || (request.operation !== 'CREATE' && request.operation !== 'UPDATE') || !request.object) return finish({ uid: request.uid, allowed: true }, 'allow');
  const name = request.name || request.object.metadata?.name || '(unnamed)';
  const result = kind.validate(request.object, { body: body as string, kind: request.kind.kind, namespace: request.namespace, name, peer });
  if (!(result instanceof Promise)) return finish(...checked(request, name, result));
  return result.then(
    (r) => finish(...checked(request, name, r)),
    (err: unknown) => {
      if (!isPortalError(err, ErrorCode.QueueFull)) throw err;
      return finish({ uid: request.uid, allowed: false, status: { code: 429, reason: 'TooManyRequests', message: `${request.kind.kind} "${name}" was not checked: ${err.message} Retry the apply.` } }, 'overloaded');
    },
  );
}

/** The answer to a check's result: admitted (with an Audit rule's type-check problems as warnings) or refused as invalid. */
function checked(request: AdmissionRequest, name: string, result: KindValidation): [AdmissionResponseBody, AdmissionOutcome] {
  // An Audit rule's type-check problems: admitted, shown by kubectl (each under 120 characters, the field first).
  if (result.ok) return [result.warnings ? { uid: request.uid, allowed: true, warnings: result.warnings.map((w) => clipText(w.replace(/^spec\.validate\.cel\./, ''), MAX_WARNING_LENGTH)) } : { uid: request.uid, allowed: true }, 'allow'];
  return [{ uid: request.uid, allowed: false, status: { code: 422, reason: 'Invalid', message: invalidMessage(request.kind.kind, name, result.problems) } }, 'deny'];
}

function invalid(message: string, uid: string | undefined, apiVersion: ReviewVersion | undefined, metrics: AdmissionMetrics, started: number): PortalKindsAnswer {
  metrics.errors.inc({ reason: 'invalid_input' });
  metrics.answered('', '', 'invalid', (performance.now() - started) / 1000);
  return {
    status: 400,
    payload: JSON.stringify(encodeReview(apiVersion ?? 'admission.k8s.io/v1', { uid: uid ?? '', allowed: false, status: { code: 400, reason: 'BadRequest', message } })),
  };
}
