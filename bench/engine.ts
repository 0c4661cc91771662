/**
 * Engine benchmark: evaluations per second of the Pod Security library (all
 * rules in policies/pod-security, or a synthetic set of 17 if absent) on a
 * realistic ~3 KB Pod, against a baseline measured in the same run: JSON.parse
 * of the AdmissionReview that carries that Pod (the least work any webhook
 * does per request) and JSON.parse + JSON.stringify of it. Also the cost of
 * compiling the whole library.
 *
 * Run: node --import tsx bench/engine.ts [--seconds 2]
 * Prints one JSON object.
 */
import { existsSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { loadRulesFromDirectory } from '../src/sources/rule-files.ts';
import { compileLinear, decide, decideAdmission, evaluate, RuleSet, type PortalRuleObject } from '../src/policy/index.ts';
import { cpuMicrosPerCall, opsPerSecond as wallOpsPerSecond, wallSeconds } from './cpu-time.ts';
import { podInput, realisticPod } from './realistic-pod.ts';

const secondsArg = process.argv.indexOf('--seconds');
const SECONDS = secondsArg > 0 ? Number(process.argv[secondsArg + 1]) : 2;
const root = fileURLToPath(new URL('..', import.meta.url));
const PSS_DIR = `${root}policies/pod-security`;

function syntheticRules(): PortalRuleObject[] {
  const fields = ['privileged', 'allowPrivilegeEscalation', 'readOnlyRootFilesystem', 'runAsNonRoot'];
  return Array.from({ length: 17 }, (_, i) => ({
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalClusterRule',
    metadata: { name: `synthetic-${i}` },
    spec: {
      match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] },
      validate: {
        schema: {
          properties: {
            spec: {
              properties: {
                containers: { items: { properties: { securityContext: { properties: { [fields[i % fields.length] as string]: { type: 'boolean' } } } } } },
              },
            },
          },
        },
      },
    },
  }));
}

/** Calls per wall-clock second of fn (the rates below); cpuMicros are the CPU-time costs, not slowed by a busy machine. */
const opsPerSecond = (fn: () => unknown, seconds: number): number => wallOpsPerSecond(fn, seconds, { batch: 1000, clock: wallSeconds });
const cpuMicros = (fn: () => unknown): number => cpuMicrosPerCall(fn, { batch: 5000, warmupBatches: 4 });

async function main(): Promise<void> {
  let rules: PortalRuleObject[];
  let source: string;
  if (existsSync(PSS_DIR)) {
    const loaded = await loadRulesFromDirectory(PSS_DIR);
    if (loaded.errors.length > 0) throw new Error(loaded.errors.map((e) => `${e.source}: ${e.message}`).join('\n'));
    rules = loaded.rules;
    source = 'policies/pod-security';
  } else {
    rules = syntheticRules();
    source = 'synthetic';
  }

  // Compile cost: a fresh RuleSet each time, so every schema is compiled.
  const compileRounds = 20;
  const compileStart = performance.now();
  let rs = new RuleSet();
  for (let r = 0; r < compileRounds; r++) {
    rs = new RuleSet();
    for (const rule of rules) {
      const state = rs.upsert(rule);
      if (!state.ready) throw new Error(`${state.key}: ${state.message}`);
    }
  }
  const compileMs = (performance.now() - compileStart) / compileRounds;

  const pod = realisticPod();
  const review = JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: '705ab4f5-6393-11e8-b7cc-42010a800002',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      requestResource: { group: '', version: 'v1', resource: 'pods' },
      name: 'checkout-7d9f8b6c5d-x2k4p',
      namespace: 'shop',
      operation: 'CREATE',
      userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller', uid: 'a1b2', groups: ['system:serviceaccounts', 'system:authenticated'] },
      object: pod,
      oldObject: null,
      dryRun: false,
      options: { kind: 'CreateOptions', apiVersion: 'meta.k8s.io/v1' },
    },
  });
  const input = podInput(pod);
  const verdicts = evaluate(rs, input);
  const decision = decide(verdicts);

  const evalOps = opsPerSecond(() => decide(evaluate(rs, input)), SECONDS);
  // The admission path: decideAdmission builds no pass/skip verdicts.
  const admissionOps = opsPerSecond(() => decideAdmission(rs, input), SECONDS);
  // As `portal serve` calls it: with the evaluation time budget (a clock read per rule and per regex test).
  const now = (): number => performance.now();
  const budgetedOps = opsPerSecond(() => decideAdmission(rs, input, { deadline: now() + 2000, now, ms: 2000 }), SECONDS);
  // One rule pattern (disallow-latest-tag) on an image reference: RE2 (re2js) against V8's backtracking RegExp.
  const image = 'registry.example.com/shop/checkout:1.4.2';
  const re2 = compileLinear(':[^/:@]+$');
  const v8 = /:[^/:@]+$/u;
  const re2Ops = opsPerSecond(() => re2.test(image), SECONDS);
  const v8Ops = opsPerSecond(() => v8.test(image), SECONDS);
  const cpu = {
    admissionDecisionUs: cpuMicros(() => decideAdmission(rs, input)),
    admissionDecisionWithBudgetUs: cpuMicros(() => decideAdmission(rs, input, { deadline: now() + 2000, now, ms: 2000 })),
    jsonParseUs: cpuMicros(() => JSON.parse(review)),
    re2TestUs: cpuMicros(() => re2.test(image)),
    v8TestUs: cpuMicros(() => v8.test(image)),
  };
  const parseOps = opsPerSecond(() => JSON.parse(review), SECONDS);
  // The round trip every webhook pays at least once: parse the review, serialize an answer of the same size.
  const roundTripOps = opsPerSecond(() => JSON.stringify(JSON.parse(review)), SECONDS);
  const result = {
    benchmark: 'engine',
    machine: { cpus: cpus().length, node: process.version, loadavg1m: Math.round((loadavg()[0] ?? NaN) * 100) / 100 },
    rules: { source, count: rules.length, verdictsPerEvaluation: verdicts.length },
    podBytes: JSON.stringify(pod).length,
    reviewBytes: review.length,
    decision: decision.allowed ? 'allowed' : 'denied',
    warnings: decision.warnings.length,
    evaluationsPerSecond: Math.round(evalOps),
    microsecondsPerEvaluation: Number((1e6 / evalOps).toFixed(2)),
    microsecondsPerAdmissionDecision: Number((1e6 / admissionOps).toFixed(2)),
    microsecondsPerAdmissionDecisionWithBudget: Number((1e6 / budgetedOps).toFixed(2)),
    cpuMicroseconds: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, Number(v.toFixed(3))])),
    regexTest: { pattern: ':[^/:@]+$', input: image, re2PerSecond: Math.round(re2Ops), v8PerSecond: Math.round(v8Ops), re2ToV8: Number((re2Ops / v8Ops).toFixed(3)) },
    baselineJsonParsePerSecond: Math.round(parseOps),
    microsecondsPerJsonParse: Number((1e6 / parseOps).toFixed(2)),
    // > 1 means evaluating all rules is cheaper than just parsing the review.
    evaluationsPerJsonParse: Number((evalOps / parseOps).toFixed(2)),
    baselineJsonRoundTripPerSecond: Math.round(roundTripOps),
    evaluationsPerJsonRoundTrip: Number((evalOps / roundTripOps).toFixed(2)),
    compileLibraryMs: Number(compileMs.toFixed(2)),
    compileMsPerRule: Number((compileMs / rules.length).toFixed(3)),
  };
  console.log(JSON.stringify(result, null, 2));
}

await main();
