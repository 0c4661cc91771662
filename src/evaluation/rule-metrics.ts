/**
 * `portal_admission_results_total{rule,enforcement,result}` and
 * `portal_admission_rule_duration_seconds{rule}`: the workers' per-rule
 * counts (rule-stats.ts), read when /metrics is scraped.
 *
 * Bounded by the rules in force: a series exists only for a (rule,
 * enforcement) the RuleSet holds now, so a deleted rule's series are gone
 * from the next scrape, and a rule whose enforcement changed keeps only the
 * new one. Built as prom-client metric objects whose `get()` computes the
 * values (no label-set bookkeeping in prom-client to keep in step).
 */
import type { MetricValue, MetricValueWithName, Registry } from 'prom-client';
import type { RuleSet } from '../policy/index.ts';
import { BUCKET0, COUNT, RESULTS, RULE_DURATION_BUCKETS, SUM } from './rule-stats-page.ts';
import { seriesKey, type RuleStats, type RuleTotals } from './rule-stats.ts';

/** The (rule, enforcement) series keys of the rules in force: display name and the enforcement of the version in force. */
export function seriesInForce(rules: RuleSet): Set<string> {
  const out = new Set<string>();
  for (const s of rules.states()) {
    const display = s.namespace !== undefined ? `${s.namespace}/${s.name}` : s.name;
    out.add(seriesKey(display, rules.matchOf(s.key)?.enforcement ?? s.enforcement));
  }
  return out;
}

type Values = MetricValue<string>[] | MetricValueWithName<string>[];

/** A metric whose samples are computed at each scrape. */
class ComputedMetric {
  readonly aggregator = 'sum' as const;

  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'histogram',
    readonly values: () => Values,
  ) {}

  /** What Registry.metrics() formats (prom-client's MetricObjectWithValues). */
  get(): { name: string; help: string; type: string; aggregator: string; values: Values } {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.values() };
  }

  /** Nothing to reset: the counts live in the workers' pages. */
  reset(): void {}
}

function resultValues(totals: readonly RuleTotals[]): MetricValue<string>[] {
  const out: MetricValue<string>[] = [];
  for (const t of totals) {
    for (let r = 0; r < RESULTS.length; r++) {
      const n = t.values[r]!;
      if (n > 0) out.push({ labels: { rule: t.rule, enforcement: t.enforcement, result: RESULTS[r]! }, value: n });
    }
  }
  return out;
}

/** Per rule (summed over its enforcements), the cumulative buckets, +Inf, sum and count, as prom-client's Histogram lays them out. */
function durationValues(totals: readonly RuleTotals[], name: string): MetricValueWithName<string>[] {
  const byRule = new Map<string, Float64Array>();
  for (const t of totals) {
    const into = byRule.get(t.rule);
    if (into === undefined) byRule.set(t.rule, t.values.slice());
    else for (let i = 0; i < into.length; i++) into[i]! += t.values[i]!;
  }
  const out: MetricValueWithName<string>[] = [];
  for (const [rule, v] of byRule) {
    const count = v[COUNT]!;
    if (count === 0) continue;
    let cumulative = 0;
    RULE_DURATION_BUCKETS.forEach((le, b) => {
      cumulative += v[BUCKET0 + b]!;
      out.push({ metricName: `${name}_bucket`, labels: { rule, le }, value: cumulative });
    });
    out.push({ metricName: `${name}_bucket`, labels: { rule, le: '+Inf' }, value: count });
    out.push({ metricName: `${name}_sum`, labels: { rule }, value: v[SUM]! });
    out.push({ metricName: `${name}_count`, labels: { rule }, value: count });
  }
  return out;
}

/** Registers both metrics on `registry`; `inForce` is read once per scrape of each. */
export function registerRuleMetrics(registry: Registry, stats: RuleStats, inForce: () => ReadonlySet<string>): void {
  const totals = (): RuleTotals[] => stats.totals(inForce());
  const duration = 'portal_admission_rule_duration_seconds';
  registry.registerMetric(
    new ComputedMetric(
      'portal_admission_results_total',
      'Results of each rule in force at admission, by rule, enforcement and result (pass, fail, warn, error; skip: a PortalException exempted the request). A rule whose match or matchConditions leave the request out gives none.',
      'counter',
      () => resultValues(totals()),
    ) as unknown as Parameters<Registry['registerMetric']>[0],
  );
  registry.registerMetric(
    new ComputedMetric(duration, 'Time each rule in force took to evaluate one admission request (its CEL and schema), by rule; exemptions are not timed.', 'histogram', () =>
      durationValues(totals(), duration),
    ) as unknown as Parameters<Registry['registerMetric']>[0],
  );
}
