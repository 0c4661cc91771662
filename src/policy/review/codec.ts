/**
 * AdmissionReview decoding and encoding (`admission.k8s.io/v1` and
 * `v1beta1`, docs/design.md §10.1). Decoding never throws: it returns what was wrong and,
 * when it could be read, the request's uid so even an error answer echoes it.
 */
import { isObject } from '../../util/is-object.ts';
import type { GroupVersionKind, KubeObject, Operation } from '../types.ts';

export const REVIEW_VERSIONS = ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1'] as const;
export type ReviewVersion = (typeof REVIEW_VERSIONS)[number];
const OPERATIONS: readonly string[] = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'];
// Field lists checked by decodeReview, hoisted so the hot path allocates nothing for them.
const KIND_STRING_FIELDS = ['group', 'version'] as const;
const REQUEST_STRING_FIELDS = ['name', 'namespace', 'subResource'] as const;
const REQUEST_OBJECT_FIELDS = ['object', 'oldObject'] as const;

/** The fields of `request` Portal uses. */
export interface AdmissionRequest {
  uid: string;
  kind: GroupVersionKind;
  subResource: string;
  name: string;
  namespace: string;
  operation: Operation;
  object: KubeObject | null;
  oldObject: KubeObject | null;
  dryRun: boolean;
  /** `userInfo.username`, when it is a string: who asked (logged with a denial, never evaluated from here). */
  user?: string | undefined;
}

export type Decoded =
  | { ok: true; apiVersion: ReviewVersion; request: AdmissionRequest }
  | { ok: false; message: string; uid?: string; apiVersion?: ReviewVersion };

export interface AdmissionResponseBody {
  uid: string;
  allowed: boolean;
  status?: { code: number; message: string; reason?: string };
  warnings?: string[];
  /** Recorded by the API server in the request's audit event (keys prefixed with the webhook's name). */
  auditAnnotations?: Record<string, string>;
}

export interface AdmissionReviewResponse {
  apiVersion: ReviewVersion;
  kind: 'AdmissionReview';
  response: AdmissionResponseBody;
}

function failure(message: string, uid: string | undefined, apiVersion: ReviewVersion | undefined): Decoded {
  return { ok: false, message, ...(uid !== undefined ? { uid } : {}), ...(apiVersion !== undefined ? { apiVersion } : {}) };
}

export function decodeReview(body: unknown): Decoded {
  if (!isObject(body)) return { ok: false, message: 'body must be a JSON object (an AdmissionReview)' };
  const request = body.request;
  const uid = isObject(request) && typeof request.uid === 'string' && request.uid !== '' ? request.uid : undefined;
  const apiVersion = (REVIEW_VERSIONS as readonly unknown[]).includes(body.apiVersion) ? (body.apiVersion as ReviewVersion) : undefined;
  if (apiVersion === undefined) {
    return failure(`unsupported apiVersion ${JSON.stringify(body.apiVersion)}; send ${REVIEW_VERSIONS.join(' or ')}`, uid, apiVersion);
  }
  if (body.kind !== 'AdmissionReview') return failure(`unsupported kind ${JSON.stringify(body.kind)}; send an AdmissionReview`, uid, apiVersion);
  if (!isObject(request)) return failure('AdmissionReview has no "request" object', uid, apiVersion);
  if (uid === undefined) return failure('request.uid is missing or not a non-empty string', uid, apiVersion);

  const kind = request.kind;
  if (!isObject(kind) || typeof kind.kind !== 'string' || kind.kind === '') {
    return failure('request.kind must be an object with a non-empty "kind"', uid, apiVersion);
  }
  for (const f of KIND_STRING_FIELDS) {
    if (kind[f] !== undefined && typeof kind[f] !== 'string') return failure(`request.kind.${f} must be a string`, uid, apiVersion);
  }
  if (typeof request.operation !== 'string' || !OPERATIONS.includes(request.operation)) {
    return failure(`request.operation must be one of ${OPERATIONS.join(', ')}, got ${JSON.stringify(request.operation)}`, uid, apiVersion);
  }
  for (const f of REQUEST_STRING_FIELDS) {
    if (request[f] !== undefined && request[f] !== null && typeof request[f] !== 'string') return failure(`request.${f} must be a string`, uid, apiVersion);
  }
  for (const f of REQUEST_OBJECT_FIELDS) {
    if (request[f] !== undefined && request[f] !== null && !isObject(request[f])) return failure(`request.${f} must be an object or null`, uid, apiVersion);
  }
  // `object` is null only on DELETE (docs/design.md §10.1): a CREATE or UPDATE without
  // it there is nothing to validate, so the
  // review itself is malformed (400), not a violation of every rule.
  if ((request.operation === 'CREATE' || request.operation === 'UPDATE') && !isObject(request.object)) {
    return failure(`request.object is missing or null on a ${request.operation}; send the object being ${request.operation === 'CREATE' ? 'created' : 'updated'}`, uid, apiVersion);
  }
  if (request.dryRun !== undefined && request.dryRun !== null && typeof request.dryRun !== 'boolean') {
    return failure('request.dryRun must be a boolean', uid, apiVersion);
  }
  return {
    ok: true,
    apiVersion,
    request: {
      uid,
      kind: { group: (kind.group as string | undefined) ?? '', version: (kind.version as string | undefined) ?? '', kind: kind.kind },
      subResource: (request.subResource as string | undefined | null) ?? '',
      name: (request.name as string | undefined | null) ?? '',
      namespace: (request.namespace as string | undefined | null) ?? '',
      operation: request.operation as Operation,
      object: (request.object as KubeObject | undefined | null) ?? null,
      oldObject: (request.oldObject as KubeObject | undefined | null) ?? null,
      dryRun: request.dryRun === true,
      user: isObject(request.userInfo) && typeof request.userInfo.username === 'string' ? request.userInfo.username : undefined,
    },
  };
}

export function encodeReview(apiVersion: ReviewVersion, response: AdmissionResponseBody): AdmissionReviewResponse {
  return { apiVersion, kind: 'AdmissionReview', response };
}
