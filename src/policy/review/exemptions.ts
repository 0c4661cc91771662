/**
 * Defence in depth behind the chart's webhook selectors (docs/design.md §3): the
 * server itself never evaluates requests that could lock out the control
 * plane or Portal.
 */
import type { AdmissionRequest } from './codec.ts';

/** Kinds the chart never sends; if a misconfigured webhook does, allow them unevaluated. */
const EXEMPT_KINDS: ReadonlySet<string> = new Set([
  'coordination.k8s.io/Lease',
  '/Event',
  'events.k8s.io/Event',
  '/Node',
  'authentication.k8s.io/TokenReview',
  'authorization.k8s.io/SubjectAccessReview',
  'authorization.k8s.io/SelfSubjectAccessReview',
  'authorization.k8s.io/LocalSubjectAccessReview',
]);
/** Portal's own resources (rules), so a bad rule can always be fixed. */
const EXEMPT_GROUPS: ReadonlySet<string> = new Set(['portal.dev']);

export type Exemption = 'namespace' | 'kind' | undefined;

export function exemption(req: AdmissionRequest, exemptNamespaces: ReadonlySet<string>): Exemption {
  if (req.namespace !== '' && exemptNamespaces.has(req.namespace)) return 'namespace';
  // The chart selects namespaces by `kubernetes.io/metadata.name`, which for
  // a Namespace object is its own name.
  if (req.kind.group === '' && req.kind.kind === 'Namespace' && exemptNamespaces.has(req.name)) return 'namespace';
  if (EXEMPT_GROUPS.has(req.kind.group) || EXEMPT_KINDS.has(`${req.kind.group}/${req.kind.kind}`)) return 'kind';
  return undefined;
}
