/**
 * The leaf that rule and exception matching share: which kinds a match block
 * names, and the keys rules and exceptions are found by. Nothing here imports
 * another policy module, so candidates, rule entries, rule sets and the
 * exception store can all use it without importing each other.
 */
import { EXCEPTION_KIND, type KindMatch } from './types.ts';

/**
 * Subresources whose admission object is the parent object itself, so a rule
 * matching the parent applies to them without naming them. On a real cluster
 * ephemeral containers can only be added through `pods/ephemeralcontainers`
 * (`kubectl debug`), and kube-apiserver admits that UPDATE with kind Pod and
 * the whole Pod as object: in-tree Pod Security Admission checks it like any
 * Pod write, and so must every rule that matches Pod, or a privileged debug
 * container walks past rules that check `spec.ephemeralContainers`.
 */
export const IMPLIED_SUBRESOURCES: ReadonlyMap<string, readonly string[]> = new Map([['/Pod', ['ephemeralcontainers']]]);

export function kindMatches(k: KindMatch, group: string, kind: string): boolean {
  return (k.apiGroups.includes('*') || k.apiGroups.includes(group)) && (k.kinds.includes('*') || k.kinds.includes(kind));
}

/**
 * A rule as exceptions name it: a Portal rule by its display name, or a VAP
 * and binding. `keys` are its lookup keys (refKeys), precomputed once for a
 * rule that is judged on every request.
 */
export type RuleRef = ({ kind: 'rule'; display: string } | { kind: 'vap'; policy: string; binding: string }) & { readonly keys?: readonly string[] };

/** The lookup keys of one rule, in the spaces exceptions.ts derives from the rules an exception names. */
export function refKeys(ref: RuleRef): readonly string[] {
  if (ref.keys) return ref.keys;
  return ref.kind === 'rule' ? [`rule:${ref.display}`] : ref.binding ? [`vap:${ref.policy}`, `vap:${ref.policy}/${ref.binding}`] : [`vap:${ref.policy}`];
}

/** A Portal rule's reference with its keys computed once (kept on the compiled rule). */
export function ruleRef(display: string): RuleRef {
  return Object.freeze({ kind: 'rule' as const, display, keys: Object.freeze([`rule:${display}`]) });
}

export function exceptionKey(o: { metadata?: { namespace?: string | undefined; name?: string | undefined } | undefined }): string {
  return `${EXCEPTION_KIND}/${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
}
