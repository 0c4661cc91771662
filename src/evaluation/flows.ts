/**
 * Which flow an evaluation belongs to (fair-queue.ts): one per namespace,
 * one for cluster-scoped objects, and Portal's own kinds apart from both,
 * per namespace too (a tenant writing PortalRules does not wait behind its
 * own Pods, nor anyone behind those rules).
 *
 * A review's flow is read from its text without parsing it: the main thread
 * parses nothing on the common path (adr/0013), and this must cost well
 * under a microsecond. kube-apiserver writes an AdmissionRequest's fields in
 * their Go order (uid, kind, resource, …, name, namespace, operation,
 * userInfo, object, oldObject, …), so the request's own `namespace` and
 * `kind` come before the first `"userInfo":{`, and nothing a tenant controls
 * does (the object comes after it). A `"namespace":"` can only be a key:
 * inside a JSON string every quote is escaped. A review written in another
 * order is still answered; it may only be queued in another flow.
 */

/** The flow of cluster-scoped objects. */
export const CLUSTER_FLOW = '';
/** Prefix of the flows of Portal's own kinds (`portal.dev/<namespace>`; a namespace cannot contain `/`). */
const PORTAL_PREFIX = 'portal.dev/';
/** The longest namespace name (a DNS label). */
const MAX_NAMESPACE = 63;

const USER_INFO = '"userInfo":{';
const NAMESPACE = '"namespace":"';
const GROUP = '"group":"';
const PORTAL_GROUP = 'portal.dev"';

/** The flow of an object in `namespace` ('' for cluster-scoped), of Portal's own kinds or not. */
export function flowOf(namespace: string, portalKind = false): string {
  return portalKind ? PORTAL_PREFIX + namespace : namespace;
}

/** Separates a flow from the remote address it is scoped to (a namespace cannot contain `@`). */
const PEER = '@';

/**
 * The flow of an AdmissionReview's text (see the module comment), scoped to
 * the remote address it came from when one is given: the namespace in a
 * review is the sender's word, and a client that reaches the webhook port
 * directly could name a victim's namespace and fill its share. Scoped, such a
 * flood fills only its own flow; the API server's reviews of that namespace
 * keep theirs.
 */
export function reviewFlow(body: string, peer?: string): string {
  return fromPeer(namespaceFlow(body), peer);
}

/** `flow` scoped to the remote address it came from, when one is given (see reviewFlow). */
export function fromPeer(flow: string, peer?: string): string {
  return peer === undefined || peer === '' ? flow : flow + PEER + peer;
}

function namespaceFlow(body: string): string {
  const end = body.indexOf(USER_INFO);
  if (end < 0) return CLUSTER_FLOW;
  // The first group is the request's kind's (the review's own `kind` is a string).
  const group = body.indexOf(GROUP);
  const portal = group >= 0 && group < end && body.startsWith(PORTAL_GROUP, group + GROUP.length);
  const at = body.lastIndexOf(NAMESPACE, end);
  if (at < 0) return flowOf(CLUSTER_FLOW, portal);
  const from = at + NAMESPACE.length;
  const to = body.indexOf('"', from);
  if (to < 0 || to > end || to - from > MAX_NAMESPACE) return flowOf(CLUSTER_FLOW, portal);
  return flowOf(body.slice(from, to), portal);
}

/** A flow as messages name it. */
export function describeFlow(key: string): string {
  const at = key.indexOf(PEER);
  if (at >= 0) return `${describeFlow(key.slice(0, at))} from ${key.slice(at + 1)}`;
  if (key.startsWith(PORTAL_PREFIX)) {
    const ns = key.slice(PORTAL_PREFIX.length);
    return ns === '' ? "Portal's own cluster-scoped kinds" : `Portal's own kinds in namespace ${ns}`;
  }
  return key === CLUSTER_FLOW ? 'cluster-scoped objects' : `namespace ${key}`;
}
