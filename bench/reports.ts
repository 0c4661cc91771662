/**
 * Report footprint benchmark (issue 20). Prints one JSON object per run.
 *
 * The embedded API server runs in a CHILD process, seeded with the Pod
 * Security rules (policies/pod-security) and `--pods` realistic Pods (the
 * ~3 KB Deployment replica of bench/realistic-pod.ts) spread over
 * `--namespaces` namespaces (round robin), every 50th Pod of each namespace
 * violating (privileged, host network: 2%, in every namespace). This process
 * is one replica: the real audit (informers, its one-thread evaluation pool
 * as in cluster mode, actuator, report flusher and writer), so its RSS is the
 * replica's (less the admission pool). It evaluates everything as a
 * follower first (a warm standby), then takes the Lease (a term is granted),
 * and measures:
 * - report objects and their total bytes as stored (the sum of the
 *   serialized objects the API server returns);
 * - report writes of the first full pass (from the takeover until every
 *   report is written);
 * - wall time from the takeover to all reports written, at the write budget
 *   given (`--qps`, default `--report-qps`'s 10); with another budget it
 *   also projects the time at the default one;
 * - steady state: one changed Pod → how many report writes within the flush
 *   interval, and how long after the change;
 * - replica RSS with everything cached, after a GC.
 *
 * Run one:  node --expose-gc --import tsx bench/reports.ts --pods 10000 --granularity namespace
 * Run all:  node --import tsx bench/reports.ts --matrix [--pods 10000,50000]
 *           (each run in its own process: 10k and 50k Pods × namespace and resource)
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { buildAudit } from '../src/audit/audit.ts';
import { DEFAULTS } from '../src/config/options.ts';
import { EvaluationPool } from '../src/evaluation/pool.ts';
import { DevApiClient } from '../packages/devcluster/src/dev/api-client.ts';
import { readChartCrds, readManifests } from '../packages/devcluster/src/dev/manifests.ts';
import { createKubeClient } from '../src/kube/client.ts';
import { ClusterRuleSource } from '../src/sources/cluster-rule-source.ts';
import { FencedWriter } from '../src/kube/fenced-writer.ts';
import { Term } from '../src/leader/term.ts';
import { createLogger, silentLogger, type LogLevel } from '../src/observability/logger.ts';
import { pino } from 'pino';
import { REPORT_API_INFO, type ReportApi, type ReportGranularity } from '../src/policy/report-api.ts';
import type { KubeObject } from '../src/policy/types.ts';
import { realisticPod } from './realistic-pod.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const argv = process.argv.slice(2);
const arg = (name: string): string | undefined => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
};
const N = Number(arg('pods') ?? 10_000);
const NAMESPACES = Number(arg('namespaces') ?? 100);
const GRANULARITY = (arg('granularity') ?? 'namespace') as ReportGranularity;
const API = (arg('api') ?? DEFAULTS.reportApi) as ReportApi;
const QPS = Number(arg('qps') ?? DEFAULTS.reportQps);
const FLUSH_MS = Number(arg('flush-ms') ?? DEFAULTS.reportFlush);
/** Every 50th Pod violates: 2%. */
const VIOLATING_EVERY = 50;

const nsName = (n: number): string => `team-${String(n).padStart(3, '0')}`;

function makePod(i: number): KubeObject {
  const pod = realisticPod() as KubeObject & { metadata: Record<string, unknown>; spec: Record<string, unknown> & { containers: Array<Record<string, unknown>> } };
  delete pod.metadata['uid'];
  delete pod.metadata['ownerReferences'];
  pod.metadata['name'] = `checkout-${i}`;
  pod.metadata['namespace'] = nsName(i % NAMESPACES);
  // The k-th Pod of its namespace: every namespace gets its 2%.
  if (Math.floor(i / NAMESPACES) % VIOLATING_EVERY === 0) {
    pod.spec['hostNetwork'] = true;
    pod.spec.containers[0] = { ...pod.spec.containers[0], securityContext: { privileged: true } };
  }
  return pod;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Child mode: the embedded API server, seeded, answering until stdin closes. */
async function apiChild(): Promise<void> {
  const { startApiServer } = await import('../packages/devcluster/src/apiserver/index.ts');
  const api = await startApiServer({ port: 0, historyLimit: Math.max(10_000, N + 10_000) });
  const admin = new DevApiClient(api.url, api.adminToken);
  const crds = await readChartCrds(`${root}charts/portal`);
  if (crds.problems.length > 0) throw new Error(`the chart's CRDs: ${crds.problems.join('; ')}`);
  for (const crd of crds.objects) await admin.apply(crd);
  for (const ns of ['portal-system', ...Array.from({ length: NAMESPACES }, (_, n) => nsName(n))]) await admin.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  for (const rule of (await readManifests(`${root}policies/pod-security`)).objects) await admin.apply(rule);
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < N) {
        const pod = makePod(next++);
        const res = await admin.request('POST', `/api/v1/namespaces/${pod.metadata?.namespace}/pods`, pod);
        if (res.status !== 201) throw new Error(`pod create: ${res.status}`);
      }
    }),
  );
  console.log(JSON.stringify({ url: api.url, token: api.adminToken, kubeconfig: api.kubeConfig('portal-bench') }));
  process.stdin.on('end', () => void api.close().then(() => process.exit(0)));
  process.stdin.resume();
}

async function apiServerChild(): Promise<{ kubeconfig: string; admin: DevApiClient; seedMs: number; stop: () => Promise<void> }> {
  const t0 = performance.now();
  const child = spawn(process.execPath, ['--max-old-space-size=8192', '--import', 'tsx', fileURLToPath(import.meta.url), '--api-child', '--pods', String(N), '--namespaces', String(NAMESPACES)], {
    cwd: root,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  const info = JSON.parse(line) as { kubeconfig: string; url: string; token: string };
  return {
    kubeconfig: info.kubeconfig,
    admin: new DevApiClient(info.url, info.token),
    seedMs: performance.now() - t0,
    stop: async () => {
      child.stdin!.end();
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}

/** Every report of the API (all namespaces and the cluster ones), paged: count and bytes as the API server returns them. */
async function storedReports(admin: DevApiClient): Promise<{ objects: number; bytes: number; results: number; largestBytes: number }> {
  const info = REPORT_API_INFO[API];
  let objects = 0;
  let bytes = 0;
  let results = 0;
  let largestBytes = 0;
  for (const plural of [info.namespaced.plural, info.cluster.plural]) {
    let cont: string | undefined;
    do {
      const q = new URLSearchParams({ limit: '500', labelSelector: 'app.kubernetes.io/managed-by=portal' });
      if (cont) q.set('continue', cont);
      const res = await admin.request('GET', `/apis/${info.group}/${info.version}/${plural}?${q}`);
      if (res.status !== 200) throw new Error(`list ${plural}: ${res.status}`);
      const body = res.body as { items: Array<{ results?: unknown[] }>; metadata?: { continue?: string } };
      for (const item of body.items) {
        const size = Buffer.byteLength(JSON.stringify(item));
        objects++;
        bytes += size;
        results += item.results?.length ?? 0;
        largestBytes = Math.max(largestBytes, size);
      }
      cont = body.metadata?.continue || undefined;
    } while (cont);
  }
  return { objects, bytes, results, largestBytes };
}

async function run(): Promise<Record<string, unknown>> {
  const server = await apiServerChild();
  try {
    globalThis.gc?.();
    const rssBaseline = process.memoryUsage().rss;
    const client = createKubeClient({ kubeconfigYaml: server.kubeconfig, qps: DEFAULTS.kubeApiQps, burst: DEFAULTS.kubeApiBurst, userAgent: 'portal-bench' });
    // `--log-level info` shows the replica's log on stderr (why a run stalls).
    const level = arg('log-level') as LogLevel | undefined;
    const logger = level ? createLogger({ level, destination: pino.destination(2) }) : silentLogger();
    const source = new ClusterRuleSource({ client, logger });
    const writer = new FencedWriter({ kubeConfig: client.kubeConfig, userAgent: 'portal-bench' });
    const registry = new Registry();
    // As in cluster mode: the audit evaluates in its own one-thread pool (adr/0013), so its RSS is in the figure.
    const pool = new EvaluationPool({ name: 'audit', workers: 1, timeoutMs: DEFAULTS.evaluationTimeout }, { rules: source.ruleSet }, { logger, registry });
    const { evaluator, actuator } = buildAudit(
      {
        installNamespace: 'portal-system',
        exemptNamespaces: DEFAULTS.exemptNamespaces,
        auditIntervalMs: 3_600_000,
        workers: DEFAULTS.auditWorkers,
        maxEvictionsPerMinute: 0,
        alertmanagerUrls: [],
        alertResendIntervalMs: 3_600_000,
        reports: { api: API, granularity: GRANULARITY, flushMs: FLUSH_MS, qps: QPS, maxResults: DEFAULTS.reportMaxResults, statusFilter: DEFAULTS.reportStatusFilter },
      },
      { client, writer, ruleSet: source.ruleSet, evaluate: (input) => pool.audit(input), namespaceLabels: (ns) => source.namespaceLabels(ns), logger, registry },
    );
    const ac = new AbortController();
    const t0 = performance.now();
    const sourceDone = source.start(ac.signal);
    const poolDone = pool.start(ac.signal);
    await source.rules.waitForSync(ac.signal);
    const done = evaluator.start(ac.signal);
    // A complete pass: the first one may start before the Pods are listed (kind informers are not awaited).
    while (!(evaluator.completePasses > 0 && evaluator.idle())) await sleep(50);
    const followerPassMs = performance.now() - t0;
    globalThis.gc?.();
    const rssFollower = process.memoryUsage().rss;

    // Takeover: a term is granted, as the Manager does when the Lease is won.
    const expected = GRANULARITY === 'namespace' ? NAMESPACES : N;
    const w = evaluator.reports.writes;
    const writes = () => w.created + w.updated + w.deleted;
    const term = new Term({ leaseUid: 'bench', transitions: 1 }, performance.now(), 24 * 3_600_000);
    const g0 = performance.now();
    const acting = actuator.start(ac.signal, term);
    let reconciledMs = 0;
    let lastLog = 0;
    for (;;) {
      if (!reconciledMs && actuator.reportsReconciled) reconciledMs = performance.now() - g0;
      if (actuator.reportsReconciled && actuator.flusher.backlog === 0 && evaluator.reports.size >= expected && evaluator.idle()) break;
      if (performance.now() - lastLog > 30_000) {
        lastLog = performance.now();
        console.error(`[bench reports] ${Math.round((lastLog - g0) / 1000)} s: ${evaluator.reports.size}/${expected} reports, backlog ${actuator.flusher.backlog}`);
      }
      await sleep(20);
    }
    const allWrittenMs = performance.now() - g0;
    const firstPassWrites = writes();

    // Steady state: one changed Pod (a new violating one in the first namespace).
    await sleep(200);
    const before = writes();
    const changed = makePod(0);
    (changed.metadata as Record<string, unknown>)['name'] = 'changed-pod';
    const c0 = performance.now();
    const created = await server.admin.request('POST', `/api/v1/namespaces/${nsName(0)}/pods`, changed);
    if (created.status !== 201) throw new Error(`changed pod: ${created.status}`);
    while (writes() === before && performance.now() - c0 < 2 * FLUSH_MS + 30_000) await sleep(10);
    const firstWriteMs = performance.now() - c0;
    // Anything else it causes would come within the flush interval after that write.
    await sleep(FLUSH_MS + 1000);
    const changeWrites = writes() - before;

    globalThis.gc?.();
    const rssLeader = process.memoryUsage().rss;
    const stored = await storedReports(server.admin);
    term.end('bench over');
    ac.abort();
    await Promise.allSettled([acting, done, sourceDone, poolDone]);
    await writer.close();
    const defaultQps = DEFAULTS.reportQps;
    return {
      pods: N,
      namespaces: NAMESPACES,
      violatingPods: Array.from({ length: N }, (_, i) => i).filter((i) => Math.floor(i / NAMESPACES) % VIOLATING_EVERY === 0).length,
      rules: source.ruleSet.size,
      api: API,
      granularity: GRANULARITY,
      reportQps: QPS,
      flushMs: FLUSH_MS,
      seedSeconds: Math.round(server.seedMs / 1000),
      followerListAndFirstPassSeconds: Number((followerPassMs / 1000).toFixed(1)),
      reports: { objects: stored.objects, storedMB: Number((stored.bytes / 2 ** 20).toFixed(2)), avgBytes: Math.round(stored.bytes / Math.max(1, stored.objects)), largestBytes: stored.largestBytes, listedResults: stored.results },
      firstPass: {
        writes: firstPassWrites,
        takeoverToReconciledSeconds: Number((reconciledMs / 1000).toFixed(1)),
        takeoverToAllWrittenSeconds: Number((allWrittenMs / 1000).toFixed(1)),
        ...(QPS !== defaultQps ? { projectedAtDefaultBudgetSeconds: Math.round(firstPassWrites / defaultQps) } : {}),
      },
      oneChangedPod: { writes: changeWrites, firstWriteAfterMs: Math.round(firstWriteMs) },
      rssMB: { baseline: Math.round(rssBaseline / 2 ** 20), follower: Math.round(rssFollower / 2 ** 20), leader: Math.round(rssLeader / 2 ** 20), gcExposed: typeof globalThis.gc === 'function' },
    };
  } finally {
    await server.stop();
  }
}

async function matrix(): Promise<void> {
  const sizes = (arg('pods') ?? '10000,50000').split(',').map(Number);
  const grans = (arg('granularities') ?? 'namespace,resource').split(',');
  const out: unknown[] = [];
  for (const pods of sizes) {
    for (const g of grans) {
      const extra = argv.filter((a, i) => !['--matrix', '--pods', '--granularities'].includes(a) && !['--pods', '--granularities'].includes(argv[i - 1] ?? ''));
      const child = spawn(process.execPath, ['--expose-gc', '--max-old-space-size=4096', '--import', 'tsx', fileURLToPath(import.meta.url), '--pods', String(pods), '--granularity', g, ...extra], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
      let text = '';
      child.stdout!.on('data', (c: Buffer) => (text += c.toString()));
      const [code] = (await once(child, 'exit')) as [number | null];
      const result = code === 0 ? (JSON.parse(text) as unknown) : { pods, granularity: g, failed: code };
      console.error(JSON.stringify(result));
      out.push(result);
    }
  }
  console.log(JSON.stringify(out, null, 2));
}

if (argv.includes('--api-child')) await apiChild();
else if (argv.includes('--matrix')) await matrix();
else console.log(JSON.stringify(await run(), null, 2));
