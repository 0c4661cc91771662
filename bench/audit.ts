/**
 * Audit benchmark (issue 5, part 5). Prints one JSON object.
 *
 * 1. evaluation: a full pass over N Pods with the PSS library, pure
 *    evaluation on one thread (= one core). Goal ≤ 2 s for 10,000.
 * 2. replica: the real AuditController (follower) against the embedded API
 *    server running in a CHILD process (so this process's RSS is the
 *    replica's): time to list + evaluate everything, RSS with the objects
 *    cached. Goal ≤ 300 MB.
 * 3. takeover: the term is granted; time from then to the first side effect
 *    (goal: within one retry period, 2 s by default) and the report write
 *    rate at the default --kube-api-qps/--kube-api-burst (20/40), measured
 *    over the first `--sample` reports and projected to all N.
 *
 * Run: node --expose-gc --import tsx bench/audit.ts [--pods 10000] [--sample 200]
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { buildAudit } from '../src/audit/audit.ts';
import { ClusterRuleSource } from '../src/sources/cluster-rule-source.ts';
import { loadRulesFromDirectory } from '../src/sources/rule-files.ts';
import { DEFAULTS } from '../src/config/options.ts';
import { DevApiClient } from '../packages/devcluster/src/dev/api-client.ts';
import { readChartCrds, readManifests } from '../packages/devcluster/src/dev/manifests.ts';
import { FencedWriter } from '../src/kube/fenced-writer.ts';
import { createKubeClient } from '../src/kube/client.ts';
import { Term } from '../src/leader/term.ts';
import { silentLogger } from '../src/observability/logger.ts';
import { evaluate, RuleSet, type KubeObject } from '../src/policy/index.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const N = arg('pods', 10_000);
const SAMPLE = arg('sample', 200);
const NS = 'bench';

function makePod(i: number): KubeObject {
  // Every 4th pod violates something (privileged, hostNetwork, no runAsNonRoot...), the rest are restricted-compliant.
  const bad = i % 4 === 0;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `pod-${i}`, namespace: NS, labels: { app: `app-${i % 50}` } },
    spec: {
      hostNetwork: bad,
      securityContext: { runAsNonRoot: !bad, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'app',
          image: `registry.example/app:${i % 7}`,
          securityContext: { privileged: bad, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, runAsNonRoot: true },
          resources: { limits: { cpu: '100m', memory: '64Mi' } },
        },
      ],
    },
  };
}

async function evaluationBench(): Promise<{ rules: number; pods: number; ms: number; perPodUs: number; violating: number }> {
  const loaded = await loadRulesFromDirectory(`${root}policies/pod-security`);
  const rules = new RuleSet();
  for (const r of loaded.rules) rules.upsert(r);
  const pods = Array.from({ length: N }, (_, i) => makePod(i));
  const input = (o: KubeObject) => ({ operation: 'AUDIT' as const, kind: { group: '', version: 'v1', kind: 'Pod' }, namespace: NS, name: o.metadata?.name ?? '', object: o, oldObject: null, namespaceLabels: {} });
  for (const p of pods.slice(0, 500)) evaluate(rules, input(p)); // warm-up (JIT)
  const t0 = performance.now();
  let violating = 0;
  for (const p of pods) if (evaluate(rules, input(p)).some((v) => v.result === 'fail' || v.result === 'warn')) violating++;
  const ms = performance.now() - t0;
  return { rules: rules.size, pods: N, ms: Math.round(ms), perPodUs: Math.round((ms * 1000) / N), violating };
}

/**
 * Child mode (`--api-child`): the embedded API server with the CRDs, the PSS
 * rules and N pods, all set up here so the parent's RSS is the replica's alone.
 */
async function apiChild(): Promise<void> {
  const { startApiServer } = await import('../packages/devcluster/src/apiserver/index.ts');
  const api = await startApiServer({ port: 0, historyLimit: 50_000 });
  const admin = new DevApiClient(api.url, api.adminToken);
  const crds = await readChartCrds(`${root}charts/portal`);
  if (crds.problems.length > 0) throw new Error(`the chart's CRDs: ${crds.problems.join('; ')}`);
  for (const crd of crds.objects) await admin.apply(crd);
  for (const ns of [NS, 'portal-system']) await admin.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  for (const rule of (await readManifests(`${root}policies/pod-security`)).objects) await admin.apply(rule);
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < N) {
        const i = next++;
        const res = await admin.request('POST', `/api/v1/namespaces/${NS}/pods`, makePod(i));
        if (res.status !== 201) throw new Error(`pod create: ${res.status}`);
      }
    }),
  );
  console.log(JSON.stringify({ url: api.url, token: api.adminToken, kubeconfig: api.kubeConfig('portal-bench') }));
  process.stdin.on('end', () => void api.close().then(() => process.exit(0)));
  process.stdin.resume();
}

/** Starts the child and resolves once its cluster is seeded. */
async function apiServerChild(): Promise<{ kubeconfig: string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--api-child', '--pods', String(N)], { cwd: root, stdio: ['pipe', 'pipe', 'inherit'] });
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  const info = JSON.parse(line) as { kubeconfig: string };
  return {
    kubeconfig: info.kubeconfig,
    stop: async () => {
      child.stdin!.end();
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}

async function replicaBench() {
  const server = await apiServerChild();
  try {
    globalThis.gc?.();
    const rssBefore = process.memoryUsage().rss;

    const client = createKubeClient({ kubeconfigYaml: server.kubeconfig, qps: DEFAULTS.kubeApiQps, burst: DEFAULTS.kubeApiBurst, userAgent: 'portal-bench' });
    const logger = silentLogger();
    const source = new ClusterRuleSource({ client, logger });
    const { evaluator: controller, actuator } = buildAudit(
      {
        installNamespace: 'portal-system',
        exemptNamespaces: DEFAULTS.exemptNamespaces,
        auditIntervalMs: 3_600_000,
        workers: DEFAULTS.auditWorkers,
        maxEvictionsPerMinute: 0,
        alertmanagerUrls: [],
        alertResendIntervalMs: 3_600_000,
        reports: { api: DEFAULTS.reportApi, granularity: 'resource', flushMs: DEFAULTS.reportFlush, qps: DEFAULTS.kubeApiQps, maxResults: DEFAULTS.reportMaxResults, statusFilter: DEFAULTS.reportStatusFilter },
      },
      { client, writer: new FencedWriter({ kubeConfig: client.kubeConfig, userAgent: 'portal-bench' }), ruleSet: source.ruleSet, namespaceLabels: (ns) => source.namespaceLabels(ns), logger, registry: new Registry() },
    );
    const ac = new AbortController();
    const t0 = performance.now();
    const sourceDone = source.start(ac.signal);
    await source.rules.waitForSync(ac.signal);
    const done = controller.start(ac.signal);
    while (!(controller.passes > 0 && controller.idle())) await new Promise((r) => setTimeout(r, 20));
    const firstPassMs = performance.now() - t0;
    globalThis.gc?.();
    const rssCached = process.memoryUsage().rss;

    const granted = Date.now();
    const g0 = performance.now();
    const term = new Term({ leaseUid: 'bench', transitions: 1 }, performance.now(), 3_600_000);
    // What the Manager does when the Lease is won: start the leader-only actuator with the term.
    const acting = actuator.start(ac.signal, term);
    while (controller.reports.writes.created < SAMPLE) await new Promise((r) => setTimeout(r, 10));
    const sampleMs = performance.now() - g0;
    const firstSideEffectMs = (actuator.firstSideEffectAt ?? NaN) - granted;
    term.end('bench over');
    ac.abort();
    await Promise.allSettled([acting, done, sourceDone]);
    // The first `burst` writes go out at once; the steady rate is what is left over the sample.
    const burst = DEFAULTS.kubeApiBurst;
    const writesPerSecond = (Math.max(1, SAMPLE - burst) / sampleMs) * 1000;
    return {
      listAndFirstPassMs: Math.round(firstPassMs),
      rssMB: {
        processBaseline: Math.round(rssBefore / 2 ** 20),
        withObjectsCached: Math.round(rssCached / 2 ** 20),
        heapUsed: Math.round(process.memoryUsage().heapUsed / 2 ** 20),
        gcExposed: typeof globalThis.gc === 'function',
      },
      takeover: { firstSideEffectMs, goalMs: DEFAULTS.retryPeriod },
      reports: {
        qps: DEFAULTS.kubeApiQps,
        burst: DEFAULTS.kubeApiBurst,
        sample: SAMPLE,
        sampleMs: Math.round(sampleMs),
        writesPerSecond: Number(writesPerSecond.toFixed(1)),
        projectedAllReportsSeconds: Math.round(Math.max(0, N - burst) / writesPerSecond),
      },
    };
  } finally {
    await server.stop();
  }
}

if (process.argv.includes('--api-child')) {
  await apiChild();
} else {
  // The replica first: its RSS must not include the evaluation bench's garbage.
  const replica = await replicaBench();
  const evaluation = await evaluationBench();
  console.log(JSON.stringify({ pods: N, evaluation: { ...evaluation, goalMs: 2000 }, replica, rssGoalMB: 300 }, null, 2));
}
