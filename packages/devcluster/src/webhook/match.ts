/**
 * Which webhooks a request is sent to: a port of kube-apiserver's
 * `predicates/rules`, `predicates/namespace` and `predicates/object` matchers.
 */
import type { AdmissionAttributes } from '../apiserver/admission-hook.ts';
import type { RuleWithOperations, ValidatingWebhook } from './config.ts';
import { isEmptySelector, matchesLabelSelector } from './label-selector.ts';

const isNamespaceResource = (a: AdmissionAttributes): boolean =>
  a.resource.group === '' && a.resource.resource === 'namespaces' && a.subResource === '';

/**
 * kube-apiserver's `rules.Matcher`: operation, group, version, resource
 * (with `res/sub`, `*`, `*\/*`, `*\/sub`, `res/*`) and scope must all match.
 * `*` alone does not match subresources, exactly as upstream.
 */
export function matchesRule(rule: RuleWithOperations, a: AdmissionAttributes): boolean {
  return (
    matchesScope(rule.scope, a) &&
    anyOrExact(rule.operations, a.operation) &&
    anyOrExact(rule.apiGroups, a.resource.group) &&
    anyOrExact(rule.apiVersions, a.resource.version) &&
    matchesResource(rule.resources, a.resource.resource, a.subResource)
  );
}

export function matchesAnyRule(rules: readonly RuleWithOperations[], a: AdmissionAttributes): boolean {
  return rules.some((r) => matchesRule(r, a));
}

function anyOrExact(list: readonly string[], value: string): boolean {
  return list.some((x) => x === '*' || x === value);
}

function matchesResource(list: readonly string[], resource: string, subResource: string): boolean {
  for (const entry of list) {
    const slash = entry.indexOf('/');
    const res = slash < 0 ? entry : entry.slice(0, slash);
    const sub = slash < 0 ? '' : entry.slice(slash + 1);
    if ((res === '*' || res === resource) && (sub === '*' || sub === subResource)) return true;
  }
  return false;
}

/** Namespace objects are cluster-scoped even though kube fills in their namespace attribute. */
function matchesScope(scope: string, a: AdmissionAttributes): boolean {
  const clusterScoped = isNamespaceResource(a) || a.namespace === '' || !a.namespaced;
  if (scope === 'Namespaced') return !clusterScoped;
  if (scope === 'Cluster') return clusterScoped;
  return true;
}

export type SelectorResult = { match: boolean } | { error: { code: number; reason: string; message: string } };

/**
 * `namespace.Matcher.MatchNamespaceSelector`: a cluster-scoped object that is
 * not a Namespace always matches; a Namespace is judged by its own labels
 * (oldObject's on DELETE); otherwise the namespace's labels, and a missing
 * namespace is a 404 (kube's behaviour, kept for compatibility).
 */
export function matchesNamespaceSelector(
  webhook: ValidatingWebhook,
  a: AdmissionAttributes,
  namespaceLabels: (name: string) => Record<string, string> | undefined,
): SelectorResult {
  const isNamespace = isNamespaceResource(a);
  if (!isNamespace && a.namespace === '') return { match: true };
  if (isEmptySelector(webhook.namespaceSelector)) return { match: true };
  let labels: Record<string, string> | undefined;
  if (isNamespace) {
    labels = labelsOf(a.object ?? a.oldObject);
  } else {
    labels = namespaceLabels(a.namespace);
    if (labels === undefined) {
      return { error: { code: 404, reason: 'NotFound', message: `namespaces "${a.namespace}" not found` } };
    }
  }
  return { match: matchesLabelSelector(webhook.namespaceSelector, labels) };
}

/** `object.Matcher.MatchObjectSelector`: the object or the old object must match. */
export function matchesObjectSelector(webhook: ValidatingWebhook, a: AdmissionAttributes): boolean {
  if (isEmptySelector(webhook.objectSelector)) return true;
  const test = (o: Record<string, unknown> | null): boolean =>
    o !== null && matchesLabelSelector(webhook.objectSelector, labelsOf(o));
  return test(a.object) || test(a.oldObject);
}

function labelsOf(o: Record<string, unknown> | null): Record<string, string> {
  const meta = o?.['metadata'];
  if (typeof meta !== 'object' || meta === null) return {};
  const labels = (meta as Record<string, unknown>)['labels'];
  return typeof labels === 'object' && labels !== null ? (labels as Record<string, string>) : {};
}
