/**
 * What `portal dev` says about the rules (issue 15 item 3): every rule that is
 * not Ready or not Covered, read from the status the leader writes (the same
 * conditions `kubectl get pcrule` shows), printed at start-up and whenever
 * the set changes, and counted on the status line so that "2/2 replicas
 * ready" never reads as "all is fine" while a rule is broken.
 */
import type { DevApiClient } from './api-client.ts';

interface Condition {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
}

interface RuleObject {
  kind?: string;
  metadata?: { name?: string; namespace?: string; generation?: number };
  status?: { observedGeneration?: number; conditions?: Condition[] };
}

/** One line per problem, keyed so that a change of reason or message is a change. */
export interface RuleProblem {
  /** `PortalClusterRule/name` or `PortalRule/namespace/name`. */
  rule: string;
  line: string;
}

const PATHS = ['/apis/portal.dev/v1alpha1/portalclusterrules', '/apis/portal.dev/v1alpha1/portalrules'] as const;

/** The problems the rules' status shows now; undefined when the rules cannot be listed. */
export async function listRuleProblems(client: Pick<DevApiClient, 'request'>): Promise<RuleProblem[] | undefined> {
  const problems: RuleProblem[] = [];
  for (const path of PATHS) {
    let res: { status: number; body: unknown };
    try {
      res = await client.request('GET', path);
    } catch {
      return undefined;
    }
    if (res.status !== 200) return undefined;
    const items = ((res.body as { items?: RuleObject[] }).items ?? []) as RuleObject[];
    for (const r of items) problems.push(...problemsOf(r, path.endsWith('portalrules') ? 'PortalRule' : 'PortalClusterRule'));
  }
  return problems.sort((a, b) => a.rule.localeCompare(b.rule) || a.line.localeCompare(b.line));
}

/** The problems of one rule, from a status written for its current generation (an older one is not judged). */
export function problemsOf(r: RuleObject, kind: 'PortalRule' | 'PortalClusterRule'): RuleProblem[] {
  const name = r.metadata?.name ?? '';
  const display = kind === 'PortalRule' ? `${r.metadata?.namespace ?? ''}/${name}` : name;
  const rule = `${kind}/${display}`;
  // A status from before the last edit says nothing about the rule as it is now: wait for the leader's next one.
  if (r.status?.observedGeneration !== undefined && r.metadata?.generation !== undefined && r.status.observedGeneration !== r.metadata.generation) return [];
  const conditions = r.status?.conditions ?? [];
  const out: RuleProblem[] = [];
  const cond = (type: string): Condition | undefined => conditions.find((c) => c.type === type);
  const ready = cond('Ready');
  if (ready?.status === 'False') out.push({ rule, line: `${kind} ${display} is not Ready (${ready.reason ?? ''}): ${ready.message ?? ''}` });
  const covered = cond('Covered');
  if (covered?.status === 'False') out.push({ rule, line: `${kind} ${display} is not covered (${covered.reason ?? ''}): ${covered.message ?? ''}` });
  return out;
}

/** The lines to print when the problems changed from `before` to `now`; none when nothing changed. */
export function problemReport(before: readonly RuleProblem[], now: readonly RuleProblem[]): string[] {
  const key = (ps: readonly RuleProblem[]): string => ps.map((p) => p.line).join('\n');
  if (key(before) === key(now)) return [];
  if (now.length === 0) return ['portal dev: every rule is Ready and covered now'];
  const rules = new Set(now.map((p) => p.rule)).size;
  return [`portal dev: ${rules} rule${rules === 1 ? '' : 's'} need${rules === 1 ? 's' : ''} attention (kubectl get pcrule, kubectl get prule -A; kubectl describe shows their Events):`, ...now.map((p) => `portal dev:   ${p.line}`)];
}

/** The status line's note: `` or ` · 2 rules need attention`. */
export function problemNote(now: readonly RuleProblem[]): string {
  const rules = new Set(now.map((p) => p.rule)).size;
  return rules === 0 ? '' : ` · ${rules} rule${rules === 1 ? '' : 's'} need${rules === 1 ? 's' : ''} attention`;
}
