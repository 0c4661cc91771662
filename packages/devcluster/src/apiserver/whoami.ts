/**
 * SelfSubjectReview (authentication.k8s.io/v1), which `kubectl auth whoami`
 * creates: the answer is the authenticated user of the request itself, so
 * it is exact here whatever else the server enforces. Nothing is stored.
 */
import type { Reply } from './cluster.ts';
import { isPlainObject, nowTimestamp, type UserInfo } from './types.ts';

export const SELF_SUBJECT_REVIEW_PATH = /^\/apis\/authentication\.k8s\.io\/(v1|v1beta1)\/selfsubjectreviews$/;

export function selfSubjectReview(version: string, body: unknown, user: UserInfo): Reply {
  const metadata = isPlainObject(body) && isPlainObject(body['metadata']) ? body['metadata'] : {};
  return {
    code: 201,
    body: {
      kind: 'SelfSubjectReview', apiVersion: `authentication.k8s.io/${version}`,
      metadata: { ...metadata, creationTimestamp: nowTimestamp() },
      status: { userInfo: { username: user.username, uid: user.uid, groups: user.groups } },
    },
  };
}

/** Its discovery entry (create only, cluster-scoped). */
export const SELF_SUBJECT_REVIEW_RESOURCE = { name: 'selfsubjectreviews', singularName: 'selfsubjectreview', namespaced: false, kind: 'SelfSubjectReview', verbs: ['create'] };
