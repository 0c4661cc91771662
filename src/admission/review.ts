/**
 * AdmissionReview decoding and encoding (`admission.k8s.io/v1` and
 * `v1beta1`, FACTS.md). Decoding never throws: it returns what was wrong and,
 * when it could be read, the request's uid so even an error answer echoes it.
 */
import type { GroupVersionKind, KubeObject, Operation } from '../policy/types.ts';

export const REVIEW_VERSIONS = ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1'] as const;
export type ReviewVersion = (typeof REVIEW_VERSIONS)[number];
const OPERATIONS: readonly string[] = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'];

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
}

export type Decoded =
  | { ok: true; apiVersion: ReviewVersion; request: AdmissionRequest }
  | { ok: false; message: string; uid?: string; apiVersion?: ReviewVersion };

export interface AdmissionResponseBody {
  uid: string;
  allowed: boolean;
  status?: { code: number; message: string; reason?: string };
  warnings?: string[];
}

export interface AdmissionReviewResponse {
  apiVersion: ReviewVersion;
  kind: 'AdmissionReview';
  response: AdmissionResponseBody;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function decodeReview(body: unknown): Decoded {
  if (!isObject(body)) return { ok: false, message: 'body must be a JSON object (an AdmissionReview)' };
  const request = body.request;
  const uid = isObject(request) && typeof request.uid === 'string' && request.uid !== '' ? request.uid : undefined;
  const apiVersion = REVIEW_VERSIONS.find((v) => v === body.apiVersion);
  const fail = (message: string): Decoded => ({
    ok: false,
    message,
    ...(uid !== undefined ? { uid } : {}),
    ...(apiVersion !== undefined ? { apiVersion } : {}),
  });
  if (apiVersion === undefined) {
    return fail(`unsupported apiVersion ${JSON.stringify(body.apiVersion)}; send ${REVIEW_VERSIONS.join(' or ')}`);
  }
  if (body.kind !== 'AdmissionReview') return fail(`unsupported kind ${JSON.stringify(body.kind)}; send an AdmissionReview`);
  if (!isObject(request)) return fail('AdmissionReview has no "request" object');
  if (uid === undefined) return fail('request.uid is missing or not a non-empty string');

  const kind = request.kind;
  if (!isObject(kind) || typeof kind.kind !== 'string' || kind.kind === '') {
    return fail('request.kind must be an object with a non-empty "kind"');
  }
  for (const f of ['group', 'version'] as const) {
    if (kind[f] !== undefined && typeof kind[f] !== 'string') return fail(`request.kind.${f} must be a string`);
  }
  if (typeof request.operation !== 'string' || !OPERATIONS.includes(request.operation)) {
    return fail(`request.operation must be one of ${OPERATIONS.join(', ')}, got ${JSON.stringify(request.operation)}`);
  }
  for (const f of ['name', 'namespace', 'subResource'] as const) {
    if (request[f] !== undefined && request[f] !== null && typeof request[f] !== 'string') return fail(`request.${f} must be a string`);
  }
  for (const f of ['object', 'oldObject'] as const) {
    if (request[f] !== undefined && request[f] !== null && !isObject(request[f])) return fail(`request.${f} must be an object or null`);
  }
  if (request.dryRun !== undefined && request.dryRun !== null && typeof request.dryRun !== 'boolean') {
    return fail('request.dryRun must be a boolean');
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
    },
  };
}

export function encodeReview(apiVersion: ReviewVersion, response: AdmissionResponseBody): AdmissionReviewResponse {
  return { apiVersion, kind: 'AdmissionReview', response };
}
