/**
 * PortalException benchmark (issue 18): the CPU of an admission decision with
 * 1,000 exceptions loaded, against the same decision with none, measured in
 * the same run. Goal: ≤ 1.1× the CPU of none.
 *
 * The decision is decideAdmission() with the Pod Security library
 * (policies/pod-security, 19 rules) on the realistic ~3 KB Pod in namespace
 * `shop`: the only code on the request path that exceptions change (the
 * server's decode/encode around it does not depend on them, so the ratio of
 * the whole request is closer to 1 than this one).
 *
 * Exception sets (each a fresh RuleSet with the same rules):
 * - none;
 * - 1,000 elsewhere: one exception in each of 1,000 other namespaces, each
 *   naming all 19 rules (a request in `shop` never looks at them);
 * - 1,000 with 10 in `shop`: 990 elsewhere, plus 10 in `shop` naming all 19
 *   rules but other Pods (each request judges the 10 once, finds none
 *   covers the Pod: reported, not the goal);
 * - 1000 with 10 privileged: 990 elsewhere, plus 10 in the privileged
 *   namespace (`portal-system`) naming all 19 rules for other namespaces
 *   (`match.namespaces`): every request consults them;
 * - exempted: the 1,000 elsewhere plus one in `shop` that covers the Pod for
 *   every rule (the rules are then skipped, not run: cheaper).
 *
 * Rounds alternate the sets (order rotated each round) and each takes the
 * best of 10 batches of process CPU time per call (time waiting for a busy
 * CPU is not counted); the figure is the median over rounds.
 *
 * Run: node --import tsx bench/exceptions.ts [--rounds 7]
 */
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { loadRulesFromDirectory } from '../src/sources/rule-files.ts';
import { decideAdmission, RuleSet, type PortalExceptionObject } from '../src/policy/index.ts';
import { cpuMicrosPerCall } from './cpu-time.ts';
import { podInput, realisticPod } from './realistic-pod.ts';

const roundsArg = process.argv.indexOf('--rounds');
const ROUNDS = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : 7;
const root = fileURLToPath(new URL('..', import.meta.url));

function exception(namespace: string, name: string, rules: string[], names: string[]): PortalExceptionObject {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalException',
    metadata: { name, namespace, generation: 1, uid: `${namespace}-${name}`, creationTimestamp: '2026-01-01T00:00:00Z' },
    spec: { rules, match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names }, expiresAt: '2099-01-01T00:00:00Z', reason: 'benchmark' },
  };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

async function main(): Promise<void> {
  const loaded = await loadRulesFromDirectory(`${root}policies/pod-security`);
  if (loaded.errors.length > 0) throw new Error(loaded.errors.map((e) => `${e.source}: ${e.message}`).join('\n'));
  const ruleNames = loaded.rules.map((r) => r.metadata.name);
  const pod = realisticPod();
  const input = podInput(pod);
  const build = (exceptions: PortalExceptionObject[]): RuleSet => {
    const rs = new RuleSet({ exceptionNamespaces: ['portal-system'] });
    for (const r of loaded.rules) rs.upsert(r);
    for (const e of exceptions) {
      const s = rs.upsertException(e);
      if (!s.valid) throw new Error(s.message);
    }
    return rs;
  };
  const elsewhere = (n: number) => Array.from({ length: n }, (_, i) => exception(`team-${i}`, 'agent', ruleNames, ['node-agent-*']));
  const sets: Record<string, RuleSet> = {
    none: build([]),
    '1000 elsewhere': build(elsewhere(1000)),
    '1000 with 10 in shop': build([...elsewhere(990), ...Array.from({ length: 10 }, (_, i) => exception('shop', `other-${i}`, ruleNames, [`other-${i}-*`]))]),
    '1000 with 10 privileged': build([
      ...elsewhere(990),
      ...Array.from({ length: 10 }, (_, i) => {
        const e = exception('portal-system', `platform-${i}`, ruleNames, ['node-agent-*']);
        e.spec.match.namespaces = [`team-${i}`];
        return e;
      }),
    ]),
    exempted: build([...elsewhere(1000), exception('shop', 'checkout', ruleNames, ['checkout-*'])]),
  };
  const decisions = Object.fromEntries(Object.entries(sets).map(([k, rs]) => [k, decideAdmission(rs, input)]));
  // Every rule of the library matches a Pod: each is exempted.
  if (decisions['exempted']?.exempted?.length !== ruleNames.length) {
    throw new Error(`the exempted set exempts ${decisions['exempted']?.exempted?.length ?? 0} rules, expected ${ruleNames.length}`);
  }
  const names = Object.keys(sets);
  const samples: Record<string, number[]> = Object.fromEntries(names.map((k) => [k, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = names.map((_, i) => names[(i + round) % names.length] as string);
    for (const k of order) samples[k]!.push(cpuMicrosPerCall(() => decideAdmission(sets[k]!, input), { batch: 2000, warmupBatches: 2 }));
  }
  const us = Object.fromEntries(names.map((k) => [k, Number(median(samples[k]!).toFixed(3))]));
  const none = us['none'] as number;
  const result = {
    benchmark: 'exceptions',
    machine: { cpus: cpus().length, node: process.version, loadavg1m: Math.round((loadavg()[0] ?? NaN) * 100) / 100 },
    rules: ruleNames.length,
    rounds: ROUNDS,
    cpuMicrosecondsPerDecision: us,
    ratioToNone: Object.fromEntries(names.map((k) => [k, Number(((us[k] as number) / none).toFixed(3))])),
    goal: '1000 elsewhere ≤ 1.1 × none',
    met: (us['1000 elsewhere'] as number) / none <= 1.1,
    decisions: Object.fromEntries(Object.entries(decisions).map(([k, d]) => [k, { allowed: d.allowed, exempted: d.exempted?.length ?? 0 }])),
  };
  console.log(JSON.stringify(result, null, 2));
}

await main();
