/**
 * Per-rule results benchmark (issue 33, Deliver 2): the CPU an admission
 * decision costs a worker with the per-rule counts and times recorded
 * (decideAdmission with the RuleStatsWriter as its `results` sink: two clock
 * reads per rule that applies, a slot lookup and a few additions in shared
 * memory) against the same decision without, measured in the same run.
 *
 * The main thread pays nothing per request for these metrics (it sums the
 * workers' pages when /metrics is scraped), so this is the whole hot-path
 * cost. The scrape's own cost is reported too: summing the pages of
 * `--workers` workers and formatting the series for the rules loaded.
 *
 * Decision: the Pod Security library (policies/pod-security, 19 rules) on
 * the realistic ~3 KB Pod, as bench/exceptions.ts. Rounds alternate the two
 * sides; each takes the best of 10 batches of process CPU per call; the
 * figure is the median over rounds.
 *
 * Run: node --import tsx bench/rule-results.ts [--rounds 9]
 */
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { BroadcastChannel } from 'node:worker_threads';
import { Registry } from 'prom-client';
import { loadRulesFromDirectory } from '../src/sources/rule-files.ts';
import { registerRuleMetrics, seriesInForce } from '../src/evaluation/rule-metrics.ts';
import { RuleStatsWriter } from '../src/evaluation/rule-stats-page.ts';
import { RuleStats } from '../src/evaluation/rule-stats.ts';
import { decideAdmission, RuleSet, type EvaluationBudget } from '../src/policy/index.ts';
import { cpuMicrosPerCall } from './cpu-time.ts';
import { podInput, realisticPod } from './realistic-pod.ts';

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const ROUNDS = arg('rounds', 9);
const root = fileURLToPath(new URL('..', import.meta.url));

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const loaded = await loadRulesFromDirectory(`${root}policies/pod-security`);
  if (loaded.errors.length > 0) throw new Error(loaded.errors.map((e) => `${e.source}: ${e.message}`).join('\n'));
  const rules = new RuleSet();
  for (const r of loaded.rules) rules.upsert(r);
  const input = podInput(realisticPod());
  const stats = new RuleStats();
  const announce = new BroadcastChannel(stats.channelName);
  const writer = new RuleStatsWriter((page) => announce.postMessage({ thread: 1, page }));
  const now = () => performance.now();
  const plain = (): unknown => decideAdmission(rules, input, { deadline: now() + 2000, now, ms: 2000 } satisfies EvaluationBudget);
  const counted = (): unknown => decideAdmission(rules, input, { deadline: now() + 2000, now, ms: 2000, results: writer } satisfies EvaluationBudget);
  const samples = { plain: [] as number[], counted: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? (['plain', 'counted'] as const) : (['counted', 'plain'] as const);
    for (const k of order) samples[k].push(cpuMicrosPerCall(k === 'plain' ? plain : counted, { batch: 2000, warmupBatches: 2 }));
  }
  // The page announcement reaches the reader on a later turn.
  await new Promise((resolve) => setTimeout(resolve, 50));
  const registry = new Registry();
  registerRuleMetrics(registry, stats, () => seriesInForce(rules));
  const text = await registry.metrics();
  const scrapeStart = process.cpuUsage();
  for (let i = 0; i < 100; i++) await registry.metrics();
  const scrape = process.cpuUsage(scrapeStart);
  const plainUs = median(samples.plain);
  const countedUs = median(samples.counted);
  console.log(
    JSON.stringify(
      {
        benchmark: 'rule-results',
        machine: { cpus: cpus().length, node: process.version, loadavg1m: Math.round((loadavg()[0] ?? NaN) * 100) / 100 },
        rules: loaded.rules.length,
        rounds: ROUNDS,
        cpuMicrosecondsPerDecision: { plain: Number(plainUs.toFixed(3)), counted: Number(countedUs.toFixed(3)) },
        costMicroseconds: Number((countedUs - plainUs).toFixed(3)),
        ratio: Number((countedUs / plainUs).toFixed(3)),
        scrape: { series: text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).length, cpuMicroseconds: Math.round((scrape.user + scrape.system) / 100) },
      },
      null,
      2,
    ),
  );
  announce.close();
  stats.close();
}

await main();
