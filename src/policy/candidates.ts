/**
 * The rules that can give a verdict for one (group, kind), with everything
 * that depends only on the rule and the kind worked out once per rule-set
 * revision instead of on every request: the kind match itself, the
 * subresources the matching `match.kinds` entries name, the pod template path
 * for workload kinds, and the constant `passed` message.
 */
import { podTemplateKind } from './pod-templates.ts';
import type { IndexedEntry, RuleEntry } from './rule-entry.ts';
import type { RuleSet } from './rule-set.ts';
import { IMPLIED_SUBRESOURCES, kindMatches } from './match-keys.ts';

export interface Candidate {
  readonly entry: RuleEntry;
  /** Where the pod template lives, when a Pod rule checks this workload's template. */
  readonly templatePath: readonly string[] | undefined;
  /** `templatePath` joined with dots: the prefix of violation paths. */
  readonly templatePrefix: string;
  /**
   * Direct matches: the subresources named by the `match.kinds` entries that
   * cover this kind ("*" = any). Unused for template checks.
   */
  readonly subresources: ReadonlySet<string>;
  readonly passMessage: string;
}

/** Distinct (group, kind) pairs cached per revision. A cluster serves a few
 * hundred kinds; past this the cache starts over rather than grow without
 * bound on requests for made-up kinds (each entry is a small array). */
export const MAX_CACHED_KINDS = 1024;

const NO_SUBRESOURCES: ReadonlySet<string> = new Set();

function candidateFor(item: IndexedEntry, group: string, kind: string): Candidate | undefined {
  const { entry } = item;
  const passMessage = `${entry.display}: passed`;
  if (item.viaTemplate) {
    const t = podTemplateKind(group, kind);
    // Same kind name in another group: not a workload we know.
    if (!t) return undefined;
    return { entry, templatePath: t.path, templatePrefix: t.path.join('.'), subresources: NO_SUBRESOURCES, passMessage };
  }
  let matched = false;
  const subresources = new Set<string>();
  for (const k of entry.match.kinds) {
    if (!kindMatches(k, group, kind)) continue;
    matched = true;
    for (const s of k.subresources ?? []) subresources.add(s);
  }
  if (!matched) return undefined;
  for (const s of IMPLIED_SUBRESOURCES.get(`${group}/${kind}`) ?? []) subresources.add(s);
  return { entry, templatePath: undefined, templatePrefix: '', subresources, passMessage };
}

function build(rules: RuleSet, group: string, kind: string): Candidate[] {
  const { specific, wildcard } = rules.candidates(kind);
  const out: Candidate[] = [];
  // Same order as the rule set's index: specific rules, then wildcard ones.
  for (const list of [specific, wildcard]) {
    for (const item of list) {
      const c = candidateFor(item, group, kind);
      if (c) out.push(c);
    }
  }
  return out;
}

/** Candidates for (group, kind) in verdict order, cached (in the rule set) until the rule set changes. */
export function candidatesFor(rules: RuleSet, group: string, kind: string): readonly Candidate[] {
  let cache = rules.candidateCache as { revision: number; byKind: Map<string, Candidate[]> } | undefined;
  if (cache?.revision !== rules.revision) {
    cache = { revision: rules.revision, byKind: new Map() };
    rules.candidateCache = cache;
  }
  // A group (a DNS subdomain) cannot contain "/", so this key is unambiguous.
  const key = `${group}/${kind}`;
  let list = cache.byKind.get(key);
  if (list === undefined) {
    if (cache.byKind.size >= MAX_CACHED_KINDS) cache.byKind.clear();
    list = build(rules, group, kind);
    cache.byKind.set(key, list);
  }
  return list;
}

/** Whether any rule can give a verdict for this kind (else an admission request needs no evaluation at all). */
export function hasCandidates(rules: RuleSet, group: string, kind: string): boolean {
  return candidatesFor(rules, group, kind).length > 0;
}
