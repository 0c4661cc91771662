/**
 * CEL benchmark (engine part).
 *
 * 1. Rules: time per admission decision of the 19 Pod Security controls
 *    written as CEL rules (bench/cel-pss-rules.ts) against the JSON Schema
 *    library (policies/pod-security), on the same realistic Pod, same run.
 *    CEL's per-request conversion of the object to CEL values is measured
 *    on freshly parsed objects and added to its time.
 * 2. Engines: the same plain CEL expressions (no optionals, which
 *    @bufbuild/cel cannot parse) on the same Pod with @bufbuild/cel 0.6.1
 *    and @marcbachmann/cel-js 8.0 (raw libraries, pre-parsed), and with
 *    Portal's engine (cel-js plus the cost meter and JSON → CEL conversion).
 *
 * Times are CPU time of this process (see opsPerSecond). Portal's code is
 * the compiled build production runs (bench/compiled.ts); `--from-source`
 * measures src/ through tsx instead (what this bench did before session 9:
 * it flattered CEL's ratio, tsx adding more to JSON Schema's time).
 *
 * Run: npm run -s bench -- cel [--seconds 2] [--from-source]. Prints one JSON object.
 */
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { celEnv, parse as bufParse, plan as bufPlan, isCelError } from '@bufbuild/cel';
import { Environment } from '@marcbachmann/cel-js';
import type * as RuleFiles from '../src/sources/rule-files.ts';
import type * as Cel from '../src/policy/cel/index.ts';
import type * as Policy from '../src/policy/index.ts';
import type { KubeObject, PortalRuleObject, RuleSet } from '../src/policy/index.ts';
import { celPssRules } from './cel-pss-rules.ts';
import { compilePortal, type CompiledPortal } from './compiled.ts';
import { cpuSeconds, opsPerSecond as cpuOpsPerSecond } from './cpu-time.ts';
import { podInput, realisticPod } from './realistic-pod.ts';

const secondsArg = process.argv.indexOf('--seconds');
const SECONDS = secondsArg > 0 ? Number(process.argv[secondsArg + 1]) : 4;
const root = fileURLToPath(new URL('..', import.meta.url));
const FROM_SOURCE = process.argv.includes('--from-source');

const build: CompiledPortal | undefined = FROM_SOURCE ? undefined : await compilePortal(`cel-${process.pid}`);
const from = <T>(source: string, compiled: string): Promise<T> => (build ? build.load<T>(compiled) : (import(source) as Promise<T>));
const { loadRulesFromDirectory } = await from<typeof RuleFiles>('../src/sources/rule-files.ts', 'sources/rule-files.js');
const { compile, evaluate: celEvaluate, newBudget } = await from<typeof Cel>('../src/policy/cel/index.ts', 'policy/cel/index.js');
const { decideAdmission, evaluate, RuleSet: RuleSetClass } = await from<typeof Policy>('../src/policy/index.ts', 'policy/index.js');

/** Operations per CPU second of this process (bench/cpu-time.ts), in batches of 20. */
const opsPerSecond = (fn: () => unknown, seconds: number): number => cpuOpsPerSecond(fn, seconds, { batch: 20 });

function ruleSet(rules: PortalRuleObject[]): RuleSet {
  const rs = new RuleSetClass();
  for (const r of rules) {
    const s = rs.upsert(r);
    if (!s.ready) throw new Error(`${s.key}: ${s.message}`);
  }
  return rs;
}

const round = (x: number, d = 2): number => Number(x.toFixed(d));

/** Decisions of each rule set timed as its warm-up, before the rounds. */
const WARMUP_DECISIONS = 2_000;

async function main(): Promise<void> {
  const loaded = await loadRulesFromDirectory(`${root}policies/pod-security`);
  if (loaded.errors.length > 0) throw new Error(loaded.errors.map((e) => `${e.source}: ${e.message}`).join('\n'));
  const schemaSet = ruleSet(loaded.rules);
  const celRules = celPssRules();
  const compileStart = performance.now();
  const celSet = ruleSet(celRules);
  const celCompileMs = performance.now() - compileStart;

  const pod = realisticPod();
  const review = JSON.stringify({ request: { object: pod } });
  const inputFor = podInput;
  const fresh = (): KubeObject => (JSON.parse(review) as { request: { object: KubeObject } }).request.object;

  // The two libraries must agree on this Pod for the comparison to mean anything.
  const verdictsOf = (rs: RuleSet): Record<string, string> => Object.fromEntries(evaluate(rs, inputFor(fresh())).map((v) => [v.rule, v.result]));
  const schemaVerdicts = verdictsOf(schemaSet);
  const celVerdicts = verdictsOf(celSet);
  const disagreements = Object.keys(schemaVerdicts).filter((k) => schemaVerdicts[k] !== celVerdicts[k]);

  // Warm-up first, measured apart: the first decisions of a rule set run
  // before V8 has optimised the generated code (the first 2,000 cost CEL
  // ~30× its steady state, JSON Schema ~16×, measured in session 9: the
  // ratio of sums over the rounds then read 2–3 while their median read
  // 1.5). The rounds below compare the steady state, which the goal is
  // about; the warm-up is reported on its own (a rule change pays it once
  // per replica).
  const warmup = (fn: () => unknown): number => {
    const start = cpuSeconds();
    for (let i = 0; i < WARMUP_DECISIONS; i++) fn();
    return ((cpuSeconds() - start) * 1e6) / WARMUP_DECISIONS;
  };
  const schemaWarmupUs = warmup(() => decideAdmission(schemaSet, inputFor(pod)));
  const celWarmupUs = warmup(() => decideAdmission(celSet, inputFor(pod)));
  opsPerSecond(() => decideAdmission(schemaSet, inputFor(pod)), SECONDS / 8);
  opsPerSecond(() => decideAdmission(celSet, inputFor(pod)), SECONDS / 8);

  // The machine is shared (load above 10 on 2 cores is common here), with
  // bursts: alternate many short slices of the two loops and compare the
  // sums, so both libraries see the same load. Both evaluate the same Pod
  // object; CEL also pays, once per request, the conversion of the object to
  // CEL values (cached by object identity, so it is measured apart, on
  // freshly parsed objects, and added).
  const ROUNDS = 40;
  const slice = SECONDS / ROUNDS / 2;
  const rounds: { schema: number; cel: number; conversion: number }[] = [];
  let schemaTotal = 0;
  let celTotal = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const schema = 1e6 / opsPerSecond(() => decideAdmission(schemaSet, inputFor(pod)), slice);
    const celEval = 1e6 / opsPerSecond(() => decideAdmission(celSet, inputFor(pod)), slice);
    // Issue 19: the generated code reads the parsed JSON; no conversion to CEL values is left to add.
    const conversion = 0;
    rounds.push({ schema, cel: celEval + conversion, conversion });
    schemaTotal += schema;
    celTotal += celEval + conversion;
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const schemaUs = median(rounds.map((r) => r.schema));
  const celUs = median(rounds.map((r) => r.cel));
  const conversionUs = median(rounds.map((r) => r.conversion));
  const ratio = median(rounds.map((r) => r.cel / r.schema));
  const ratioOfSums = celTotal / schemaTotal;
  const parseUs = 1e6 / opsPerSecond(() => fresh(), SECONDS / ROUNDS);

  // Engines: raw libraries on the same plain expressions.
  const exprs = [
    'object.spec.containers.all(c, !has(c.securityContext) || !has(c.securityContext.privileged) || c.securityContext.privileged == false)',
    'object.spec.containers.all(c, has(c.securityContext) && has(c.securityContext.allowPrivilegeEscalation) && c.securityContext.allowPrivilegeEscalation == false)',
    '!has(object.spec.hostNetwork) || object.spec.hostNetwork == false',
    '!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))',
    'object.spec.containers.all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))',
    "object.metadata.name.matches('^[a-z0-9-]+$')",
  ];
  const env = celEnv({ variables: { object: undefined as never } } as never);
  const bufPlans = exprs.map((e) => bufPlan(env, bufParse(e)) as (ctx: { object: unknown }) => unknown);
  const mbEnv = new Environment({ unlistedVariablesAreDyn: true });
  const mbPrograms = exprs.map((e) => mbEnv.parse(e));
  const portalPrograms = exprs.map((e) => {
    const p = compile(e);
    if (!p.ok) throw new Error(`${e}: ${p.message}`);
    return p;
  });
  const bufResults = bufPlans.map((p) => p({ object: pod }));
  const mbResults = mbPrograms.map((p) => p({ object: pod }) as unknown);
  if (bufResults.some((r) => isCelError(r) || r !== true) || mbResults.some((r) => r !== true)) {
    throw new Error(`engines disagree on the Pod: ${JSON.stringify({ bufResults: bufResults.map(String), mbResults })}`);
  }
  const bufOps = opsPerSecond(() => {
    for (const p of bufPlans) p({ object: pod });
  }, SECONDS);
  const mbOps = opsPerSecond(() => {
    for (const p of mbPrograms) p({ object: pod });
  }, SECONDS);
  const activation = { object: pod };
  const portalOps = opsPerSecond(() => {
    const budget = newBudget();
    for (const p of portalPrograms) celEvaluate(p, activation, budget);
  }, SECONDS);
  // The same Pod object each time: its conversion is cached (celConversionMicroseconds is that cost).
  const portalUs = 1e6 / portalOps;

  console.log(
    JSON.stringify(
      {
        benchmark: 'cel',
        machine: { cpus: cpus().length, node: process.version, loadavg1m: round(loadavg()[0] ?? NaN) },
        seconds: SECONDS,
        code: FROM_SOURCE ? 'src/ through tsx' : 'compiled (tsc -p tsconfig.build.json)',
        rules: {
          pod: { bytes: JSON.stringify(pod).length },
          schemaRules: loaded.rules.length,
          celRules: celRules.length,
          disagreements,
          jsonParseOfReviewMicroseconds: round(parseUs),
          celConversionMicroseconds: round(conversionUs),
          schemaMicrosecondsPerEvaluation: round(schemaUs),
          celMicrosecondsPerEvaluation: round(celUs),
          // Goal (issue 12): ≤ 2. Median of the per-round ratios, and the ratio of the sums over all rounds.
          celOverSchema: round(ratio),
          celOverSchemaOfSums: round(ratioOfSums),
          celOverSchemaQuartiles: [0.25, 0.75].map((q) => round([...rounds.map((r) => r.cel / r.schema)].sort((a, b) => a - b)[Math.floor(rounds.length * q)] ?? NaN)),
          celCompileLibraryMs: round(celCompileMs),
          // The first WARMUP_DECISIONS decisions of each, per decision (before V8 optimised them).
          warmupMicrosecondsPerEvaluation: { decisions: WARMUP_DECISIONS, schema: round(schemaWarmupUs), cel: round(celWarmupUs) },
        },
        engines: {
          expressions: exprs.length,
          bufbuildMicrosecondsPerSet: round(1e6 / bufOps),
          celjsMicrosecondsPerSet: round(1e6 / mbOps),
          celjsSpeedupOverBufbuild: round(bufOps > 0 ? mbOps / bufOps : NaN),
          // cel-js + metering + Portal's plumbing; excludes the per-request conversion.
          portalMicrosecondsPerSet: round(portalUs),
        },
      },
      null,
      2,
    ),
  );
}

try {
  await main();
} finally {
  await build?.remove();
}
