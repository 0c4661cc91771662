/**
 * Type-check benchmark (issue 33 item 1): the CPU the rules webhook spends
 * on one PortalRule at apply — validateRule, which compiles the rule and now
 * also type-checks it against the matched kinds' schemas — against the same
 * call with the check finding no schema (it stops at once), measured in the
 * same run. The webhook for Portal's own kinds answers on the main thread,
 * so this is what an apply costs the thread that also serves probes.
 *
 * Rules:
 * - the shipped library (policies/: 22 rules, schema and CEL), all of them
 *   per call;
 * - the largest rule the webhook accepts: 8 CEL expressions of ~8 KiB
 *   (64 KiB together, MAX_CEL_SOURCE_LENGTH), each reading Deployment fields.
 *
 * Each figure is the best of 10 batches of process CPU time per call,
 * median over rounds.
 *
 * Run: node --import tsx bench/type-check.ts [--rounds 5]
 */
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { loadRulesFromDirectory } from '../src/sources/rule-files.ts';
import { validateRule } from '../src/policy/index.ts';
import { MAX_CEL_SOURCE_LENGTH } from '../src/policy/cel-rule.ts';
import { builtinSchemas, staticSource } from '../src/policy/kind-schemas/catalogue.ts';
import { cpuMicrosPerCall } from './cpu-time.ts';

const roundsArg = process.argv.indexOf('--rounds');
const ROUNDS = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : 5;
const root = fileURLToPath(new URL('..', import.meta.url));

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

const library = (await loadRulesFromDirectory(`${root}policies`)).rules;
const one = "(object.spec.replicas <= 10 && object.spec.template.spec.containers.all(c, c.image != '')) && ";
const count = Math.floor(MAX_CEL_SOURCE_LENGTH / 8 / one.length);
const largest = {
  apiVersion: 'portal.dev/v1alpha1',
  kind: 'PortalClusterRule',
  metadata: { name: 'largest' },
  spec: { match: { kinds: [{ apiGroups: ['apps'], kinds: ['Deployment'] }] }, validate: { cel: { expressions: Array.from({ length: 8 }, () => ({ expression: `${one.repeat(count)}true` })) } } },
};
const none = staticSource([]);
const cases = {
  library: { batch: 5, run: (schemas: typeof none) => library.map((r) => validateRule(r, schemas)) },
  largest: { batch: 2, run: (schemas: typeof none) => validateRule(largest, schemas) },
};
const out: Record<string, unknown> = { machine: { cpus: cpus().length, loadavg: loadavg().map((l) => Math.round(l * 100) / 100) }, rules: library.length };
for (const [name, c] of Object.entries(cases)) {
  if (name === 'largest' && (c.run(builtinSchemas()) as { ok: boolean }).ok !== true) throw new Error('the largest rule must pass its check');
  const base: number[] = [];
  const checked: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    base.push(cpuMicrosPerCall(() => c.run(none), { batch: c.batch, warmupBatches: 1 }));
    checked.push(cpuMicrosPerCall(() => c.run(builtinSchemas()), { batch: c.batch, warmupBatches: 1 }));
  }
  out[name] = { baselineMicros: Math.round(median(base)), checkedMicros: Math.round(median(checked)), ratio: Math.round((median(checked) / median(base)) * 100) / 100 };
}
process.stdout.write(`${JSON.stringify(out)}\n`);
