/**
 * VAP benchmark: time per evaluation of the Pod Security Standards as
 * ValidatingAdmissionPolicies (policies/pod-security-vap, every policy with
 * its binding, through the CEL engine) against the JSON Schema library
 * (policies/pod-security) on the same benchmark Pod, in the same run.
 * Goal (issue 12): the VAP set costs at most 2x the JSON Schema set.
 *
 * Each evaluation gets a different (structurally equal) Pod object, as each
 * admission request does: the CEL side then pays its JSON → CEL conversion,
 * which it caches per object. The same-object figures are printed too.
 *
 * Times are CPU time of this process, the two sides measured in alternated
 * rounds (median of the per-round ratios), as bench/cel.ts does.
 *
 * Run: npm run -s bench -- vap [--seconds 2]
 * Prints one JSON object.
 */
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { loadRulesFromDirectory } from '../src/sources/rule-files.ts';
import { evaluate, RuleSet, type KubeObject } from '../src/policy/index.ts';
import { admissionOutcome, VapSet, type VapAttributes, type VapContext } from '../src/policy/vap/index.ts';
import { opsPerSecond as cpuOpsPerSecond } from './cpu-time.ts';
import { podInput, realisticPod } from './realistic-pod.ts';

const secondsArg = process.argv.indexOf('--seconds');
const SECONDS = secondsArg > 0 ? Number(process.argv[secondsArg + 1]) : 2;
const root = fileURLToPath(new URL('..', import.meta.url));

/** Operations per CPU second (bench/cpu-time.ts), in batches of 200. */
const opsPerSecond = (fn: (i: number) => unknown, seconds: number): number => cpuOpsPerSecond(fn, seconds, { batch: 200 });

/** Median over `rounds` alternated slices of the two loops: both see the same load. */
function alternated(a: (i: number) => unknown, b: (i: number) => unknown, seconds: number, rounds = 10): { a: number; b: number; ratio: number } {
  const as: number[] = [];
  const bs: number[] = [];
  for (let r = 0; r < rounds; r++) {
    as.push(opsPerSecond(a, seconds / rounds / 2));
    bs.push(opsPerSecond(b, seconds / rounds / 2));
  }
  const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? NaN;
  return { a: median(as), b: median(bs), ratio: median(as.map((x, i) => x / (bs[i] ?? NaN))) };
}

async function main(): Promise<void> {
  const schema = await loadRulesFromDirectory(`${root}policies/pod-security`);
  const vapDir = await loadRulesFromDirectory(`${root}policies/pod-security-vap`);
  const problems = [...schema.errors, ...vapDir.errors];
  if (problems.length > 0) throw new Error(problems.map((e) => `${e.source}: ${e.message}`).join('\n'));
  const rs = new RuleSet();
  for (const r of schema.rules) rs.upsert(r);
  // Compiling the library (issue 19 goal: ≤ 50 ms): the first time in this
  // process (cel-js and the code generator cold), then again, as a new
  // policy generation is compiled in a running replica.
  const compileLibrary = (): { set: VapSet; ms: number } => {
    const start = performance.now();
    const set = new VapSet();
    for (const { policy } of vapDir.vap.policies) set.upsertPolicy(policy);
    for (const { binding } of vapDir.vap.bindings) set.upsertBinding(binding);
    return { set, ms: performance.now() - start };
  };
  const cold = compileLibrary();
  const warm = Array.from({ length: 5 }, () => compileLibrary().ms).sort((a, b) => a - b);
  const vaps = cold.set;

  // Distinct objects, rotated: no cache can carry one evaluation's work to the next.
  const pods: KubeObject[] = Array.from({ length: 512 }, () => structuredClone(realisticPod()));
  const ns = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop', labels: { 'kubernetes.io/metadata.name': 'shop' } } };
  const ctx: VapContext = { namespaceObject: ns, params: { scope: () => ({ ok: false, error: 'no params' }), find: () => ({ ok: true, objects: [] }) } };
  const schemaInput = podInput;
  const vapInput = (pod: KubeObject): VapAttributes => ({
    operation: 'CREATE',
    kind: { group: '', version: 'v1', kind: 'Pod' },
    resource: { group: '', version: 'v1', resource: 'pods' },
    subResource: '',
    namespace: 'shop',
    name: 'checkout-7d9f8b6c5d-x2k4p',
    namespaced: true,
    object: pod,
    oldObject: null,
  });
  const first = pods[0] as KubeObject;
  const schemaVerdicts = evaluate(rs, schemaInput(first));
  const vapResults = vaps.evaluate(vapInput(first), ctx);
  if (schemaVerdicts.some((v) => v.result !== 'pass') || vapResults.some((r) => r.result !== 'pass')) {
    throw new Error('the benchmark Pod must pass both libraries (it would otherwise measure a different path)');
  }

  const pick = (i: number): KubeObject => pods[i % pods.length] as KubeObject;
  const distinct = alternated((i) => evaluate(rs, schemaInput(pick(i))), (i) => admissionOutcome(vaps.evaluate(vapInput(pick(i)), ctx)), SECONDS * 2);
  const same = alternated(() => evaluate(rs, schemaInput(first)), () => admissionOutcome(vaps.evaluate(vapInput(first), ctx)), SECONDS * 2);
  const [schemaOps, vapOps, schemaSameOps, vapSameOps] = [distinct.a, distinct.b, same.a, same.b];
  const us = (ops: number): number => Number((1e6 / ops).toFixed(2));
  console.log(
    JSON.stringify(
      {
        benchmark: 'vap',
        machine: { cpus: cpus().length, node: process.version, loadavg1m: Math.round((loadavg()[0] ?? NaN) * 100) / 100 },
        controls: { jsonSchema: schema.rules.length, vap: vapDir.vap.policies.length },
        // Goal (issue 19): <= 50 ms.
        compileVapLibraryMs: { firstInProcess: Number(cold.ms.toFixed(1)), again: Number((warm[2] ?? NaN).toFixed(1)) },
        microsecondsPerEvaluation: { jsonSchema: us(schemaOps), vap: us(vapOps) },
        // Goal: <= 2.
        // Median of the per-round ratios (CPU time, alternated rounds).
        vapToJsonSchemaTimeRatio: Number(distinct.ratio.toFixed(2)),
        sameObject: {
          microsecondsPerEvaluation: { jsonSchema: us(schemaSameOps), vap: us(vapSameOps) },
          vapToJsonSchemaTimeRatio: Number(same.ratio.toFixed(2)),
        },
      },
      null,
      2,
    ),
  );
}

await main();
