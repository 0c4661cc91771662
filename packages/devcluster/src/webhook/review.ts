/**
 * AdmissionReview encoding and response verification, as kube-apiserver's
 * `request.CreateAdmissionObjects` and `request.VerifyAdmissionResponse` do.
 */
import type { AdmissionAttributes } from '../apiserver/admission-hook.ts';

/** The versions kube-apiserver can send, in its order of preference. */
export const SUPPORTED_REVIEW_VERSIONS = ['v1', 'v1beta1'] as const;
export type ReviewVersion = (typeof SUPPORTED_REVIEW_VERSIONS)[number];

/** The first version in the webhook's list that the server supports (kube's choice), or undefined. */
export function pickReviewVersion(accepted: readonly string[]): ReviewVersion | undefined {
  return accepted.find((v): v is ReviewVersion => (SUPPORTED_REVIEW_VERSIONS as readonly string[]).includes(v));
}

/**
 * The AdmissionReview kube-apiserver sends. `object`/`oldObject` are always
 * present (null when absent) because RawExtension marshals that way; the
 * request kind/resource equal kind/resource since the embedded server serves
 * one version per resource (matchPolicy Equivalent never converts here).
 */
export function buildAdmissionReview(a: AdmissionAttributes, version: ReviewVersion, uid: string): Record<string, unknown> {
  const userInfo: Record<string, unknown> = { username: a.userInfo.username };
  if (a.userInfo.uid) userInfo['uid'] = a.userInfo.uid;
  if (a.userInfo.groups.length > 0) userInfo['groups'] = a.userInfo.groups;
  const request: Record<string, unknown> = {
    uid,
    kind: a.kind,
    resource: a.resource,
    ...(a.subResource ? { subResource: a.subResource } : {}),
    requestKind: a.kind,
    requestResource: a.resource,
    ...(a.subResource ? { requestSubResource: a.subResource } : {}),
    ...(a.name ? { name: a.name } : {}),
    ...(a.namespace ? { namespace: a.namespace } : {}),
    operation: a.operation,
    userInfo,
    object: a.object,
    oldObject: a.oldObject,
    dryRun: a.dryRun,
    options: a.options,
  };
  return { kind: 'AdmissionReview', apiVersion: `admission.k8s.io/${version}`, request };
}

export interface ReviewResult {
  allowed: boolean;
  status?: { code?: number; reason?: string; message?: string };
  warnings: string[];
  /** response.auditAnnotations (string values only), for the audit log. */
  auditAnnotations: Record<string, string>;
}

/**
 * Checks a decoded response body; throws an Error whose message is kube's
 * wording for what is wrong (it ends up after "received invalid webhook
 * response: "). v1beta1 responses are not checked for uid and kind, as
 * upstream.
 */
export function verifyAdmissionResponse(body: unknown, version: ReviewVersion, uid: string): ReviewResult {
  if (typeof body !== 'object' || body === null) throw new Error('webhook response was absent');
  const review = body as Record<string, unknown>;
  const response = review['response'];
  if (typeof response !== 'object' || response === null) throw new Error('webhook response was absent');
  const r = response as Record<string, unknown>;
  if (version === 'v1') {
    if (r['uid'] !== uid) throw new Error(`expected response.uid="${uid}", got "${String(r['uid'] ?? '')}"`);
    const gvk = `admission.k8s.io/v1, Kind=AdmissionReview`;
    const got = `${String(review['apiVersion'] ?? '')}, Kind=${String(review['kind'] ?? '')}`;
    if (review['apiVersion'] !== 'admission.k8s.io/v1' || review['kind'] !== 'AdmissionReview') {
      throw new Error(`expected webhook response of ${gvk}, got ${got}`);
    }
  }
  if ((typeof r['patch'] === 'string' && r['patch'] !== '') || r['patchType'] != null) {
    throw new Error('validating webhook may not return response.patch or response.patchType');
  }
  const annotations = r['auditAnnotations'];
  const result: ReviewResult = {
    allowed: r['allowed'] === true,
    warnings: Array.isArray(r['warnings']) ? r['warnings'].filter((w): w is string => typeof w === 'string') : [],
    auditAnnotations:
      typeof annotations === 'object' && annotations !== null && !Array.isArray(annotations)
        ? Object.fromEntries(Object.entries(annotations).filter((e): e is [string, string] => typeof e[1] === 'string'))
        : {},
  };
  const status = r['status'];
  if (typeof status === 'object' && status !== null) {
    const s = status as Record<string, unknown>;
    result.status = {};
    if (typeof s['code'] === 'number') result.status.code = s['code'];
    if (typeof s['reason'] === 'string') result.status.reason = s['reason'];
    if (typeof s['message'] === 'string') result.status.message = s['message'];
  }
  return result;
}

/**
 * `webhookerrors.ToStatusErr`: what the API client sees when a webhook denies.
 * A code below 400 (including none) becomes 400, exactly as upstream.
 */
export function rejectionStatus(webhookName: string, status: ReviewResult['status']): { code: number; reason: string; message: string } {
  const deniedBy = `admission webhook "${webhookName}" denied the request`;
  const code = status?.code !== undefined && status.code >= 400 ? status.code : 400;
  const reason = status?.reason ?? '';
  let message: string;
  if (status?.message) message = `${deniedBy}: ${status.message}`;
  else if (reason) message = `${deniedBy}: ${reason}`;
  else message = `${deniedBy} without explanation`;
  return { code, reason, message };
}
