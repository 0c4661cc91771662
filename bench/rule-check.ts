/**
 * Issue 31 item 5, the apply-time check: the main thread's event-loop delay
 * while `/validate-portal-kinds` answers N reviews of 62 KB PortalRules
 * (bench/rule-churn-dev.ts's rule, `--concurrency` at a time), with the
 * check on the main thread (before: portalKinds' in-process validateRule)
 * and on the rule-check thread (now: src/evaluation/rule-check.ts), in the
 * same process and run, alternating (`--rounds`), each after a warm-up.
 *
 * Reported per phase: the event-loop delay (perf_hooks
 * monitorEventLoopDelay, 1 ms resolution) p50 / p99 / max, the longest gap
 * of a 1 ms interval and the time in gaps over 50 ms (what any timer or
 * request on the main thread waited), the wall time for the N answers and
 * how many were accepted; then the ratios.
 *
 * Run (Node 24, as npm scripts do): PATH=node_modules/.bin:$PATH node --import tsx bench/rule-check.ts [--rules 30] [--concurrency 2] [--rounds 2]
 */
import { parseArgs } from 'node:util';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import pino from 'pino';
import { RuleChecks } from '../src/evaluation/rule-check.ts';
import { builtinSchemas } from '../src/policy/kind-schemas/catalogue.ts';
import { portalKinds } from '../src/policy/portal-kinds.ts';
import { allowAll, makePki, makeServer, type TestServer } from '../test/admission/helpers.ts';
import { bigRule } from '../test/support/big-rule.ts';

const { values } = parseArgs({ options: { rules: { type: 'string', default: '30' }, concurrency: { type: 'string', default: '2' }, rounds: { type: 'string', default: '2' } } });
const RULES = Number(values.rules);
const CONCURRENCY = Number(values.concurrency);
const ROUNDS = Number(values.rounds);

function review(name: string): string {
  const object = bigRule(name, 'tenant-a', name);
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid: `uid-${name}`, kind: { group: 'portal.dev', version: 'v1alpha1', kind: 'PortalRule' }, name, namespace: 'tenant-a', operation: 'CREATE', userInfo: { username: 'alice' }, object, oldObject: null },
  });
}

interface Phase {
  p50: number;
  p99: number;
  max: number;
  /** From the gap probe: the longest the loop did not turn, and the time in gaps over 50 ms. */
  stallMs: number;
  heldMs: number;
  wallS: number;
  accepted: number;
}

/**
 * A 1 ms interval's gaps: what a timer on the main thread waited. Beside the
 * histogram, which in short phases sampled a single check's whole block as
 * one small delay (3 samples in 1.4 s of checks).
 */
function gapProbe(): () => { stallMs: number; heldMs: number } {
  let last = performance.now();
  let stallMs = 0;
  let heldMs = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    const gap = now - last;
    last = now;
    stallMs = Math.max(stallMs, gap);
    if (gap > 50) heldMs += gap;
  }, 1);
  return () => {
    clearInterval(timer);
    return { stallMs, heldMs };
  };
}

/** N reviews, CONCURRENCY at a time; the event loop's delay meanwhile. Each review is built before the phase (a tenant's bytes, not our work). */
async function phase(server: TestServer, salt: string, n: number): Promise<Phase> {
  const bodies = Array.from({ length: n }, (_, i) => review(`${salt}-${i}`));
  const eld = monitorEventLoopDelay({ resolution: 1 });
  const probe = gapProbe();
  let next = 0;
  let accepted = 0;
  const t0 = performance.now();
  eld.enable();
  const loop = async (): Promise<void> => {
    for (let i = next++; i < n; i = next++) {
      const res = await server.app.inject({ method: 'POST', url: '/validate-portal-kinds', headers: { 'content-type': 'application/json' }, payload: bodies[i]! });
      if ((res.json() as { response: { allowed: boolean } }).response.allowed) accepted++;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  // One more turn of the loop, so that the histogram's timer samples the last stretch the checks held it.
  await new Promise((resolve) => setTimeout(resolve, 5));
  eld.disable();
  const gaps = probe();
  const ms = (ns: number): number => ns / 1e6;
  return { p50: ms(eld.percentile(50)), p99: ms(eld.percentile(99)), max: ms(eld.max), ...gaps, wallS: (performance.now() - t0) / 1000, accepted };
}

const line = (what: string, p: Phase): string =>
  `${what}: event-loop delay p50 ${p.p50.toFixed(1)} ms, p99 ${p.p99.toFixed(1)} ms, max ${p.max.toFixed(1)} ms; longest gap of a 1 ms timer ${p.stallMs.toFixed(0)} ms, ${(p.heldMs / 1000).toFixed(1)} s in gaps over 50 ms; ${RULES} checks in ${p.wallS.toFixed(1)} s, ${p.accepted} accepted`;

// The pools' threads and timers do not hold the process open (a replica's servers do): this does, until the end.
const keepAlive = setInterval(() => undefined, 1000);
const pki = await makePki();
const logger = pino({ level: 'silent' });
const checks = new RuleChecks({ webhookTimeoutMs: 30_000 }, { logger, schemas: builtinSchemas() });
const before = makeServer(pki, allowAll(), { portalKinds: portalKinds({}, builtinSchemas()) });
const after = makeServer(pki, allowAll(), { portalKinds: portalKinds({}, builtinSchemas(), checks.check) });
try {
  // Warm-up: JIT, ajv's and cel's first compiles, the thread's start.
  await phase(before, 'warm-b', 3);
  await phase(after, 'warm-a', 3);
  console.log(`${RULES} reviews of ${review('x').length} bytes, ${CONCURRENCY} at a time, ${ROUNDS} round(s)`);
  for (let r = 0; r < ROUNDS; r++) {
    const b = await phase(before, `b${r}`, RULES);
    const a = await phase(after, `a${r}`, RULES);
    console.log(line(`round ${r + 1}, check on the main thread (before)`, b));
    console.log(line(`round ${r + 1}, check on the rule-check thread (now)`, a));
    console.log(`round ${r + 1}, ratio before/now: event-loop delay p99 ${(b.p99 / a.p99).toFixed(1)}, longest gap ${(b.stallMs / a.stallMs).toFixed(1)}`);
  }
} finally {
  await Promise.all([before.app.close(), after.app.close(), checks.close()]);
  clearInterval(keepAlive);
}
