/**
 * Admission benchmark (issue 2, part 6): one `portal serve` replica with the
 * shipped rules vs. the ceiling (a bare Node HTTPS server that only parses
 * the review and echoes an allow), same machine, same run, same ~3.6 KB Pod
 * review, keep-alive, 32 connections.
 *
 * Goals: portal req/s >= 0.8 × ceiling req/s (closed loop); p99 at a fixed
 * 1,000 req/s within 2 ms of the ceiling's p99 (open loop); zero errors.
 *
 * Trustworthy on a shared, loaded machine: ceiling and portal run in short
 * interleaved rounds (the order alternates every round), each round reports
 * its own ratio, and the summary is the median of the rounds, so a burst of
 * load from elsewhere hits one round of one side instead of a whole side.
 * Besides req/s it reports each server's CPU time per request (from
 * /proc/PID/stat), which the neighbours' load barely moves, and the load
 * generator's own CPU use, so a saturated generator is visible instead of
 * silently capping both sides.
 *
 * Three sides in every round (issue 9 item 7): the ceiling, `portal serve
 * --policies` (files mode) and a replica in cluster mode as deployed
 * (`portal serve --kubeconfig` against the embedded API server with the
 * shipped rules: informers, audit and leader election running), each with
 * its ratio to the ceiling of the same round. The cluster-mode replica runs
 * with the NODE_OPTIONS the chart's Deployment sets at its default memory
 * limit (V8's heap caps, read from `helm template`), as deployed; the
 * standalone one as `portal serve` runs from the image alone.
 *
 * For each replica it also reads `/debug/vars` `runtime` before and after
 * every run (issue 21 item 5): the main thread's GC pause time, pauses over
 * 10 ms and event-loop busy time over the open rounds (`openMainThread`),
 * which is where a p99 at a fixed rate comes from.
 *
 * Run: node --import tsx bench/admission.ts [--rounds 10] [--seconds 2]
 *        [--open-rounds 5] [--rate 1000] [--connections 32] [--cpu-prof DIR]
 *        [--no-cluster] [--from-source] [--rules schema|cel]
 *        [--workers N] [--cpus LIST] [--generator-cpus LIST] [--hop]
 *
 * --workers N (issue 16 item 1): the replicas' `--evaluation-workers`
 * (default 1: the pool's cost per request on top of the same work). --cpus
 * LIST pins the servers (ceiling and replicas, each process with all its
 * threads) to those CPUs with taskset, e.g. `--cpus 0` for the one-core
 * comparison; the load generator (this process, and the cluster side's
 * API server, which it starts) then runs on the other CPUs
 * (--generator-cpus overrides).
 *
 * --hop adds a side: the ceiling with its parse on a worker thread
 * (ceiling-hop-server.ts), what a thread hand-off alone costs here.
 *
 * --baseline REF adds a side: `portal serve --policies` as of git REF (e.g.
 * main), compiled the same way (compiled.ts, compileRef), run like the
 * standalone replica; the report's `overBaseline` is the median, over the
 * closed rounds, of this code's CPU per request minus the baseline's (what
 * a change costs per review, e.g. fair queuing: docs/benchmarks.md).
 *
 * --rules cel (issue 12 item 6): the standalone replica loads the Pod
 * Security controls written as CEL rules (bench/cel-pss-rules.ts) instead of
 * the shipped JSON Schema library; the cluster side is left out (it reads
 * policies/ from its own process).
 * Prints one JSON object on stdout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { stringify } from 'yaml';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { writeSelfSigned } from '../src/admission/certs.ts';
import { celPssRules } from './cel-pss-rules.ts';
import { podInput, realisticPod } from './realistic-pod.ts';
import { closedLoop, openLoop, type LoadResult, type Target } from './load.ts';
import { compilePortal, compileRef, type CompiledPortal } from './compiled.ts';
import { chartNodeOptions } from './chart-env.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? (process.argv[i + 1] ?? fallback) : fallback;
}
// Many short rounds rather than a few long ones: on a shared machine a
// neighbour's burst then spoils one or two rounds (which the median drops)
// instead of a whole side. 10 × 2 s per side keeps the run near a minute.
const ROUNDS = Number(flag('rounds', '10'));
const OPEN_ROUNDS = Number(flag('open-rounds', '5'));
const SECONDS = Number(flag('seconds', '2'));
const CONNECTIONS = Number(flag('connections', '32'));
const RATE = Number(flag('rate', '1000'));
const CPU_PROF_DIR = flag('cpu-prof', '');
// The replica as deployed (cluster mode inside `portal dev`) runs beside the
// standalone one unless --no-cluster.
const CLUSTER = !process.argv.includes('--no-cluster');
// Portal through tsx from src/ instead of compiled (for profiles with TS names; slower).
const FROM_SOURCE = process.argv.includes('--from-source');
const RULES = flag('rules', 'schema');
if (RULES !== 'schema' && RULES !== 'cel') throw new Error(`--rules: "${RULES}" is not schema or cel`);
const WITH_CLUSTER = CLUSTER && RULES === 'schema';
const WORKERS = flag('workers', '1');
const CPUS = flag('cpus', '');
// The load generator (this process) runs on the CPUs the servers do not
// (--generator-cpus, by default every CPU not in --cpus): sharing the
// servers' core it inflates whichever side has more threads busy (measured:
// 15 µs more work per request on a worker thread cost the replica 21–36 µs
// of CPU with an unpinned generator, 15–24 µs with it pinned away;
// docs/benchmarks.md, session 10).
const GENERATOR_CPUS = flag('generator-cpus', CPUS ? otherCpus(CPUS) : '');
// A fourth side: the ceiling with its parse on a worker thread (ceiling-hop-server.ts), the floor of any pool design.
const WITH_HOP = process.argv.includes('--hop');
// A side running Portal as of another git ref (compiled.ts, compileRef).
const BASELINE = flag('baseline', '');

/** The CPUs of this machine not in LIST (`0,2-3` form), or '' when none is left. */
function otherCpus(list: string): string {
  const taken = new Set<number>();
  for (const part of list.split(',')) {
    const [a, b] = part.split('-').map(Number);
    for (let c = a!; c <= (b ?? a!); c++) taken.add(c);
  }
  return cpus().map((_, i) => i).filter((i) => !taken.has(i)).join(',');
}

/** Pins this process, every thread of it, to LIST (taskset -a -p). */
function pinSelf(list: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('taskset', ['-a', '-p', '-c', list, String(process.pid)], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`taskset -a -p -c ${list} exited ${code}`))));
  });
}

/** The directory of rules the standalone replica serves. */
async function rulesDir(dir: string): Promise<string> {
  if (RULES === 'schema') return join(root, 'policies');
  const out = join(dir, 'cel-rules');
  await mkdir(out);
  await writeFile(join(out, 'pss-cel.yaml'), celPssRules().map((r) => stringify(r)).join('---\n'));
  return out;
}

/** The review of the engine benchmarks' Pod (realistic-pod.ts: it passes the baseline rules, so every rule is evaluated), ~4 KB. */
function podReview(): Buffer {
  const object = realisticPod();
  const input = podInput(object);
  const review = {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: '705ab4f5-6393-11e8-b7cc-42010a800002',
      kind: input.kind,
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: input.kind,
      requestResource: { group: '', version: 'v1', resource: 'pods' },
      name: input.name,
      namespace: input.namespace,
      operation: input.operation,
      userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller', uid: 'a1b2c3', groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'] },
      object,
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
    },
  };
  return Buffer.from(JSON.stringify(review));
}

const children: ChildProcess[] = [];

function startProcess(args: string[], ready: (line: string) => number | undefined, env: Record<string, string> = {}, pinned = false): Promise<{ child: ChildProcess; port: number }> {
  // taskset execs node in place, so the pid (and /proc/PID/stat's CPU time) is the server's.
  const [cmd, argv] = pinned && CPUS ? ['taskset', ['-c', CPUS, process.execPath, ...args]] : [process.execPath, args];
  const child = spawn(cmd, argv, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  children.push(child);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`did not start: ${args.join(' ')}`)), 120_000); // generous: on a shared machine at load 30 a start took over 30 s
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code}: ${args.join(' ')}`));
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const port = ready(line);
      if (port !== undefined) {
        clearTimeout(timer);
        resolve({ child, port });
      }
    });
  });
}

/** A replica's log-line reader for startProcess: hands over the probes URL when logged; the webhook port once it listens. */
function webhookPortFromLog(onProbes: (url: string) => void): (line: string) => number | undefined {
  return (l) => {
    let rec: { msg?: string; url?: string };
    try {
      rec = JSON.parse(l) as typeof rec;
    } catch {
      return undefined;
    }
    if (rec.msg === 'probes listening') onProbes(rec.url ?? '');
    return rec.msg === 'webhook listening' ? Number(new URL(rec.url ?? '').port) : undefined;
  };
}

/** User + system CPU seconds a process has used so far (Linux /proc; fields 14 and 15, in clock ticks). */
function processCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  // The command name (field 2) may contain spaces; it ends at the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // USER_HZ is 100 on every Linux ABI Node supports.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const round3 = (n: number): number => Math.round(n * 1000) / 1000;
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return round3(s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2);
}

interface Measured extends LoadResult {
  /** CPU time the server process used per answered request, in microseconds. */
  serverCpuUsPerRequest: number;
  /** The load generator's CPU use over the run, in cores (1 = one core busy). */
  generatorCores: number;
  /** A replica's main thread over the run (its /debug/vars `runtime`): what can stall admission at a fixed rate. */
  mainThread?: MainThread;
}

interface MainThread {
  /** GC pause time and pauses longer than 10 ms. */
  gcMs: number;
  longGcPauses: number;
  /** Time the event loop was running something (the rest it waited for I/O). */
  busyMs: number;
}

interface RuntimeVars {
  gc: Record<string, { totalMs: number; long: number }>;
  eventLoop: { activeMs: number };
}

/** A replica's cumulative main-thread figures (src/observability/runtime-stats.ts); read before and after a run. */
async function runtimeVars(probes: string | undefined): Promise<RuntimeVars | undefined> {
  if (!probes) return undefined;
  try {
    return ((await (await fetch(`${probes}/debug/vars`)).json()) as { runtime?: RuntimeVars }).runtime;
  } catch {
    return undefined;
  }
}

function mainThreadDiff(a: RuntimeVars | undefined, b: RuntimeVars | undefined): MainThread | undefined {
  if (!a || !b) return undefined;
  const sum = (v: RuntimeVars, f: (g: { totalMs: number; long: number }) => number): number => Object.values(v.gc).reduce((n, g) => n + f(g), 0);
  return {
    gcMs: round3(sum(b, (g) => g.totalMs) - sum(a, (g) => g.totalMs)),
    longGcPauses: sum(b, (g) => g.long) - sum(a, (g) => g.long),
    busyMs: round3(b.eventLoop.activeMs - a.eventLoop.activeMs),
  };
}

async function measure(t: Target, pid: number, run: (t: Target) => Promise<LoadResult>, probes?: string): Promise<Measured> {
  const vars0 = await runtimeVars(probes);
  const cpu0 = processCpuSeconds(pid);
  const gen0 = process.cpuUsage();
  const r = await run(t);
  const gen = process.cpuUsage(gen0);
  const cpu = processCpuSeconds(pid) - cpu0;
  const mainThread = mainThreadDiff(vars0, await runtimeVars(probes));
  return {
    ...r,
    serverCpuUsPerRequest: Math.round((cpu * 1e6) / Math.max(1, r.requests)),
    generatorCores: round3((gen.user + gen.system) / 1e6 / r.seconds),
    ...(mainThread ? { mainThread } : {}),
  };
}

/**
 * A replica in cluster mode as deployed: `portal serve --kubeconfig` against
 * the embedded API server (bench/cluster-child.ts) with the shipped rules, so
 * its informers, audit and leader election run while it admits. Ready only
 * once the informers have synced (/readyz 200).
 */
async function startCluster(dir: string, portalMain: string, files: { certFile: string; keyFile: string }, profile: (side: string) => string[]): Promise<{ port: number; pid: number; probes: string; nodeOptions: string }> {
  const kubeconfig = join(dir, 'replica.kubeconfig');
  const nodeOptions = await chartNodeOptions();
  await startProcess([...profile('apiserver'), '--import', 'tsx', join(root, 'bench', 'cluster-child.ts'), kubeconfig], (l) => (l === 'ready' ? 0 : undefined));
  let probes = '';
  const replica = await startProcess(
    [
      ...profile('cluster'),
      portalMain, 'serve', '--kubeconfig', kubeconfig, '--tls-cert-file', files.certFile, '--tls-key-file', files.keyFile,
      '--webhook-port', '0', '--probes-port', '0', '--bind-address', '127.0.0.1', '--log-level', 'info',
      '--install-namespace', 'portal-system', '--pod-name', 'portal-0', '--evaluation-workers', WORKERS,
    ],
    webhookPortFromLog((url) => (probes = url)),
    { POD_NAME: 'portal-0', POD_NAMESPACE: 'portal-system', ...nodeOptions },
    true,
  );
  const deadline = Date.now() + 180_000;
  while ((await fetch(`${probes}/readyz`)).status !== 200) {
    if (Date.now() > deadline) throw new Error('the cluster-mode replica did not become ready within 180 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  return { port: replica.port, pid: replica.child.pid!, probes, nodeOptions: nodeOptions.NODE_OPTIONS ?? '' };
}

/** The replica's evaluation pool counters (/debug/vars): tasks sent and evaluations they carried, so the mean batch. */
async function poolStats(probes: string): Promise<{ batches: number; batchedItems: number; meanBatch: number; reclaims: number } | undefined> {
  try {
    const vars = (await (await fetch(`${probes}/debug/vars`)).json()) as { admission?: { evaluation?: { batches?: number; batchedItems?: number; reclaims?: number } } };
    const e = vars.admission?.evaluation;
    if (e?.batches === undefined || e.batchedItems === undefined) return undefined;
    return { batches: e.batches, batchedItems: e.batchedItems, meanBatch: round3(e.batchedItems / Math.max(1, e.batches)), reclaims: e.reclaims ?? 0 };
  } catch {
    return undefined;
  }
}

const builds: CompiledPortal[] = [];

type Name = 'ceiling' | 'hop' | 'portal' | 'baseline' | 'cluster';

/** `portal serve --policies` from `portalMain`, pinned like the ceiling; resolves once ready (its workers hold the rules). */
async function startStandalone(portalMain: string, rules: string, files: { certFile: string; keyFile: string }, profileArgs: string[]): Promise<{ port: number; pid: number; probes: string }> {
  let probes = '';
  const replica = await startProcess(
    [
      ...profileArgs,
      portalMain, 'serve', '--policies', rules, '--tls-cert-file', files.certFile, '--tls-key-file', files.keyFile,
      '--webhook-port', '0', '--probes-port', '0', '--bind-address', '127.0.0.1', '--log-level', 'info', '--evaluation-workers', WORKERS,
    ],
    webhookPortFromLog((url) => (probes = url)),
    {},
    true,
  );
  // Ready once its evaluation workers hold the rules (before that it denies "not ready").
  while ((await fetch(`${probes}/readyz`)).status !== 200) await new Promise((r) => setTimeout(r, 100));
  return { port: replica.port, pid: replica.child.pid!, probes };
}

function sumMainThread(xs: (MainThread | undefined)[]): MainThread {
  const ys = xs.filter((x): x is MainThread => x !== undefined);
  return { gcMs: round3(ys.reduce((n, x) => n + x.gcMs, 0)), longGcPauses: ys.reduce((n, x) => n + x.longGcPauses, 0), busyMs: round3(ys.reduce((n, x) => n + x.busyMs, 0)) };
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'portal-bench-'));
  if (GENERATOR_CPUS) await pinSelf(GENERATOR_CPUS);
  const load: number[][] = [loadavg()];
  try {
    const files = await writeSelfSigned(dir);
    const ca = await readFile(files.caFile);
    const body = podReview();

    // --cpu-prof DIR profiles every server (DIR/ceiling, DIR/portal,
    // DIR/cluster), so a profile of the gap can subtract what the ceiling
    // pays as well.
    const profile = (side: string): string[] => (CPU_PROF_DIR ? ['--cpu-prof', '--cpu-prof-dir', join(CPU_PROF_DIR, side)] : []);
    // Both sides run as deployed: the ceiling as plain Node (it only has
    // type annotations, which Node 24 strips), Portal compiled by tsc like
    // the container image (Dockerfile: npm run build, node dist/...). Through
    // tsx, esbuild's keepNames wraps every function created at run time in a
    // defineProperty call, which costs Portal microseconds per request that
    // production never pays.
    let portalMain = join(root, 'bin', 'portal.js');
    if (!FROM_SOURCE) {
      const build = await compilePortal(dir.slice(-6));
      builds.push(build);
      portalMain = join(build.dir, 'cli', 'main.js');
    }
    const ceiling = await startProcess(
      [...profile('ceiling'), '--disable-warning=ExperimentalWarning', join(root, 'bench', 'ceiling-server.ts'), files.certFile, files.keyFile],
      (l) => (l.startsWith('listening ') ? Number(l.slice(10)) : undefined),
      {},
      true,
    );
    const rules = await rulesDir(dir);
    const portal = await startStandalone(portalMain, rules, files, profile('portal'));
    const portalProbes = portal.probes;
    const uid = '"uid":"705ab4f5-6393-11e8-b7cc-42010a800002"';
    const check = (b: string): boolean => b.includes(uid) && b.includes('"allowed":true');
    const servers: Partial<Record<Name, { target: Target; pid: number }>> = {
      ceiling: { target: { port: ceiling.port, ca, body, check }, pid: ceiling.child.pid! },
      portal: { target: { port: portal.port, ca, body, check }, pid: portal.pid },
    };
    const probes: Partial<Record<Name, string>> = { portal: portalProbes };
    if (BASELINE) {
      const build = await compileRef(BASELINE, dir.slice(-6));
      builds.push(build);
      const baseline = await startStandalone(join(build.dir, 'cli', 'main.js'), rules, files, profile('baseline'));
      servers.baseline = { target: { port: baseline.port, ca, body, check }, pid: baseline.pid };
      probes.baseline = baseline.probes;
    }
    if (WITH_HOP) {
      const hop = await startProcess(
        [...profile('hop'), '--disable-warning=ExperimentalWarning', join(root, 'bench', 'ceiling-hop-server.ts'), files.certFile, files.keyFile],
        (l) => (l.startsWith('listening ') ? Number(l.slice(10)) : undefined),
        {},
        true,
      );
      servers.hop = { target: { port: hop.port, ca, body, check }, pid: hop.child.pid! };
    }
    let clusterPid = 0;
    let clusterNodeOptions = '';
    if (WITH_CLUSTER) {
      const cluster = await startCluster(dir, portalMain, files, profile);
      clusterPid = cluster.pid;
      clusterNodeOptions = cluster.nodeOptions;
      probes.cluster = cluster.probes;
      servers.cluster = { target: { port: cluster.port, ca, body, check }, pid: cluster.pid };
    }
    const names = Object.keys(servers) as Name[];
    const server = (n: Name): { target: Target; pid: number } => servers[n]!;
    // Rotate the order every round so no side always runs first or last.
    const orderFor = (i: number): Name[] => names.map((_, k) => names[(i + k) % names.length]!);

    // Warm-up: JIT, ajv code paths, connection set-up.
    for (const n of names) await closedLoop(server(n).target, CONNECTIONS, 2000);

    type Round = Partial<Record<Name, Measured>>;
    const closedRounds: Round[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const r: Round = {};
      for (const n of orderFor(i)) r[n] = await measure(server(n).target, server(n).pid, (t) => closedLoop(t, CONNECTIONS, SECONDS * 1000), probes[n]);
      closedRounds.push(r);
    }
    load.push(loadavg());
    const openRounds: Round[] = [];
    for (let i = 0; i < OPEN_ROUNDS; i++) {
      const r: Round = {};
      for (const n of orderFor(i)) r[n] = await measure(server(n).target, server(n).pid, (t) => openLoop(t, CONNECTIONS, RATE, SECONDS * 1000), probes[n]);
      openRounds.push(r);
    }
    load.push(loadavg());

    const pools = Object.fromEntries(await Promise.all(Object.entries(probes).map(async ([n, url]) => [n, await poolStats(url)] as const)));
    const all = [...closedRounds, ...openRounds].flatMap((r) => Object.values(r));
    const errors = all.reduce((n, r) => n + r.errors, 0);
    const side = (n: Name) => ({
      closedRps: median(closedRounds.map((r) => r[n]!.rps)),
      closedP99ms: median(closedRounds.map((r) => r[n]!.p99ms)),
      cpuUsPerRequest: median(closedRounds.map((r) => r[n]!.serverCpuUsPerRequest)),
      openP50ms: median(openRounds.map((r) => r[n]!.p50ms)),
      openP99ms: median(openRounds.map((r) => r[n]!.p99ms)),
      // Per round against the ceiling of the same round, then the median.
      throughputRatio: median(closedRounds.map((r) => r[n]!.rps / r.ceiling!.rps)),
      // Ceiling CPU per request ÷ this server's: the throughput ratio the two
      // would reach on dedicated cores, and far less sensitive to neighbours
      // than req/s.
      cpuPerRequestRatio: median(closedRounds.map((r) => r.ceiling!.serverCpuUsPerRequest / r[n]!.serverCpuUsPerRequest)),
      p99DeltaMsAt1000rps: median(openRounds.map((r) => r[n]!.p99ms - r.ceiling!.p99ms)),
      // The replica's main thread in the open rounds, summed (the ceiling has no /debug/vars).
      ...(probes[n] ? { openMainThread: sumMainThread(openRounds.map((r) => r[n]!.mainThread)) } : {}),
    });
    const median_ = Object.fromEntries(names.map((n) => [n, side(n)])) as Record<Name, ReturnType<typeof side>>;
    const goals = (n: Name) => ({
      throughputAtLeast80PercentOfCeiling: median_[n].throughputRatio >= 0.8,
      p99Within2msOfCeilingAt1000rps: median_[n].p99DeltaMsAt1000rps <= 2,
    });
    const report = {
      benchmark: 'admission',
      machine: { cpus: cpus().length, node: process.version, loadavg1m: load.map((l) => round3(l[0] ?? NaN)) },
      setup: {
        reviewBytes: body.length, connections: CONNECTIONS, rounds: ROUNDS, openRounds: OPEN_ROUNDS, secondsPerRun: SECONDS, openLoopRate: RATE,
        sides: names, rules: RULES, evaluationWorkers: Number(WORKERS), cpus: CPUS || 'all', generatorCpus: GENERATOR_CPUS || 'all', portal: FROM_SOURCE ? 'src through tsx' : 'compiled with tsc (as in the image)', ...(WITH_CLUSTER ? { clusterReplicaPid: clusterPid, clusterNodeOptions } : {}),
      },
      median: { ...median_, maxGeneratorCores: Math.max(...all.map((r) => r.generatorCores)) },
      // This code's CPU per request minus the baseline's (--baseline), per closed round, then the median.
      ...(BASELINE ? { overBaseline: { ref: BASELINE, cpuUsPerRequest: median(closedRounds.map((r) => r.portal!.serverCpuUsPerRequest - r.baseline!.serverCpuUsPerRequest)) } } : {}),
      // Evaluation tasks over the whole run (warm-up included), per replica.
      evaluationPool: pools,
      goals: {
        portal: goals('portal'),
        ...(WITH_CLUSTER ? { cluster: goals('cluster') } : {}),
        zeroErrors: errors === 0,
      },
      closedRounds,
      openRounds,
    };
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } finally {
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
          }),
      ),
    );
    await rm(dir, { recursive: true, force: true });
    await Promise.all(builds.map((b) => b.remove()));
  }
}

await main();
