/**
 * What `portal dev` says about the rules (issue 15 item 3): every rule that is
 * not Ready, not Covered or reads fields its kinds do not have (TypeChecked
 * False, issue 33), read from the status the leader writes (the same
 * conditions `kubectl get pcrule` shows), printed at start-up and whenever
 * the set changes, and counted on the status line so that "2/2 replicas
 * ready" never reads as "all is fine" while a rule is broken.
 */
import { RuleSet, type PortalRuleObject } from 'portal/dev-api';
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

export interface RuleProblemList {
  problems: RuleProblem[];
  /** Rules whose status does not describe their current generation yet (no leader has written it). */
  pending: Set<string>;
}

/** The problems the rules' status shows now; undefined when the rules cannot be listed. */
export async function listRuleProblems(client: Pick<DevApiClient, 'request'>): Promise<RuleProblemList | undefined> {
  const problems: RuleProblem[] = [];
  const pending = new Set<string>();
  for (const path of PATHS) {
    let res: { status: number; body: unknown };
    try {
      res = await client.request('GET', path);
    } catch {
      return undefined;
    }
    if (res.status !== 200) return undefined;
    const items = ((res.body as { items?: RuleObject[] }).items ?? []) as RuleObject[];
    const kind = path.endsWith('portalrules') ? 'PortalRule' : 'PortalClusterRule';
    for (const r of items) {
      if (r.status?.observedGeneration === undefined || r.status.observedGeneration !== r.metadata?.generation) pending.add(ruleId(r, kind));
      else problems.push(...problemsOf(r, kind));
    }
  }
  return { problems: sortProblems(problems), pending };
}

function sortProblems(ps: RuleProblem[]): RuleProblem[] {
  return ps.sort((a, b) => a.rule.localeCompare(b.rule) || a.line.localeCompare(b.line));
}

function ruleId(r: RuleObject, kind: 'PortalRule' | 'PortalClusterRule'): string {
  const name = r.metadata?.name ?? '';
  return `${kind}/${kind === 'PortalRule' ? `${r.metadata?.namespace ?? ''}/${name}` : name}`;
}

/**
 * What the replicas will say about the rules `portal dev` installs, known
 * before any replica runs: the RuleSet's own verdict (same code, same words)
 * on each rule from --policies. It stands in for a rule until the leader has
 * written its status.
 */
export function localProblems(rules: readonly Record<string, unknown>[]): RuleProblem[] {
  const set = new RuleSet();
  const out: RuleProblem[] = [];
  for (const rule of rules) {
    const state = set.upsert(rule as unknown as PortalRuleObject);
    if (state.ready) continue;
    const kind = state.ruleKind;
    const display = state.namespace !== undefined ? `${state.namespace}/${state.name}` : state.name;
    out.push({ rule: `${kind}/${display}`, line: `${kind} ${display} is not Ready (${state.reason}): ${state.message}` });
  }
  return sortProblems(out);
}

/** The status-derived problems, with the local ones of rules whose status is still pending. */
export function mergeProblems(list: RuleProblemList, local: readonly RuleProblem[]): RuleProblem[] {
  return sortProblems([...list.problems, ...local.filter((p) => list.pending.has(p.rule))]);
}

/** The problems of one rule, from a status written for its current generation (an older one is not judged). */
export function problemsOf(r: RuleObject, kind: 'PortalRule' | 'PortalClusterRule'): RuleProblem[] {
  const name = r.metadata?.name ?? '';
  const display = kind === 'PortalRule' ? `${r.metadata?.namespace ?? ''}/${name}` : name;
  const rule = `${kind}/${display}`;
  const conditions = r.status?.conditions ?? [];
  const out: RuleProblem[] = [];
  const cond = (type: string): Condition | undefined => conditions.find((c) => c.type === type);
  const ready = cond('Ready');
  if (ready?.status === 'False') out.push({ rule, line: `${kind} ${display} is not Ready (${ready.reason ?? ''}): ${ready.message ?? ''}` });
  const covered = cond('Covered');
  if (covered?.status === 'False') out.push({ rule, line: `${kind} ${display} is not covered (${covered.reason ?? ''}): ${covered.message ?? ''}` });
  // A field no matched kind has (an Audit rule, or one that got in while the webhook was down): issue 33.
  const typed = cond('TypeChecked');
  if (typed?.status === 'False') out.push({ rule, line: `${kind} ${display} reads fields its kinds do not have (${typed.reason ?? ''}): ${typed.message ?? ''}` });
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
