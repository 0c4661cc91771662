/**
 * The replica's per-rule series, bound to the rules and exceptions in force
 * (issues 31 and 33): the workers' per-rule results and times
 * (`portal_admission_results_total`, `portal_admission_rule_duration_seconds`),
 * and the counters that name a rule or an exception
 * (`portal_rule_evaluation_errors_total`, `portal_exceptions_applied_total`)
 * pruned to what is in force, on each change of the set and before each
 * scrape. A deleted rule or exception leaves /metrics at once.
 */
import type { Counter, Registry } from 'prom-client';
import { ruleErrorsCounter } from '../audit/rule-problems.ts';
import { registerRuleMetrics, seriesInForce } from '../evaluation/rule-metrics.ts';
import { RuleStats } from '../evaluation/rule-stats.ts';
import { pruneSeries } from '../observability/metrics.ts';
import type { RuleSet } from '../policy/index.ts';

interface InForce {
  revision: number;
  series: Set<string>;
  rules: Set<string>;
  exceptions: Set<string>;
}

/** Builds the RuleStats the admission pool's workers write to, and registers and prunes the per-rule series. */
export function bindRuleSeries(registry: Registry, rules: RuleSet, exceptionsApplied: Counter<'exception' | 'rule'>): RuleStats {
  let cached: InForce | undefined;
  // Recomputed once per revision of the set: a scrape reads it for each metric.
  const inForce = (): InForce => {
    if (cached?.revision === rules.revision) return cached;
    const rulesNow = new Set(rules.states().map((s) => (s.namespace !== undefined ? `${s.namespace}/${s.name}` : s.name)));
    const exceptions = new Set(rules.exceptionStates().map((e) => e.display));
    cached = { revision: rules.revision, series: seriesInForce(rules), rules: rulesNow, exceptions };
    return cached;
  };
  const stats = new RuleStats();
  registerRuleMetrics(registry, stats, () => inForce().series);
  const pruneErrors = pruneSeries(ruleErrorsCounter(registry), (l) => inForce().rules.has(String(l.rule)));
  const pruneExceptions = pruneSeries(exceptionsApplied, (l) => inForce().exceptions.has(String(l.exception)) && inForce().rules.has(String(l.rule)));
  rules.onChange((change) => {
    if (change.op === 'remove') pruneErrors();
    if (change.op === 'remove' || change.op === 'removeException') pruneExceptions();
  });
  return stats;
}
