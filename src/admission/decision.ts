/**
 * The seam between the admission server and the policy engine: a function
 * from an evaluation input to an allow/deny decision. The server treats a
 * throw (or rejection) as an internal error and denies with code 500.
 */
import type { EvaluationInput } from '../policy/types.ts';

/** A rule a PortalException exempted the request from. */
export interface Exemption {
  rule: string;
  /** `namespace/name` of the PortalException. */
  exception: string;
}

export type Decision =
  | { allowed: true; warnings: string[]; exempted?: Exemption[] }
  | { allowed: false; code: number; message: string; warnings: string[]; exempted?: Exemption[] };

/**
 * The AdmissionResponse `auditAnnotations` key naming the exceptions that
 * exempted a request (comma-joined): the API server records it, prefixed
 * with the webhook's name, in the request's audit event.
 */
export const EXCEPTION_AUDIT_ANNOTATION = 'portal.dev/exception';

/**
 * `body` is the AdmissionReview's JSON text, which holds `input.object` and
 * `input.oldObject` under `request`: an evaluator on another thread can send
 * that text (a memory copy) and parse it there, instead of cloning the
 * parsed objects (which costs more than parsing).
 */
export type Decide = (input: EvaluationInput, body?: string) => Decision | Promise<Decision>;

/** Labels of a namespace (for namespaceSelector), `undefined` when unknown. */
export type NamespaceLabels = (namespace: string) => Record<string, string> | undefined;

/** File mode has no cluster: a namespace's only known label is the immutable name label every namespace carries. */
export const nameOnlyNamespaceLabels: NamespaceLabels = (namespace) =>
  namespace === '' ? undefined : { 'kubernetes.io/metadata.name': namespace };
