/**
 * The `kind` label of the admission metrics: the request's kind when a rule
 * names it (directly, or as a workload whose pod template a Pod rule
 * checks), `other` otherwise. A metric label never holds a raw string from
 * a request: kinds are chosen by whoever sends the review, and anyone who
 * can reach the webhook port could otherwise invent a new series per request
 * (issue 16). The rules are cluster objects (or files) that only their
 * authors change, so the label set follows them.
 */
import { OTHER_KIND } from '../observability/metrics.ts';
import type { RuleSet } from '../policy/index.ts';

export function kindLabeler(rules: Pick<RuleSet, 'revision' | 'matchedKinds'>): (kind: string) => string {
  let revision = -1;
  let named: ReadonlySet<string> = new Set();
  return (kind) => {
    // Rebuilt only when the rules changed: the request path pays a number
    // comparison and a Set lookup.
    if (rules.revision !== revision) {
      revision = rules.revision;
      named = new Set(rules.matchedKinds().map((k) => k.kind).filter((k) => k !== '*'));
    }
    return named.has(kind) ? kind : OTHER_KIND;
  };
}
