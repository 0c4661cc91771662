/**
 * Incremental audit benchmark (issue 32): objects arriving by watch, the
 * common case, where `bench -- reports` measures a full pass over objects
 * that exist before the leader starts.
 *
 * The embedded API server runs in a CHILD process with the Pod Security
 * rules (policies/pod-security) and `--namespaces` empty namespaces; `--replicas`
 * real cluster-mode replicas (`portal serve --kubeconfig`, the bench's own
 * children, no webhook registered: admission is not what is measured) run
 * against it with the defaults (`--report-qps 10`, `--report-flush 10s`,
 * namespace reports, the default lease timings: with the e2e tests' short
 * ones, 3 s / 2 s / 0.5 s, this loaded machine's API server answered renewals
 * too late and the Lease stayed vacant for minutes). Once a replica leads and every
 * replica has evaluated the empty cluster, this process creates `--pods`
 * realistic Pods (bench/realistic-pod.ts, every 50th privileged, round robin
 * over the namespaces) through the API server at a steady `--rate`, and with
 * `--failover` SIGKILLs the leader when half are created. It measures:
 * - settle time: from the last create until every namespace report's summary
 *   covers every Pod of its namespace (`reports.portal.dev/objects`), read
 *   from the API server (the figure of the issue: ≤ 15 s at 10,000 Pods,
 *   ≤ 60 s at 50,000);
 * - each replica's audit: objects handled, CPU seconds (user + system of the
 *   whole process, from /proc) and so CPU per object and objects per
 *   CPU-second ("on one core"), the largest queue lag seen; the follower's
 *   figures are the baseline of the same run (`leaderToFollowerCpuPerObject`);
 * - report writes by each replica, from the API server's write log, against
 *   the budget (`--report-qps` × seconds leading + its burst).
 *
 * Run: npm run -s bench -- incremental [--pods 10000] [--namespaces 100] [--rate 200] [--failover]
 * Prints one JSON object.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { DevApiClient } from '../packages/devcluster/src/dev/api-client.ts';
import { readChartCrds, readManifests } from '../packages/devcluster/src/dev/manifests.ts';
import { DEFAULTS } from '../src/config/options.ts';
import { OBJECTS_ANNOTATION, REPORT_API_INFO } from '../src/policy/report-api.ts';
import type { Report } from '../src/policy/report-shape.ts';
import type { KubeObject } from '../src/policy/types.ts';
import { realisticPod } from './realistic-pod.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const argv = process.argv.slice(2);
const arg = (name: string, fallback: number): number => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
};
const PODS = arg('pods', 10_000);
const NAMESPACES = arg('namespaces', 100);
const RATE = arg('rate', 200);
const REPLICAS = arg('replicas', 2);
const FAILOVER = argv.includes('--failover');
/** `--logs DIR`: each replica's log goes to DIR/portal-N.log (why a run lagged). */
const LOG_DIR = argv.includes('--logs') ? argv[argv.indexOf('--logs') + 1] : undefined;
/** `--cpu-prof-dir DIR`: each replica writes a V8 CPU profile there when it exits (where the CPU per object goes). */
const PROF_DIR = argv.includes('--cpu-prof-dir') ? argv[argv.indexOf('--cpu-prof-dir') + 1] : undefined;
/** Creates in flight at most: the steady rate, not the API server's latency, sets the pace. */
const CONCURRENCY = 32;
const NS = 'portal-system';
const REPORTS = REPORT_API_INFO[DEFAULTS.reportApi];

const nsName = (n: number): string => `team-${String(n).padStart(3, '0')}`;
const userOf = (i: number): string => `system:serviceaccount:${NS}:portal-${i}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function makePod(i: number): KubeObject {
  const pod = realisticPod() as KubeObject & { metadata: Record<string, unknown>; spec: Record<string, unknown> & { containers: Array<Record<string, unknown>> } };
  delete pod.metadata['uid'];
  delete pod.metadata['ownerReferences'];
  pod.metadata['name'] = `checkout-${i}`;
  pod.metadata['namespace'] = nsName(i % NAMESPACES);
  if (i % 50 === 0) pod.spec.containers[0] = { ...pod.spec.containers[0], securityContext: { privileged: true } };
  return pod;
}

/** Child mode: the embedded API server with the CRDs, rules, namespaces and replica users; answers until stdin closes. */
async function apiChild(): Promise<void> {
  const { startApiServer } = await import('../packages/devcluster/src/apiserver/index.ts');
  const api = await startApiServer({ port: 0, historyLimit: PODS + 50_000, namespaces: ['default', 'kube-system', 'kube-public', 'kube-node-lease', NS] });
  const admin = new DevApiClient(api.url, api.adminToken);
  const crds = await readChartCrds(`${root}charts/portal`);
  if (crds.problems.length > 0) throw new Error(`the chart's CRDs: ${crds.problems.join('; ')}`);
  for (const crd of crds.objects) await admin.apply(crd);
  for (let n = 0; n < NAMESPACES; n++) await admin.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: nsName(n) } });
  for (const rule of (await readManifests(`${root}policies/pod-security`)).objects) await admin.apply(rule);
  const kubeconfigs = Array.from({ length: REPLICAS }, (_, i) => {
    api.addUser(userOf(i), ['system:serviceaccounts', `system:serviceaccounts:${NS}`, 'system:authenticated']);
    return api.kubeConfig(userOf(i));
  });
  console.log(JSON.stringify({ url: api.url, token: api.adminToken, kubeconfigs }));
  process.stdin.on('end', () => void api.close().then(() => process.exit(0)));
  process.stdin.resume();
}

interface Replica {
  name: string;
  child: ChildProcess;
  probes: string;
  /** Process CPU seconds (user + system) at the start of the creates. */
  cpu0: number;
  handled0: number;
  maxLagSeconds: number;
  /** Time it held the Lease while sampled. */
  leadingMs: number;
  killed: boolean;
}

interface AuditVars {
  handled?: number;
  completePasses?: number;
  queue?: { waiting: number; processing: number; lagSeconds: number };
}
interface Vars {
  audit?: AuditVars;
}

async function vars(r: Replica): Promise<Vars | undefined> {
  try {
    const res = await fetch(`${r.probes}/debug/vars`, { signal: AbortSignal.timeout(2000) });
    return res.ok ? ((await res.json()) as Vars) : undefined;
  } catch {
    return undefined;
  }
}

/** User + system CPU seconds of a process (Linux /proc). */
function cpuSeconds(pid: number | undefined): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function startReplica(i: number, kubeconfig: string): Promise<Replica> {
  const name = `portal-${i}`;
  const args = ['serve', '--kubeconfig', kubeconfig, '--webhook-port', '0', '--probes-port', '0', '--bind-address', '127.0.0.1', '--self-signed'];
  const prof = PROF_DIR ? ['--cpu-prof', '--cpu-prof-dir', PROF_DIR] : [];
  const child = spawn(process.execPath, [...prof, join(root, 'bin', 'portal.js'), ...args], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, POD_NAME: name, POD_NAMESPACE: NS } });
  // The replica's log is read to its end (a full pipe would stall it); the probes URL is in it.
  const probes = await new Promise<string>((resolve, reject) => {
    const log = LOG_DIR ? createWriteStream(join(LOG_DIR, `${name}.log`)) : undefined;
    createInterface({ input: child.stdout! }).on('line', (line) => {
      log?.write(`${line}\n`);
      if (line.includes('"probes listening"')) resolve((JSON.parse(line) as { url: string }).url);
    });
    child.on('exit', (code) => reject(new Error(`${name} exited ${code} before listening`)));
  });
  return { name, child, probes, cpu0: 0, handled0: 0, maxLagSeconds: 0, leadingMs: 0, killed: false };
}

/** Per namespace: the objects its report's summary covers. */
async function reportedObjects(admin: DevApiClient): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  let cont: string | undefined;
  do {
    const q = new URLSearchParams({ limit: '500', labelSelector: 'app.kubernetes.io/managed-by=portal' });
    if (cont) q.set('continue', cont);
    const res = await admin.request('GET', `/apis/${REPORTS.group}/${REPORTS.version}/${REPORTS.namespaced.plural}?${q}`);
    if (res.status !== 200) throw new Error(`list reports: ${res.status}`);
    const body = res.body as { items: Report[]; metadata?: { continue?: string } };
    for (const r of body.items) out.set(r.metadata.namespace ?? '', Number(r.metadata.annotations?.[OBJECTS_ANNOTATION] ?? 0));
    cont = body.metadata?.continue || undefined;
  } while (cont);
  return out;
}

async function until<T>(what: string, ms: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = performance.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** Creates PODS Pods on a fixed schedule of RATE per second; at the half, with --failover, calls `kill`. */
async function createPods(admin: DevApiClient, kill: () => Promise<string | undefined>): Promise<{ created: Map<string, number>; failed: number; killed: { name: string; at: number } | undefined }> {
  const created = new Map<string, number>();
  let failed = 0;
  let killed: { name: string; at: number } | undefined;
  const t0 = performance.now();
  const inflight = new Set<Promise<void>>();
  for (let i = 0; i < PODS; i++) {
    const wait = t0 + (i / RATE) * 1000 - performance.now();
    if (wait > 0) await sleep(wait);
    if (FAILOVER && i === Math.floor(PODS / 2)) {
      const name = await kill();
      if (name) killed = { name, at: performance.now() };
    }
    const pod = makePod(i);
    const ns = pod.metadata?.namespace ?? '';
    const p = admin.request('POST', `/api/v1/namespaces/${ns}/pods`, pod).then((res) => {
      if (res.status === 201) created.set(ns, (created.get(ns) ?? 0) + 1);
      else failed++;
    });
    inflight.add(p);
    void p.finally(() => inflight.delete(p));
    if (inflight.size >= CONCURRENCY) await Promise.race(inflight);
  }
  await Promise.all(inflight);
  return { created, failed, killed };
}

/** One replica's figures since the creates began (CPU and objects handled: only while it is alive). */
async function replicaFigures(r: Replica, writes: number): Promise<Record<string, unknown> & { name: string; killed: boolean; cpuMicrosPerObject: number | undefined }> {
  const v = r.killed ? undefined : await vars(r);
  const handled = v?.audit?.handled !== undefined ? v.audit.handled - r.handled0 : undefined;
  const cpu = r.killed ? undefined : cpuSeconds(r.child.pid) - r.cpu0;
  return {
    name: r.name,
    killed: r.killed,
    leadingSeconds: Number((r.leadingMs / 1000).toFixed(1)),
    handled,
    cpuSeconds: cpu !== undefined ? Number(cpu.toFixed(2)) : undefined,
    cpuMicrosPerObject: handled && cpu !== undefined ? Math.round((cpu * 1e6) / handled) : undefined,
    objectsPerCpuSecond: handled && cpu ? Math.round(handled / cpu) : undefined,
    maxLagSeconds: Number(r.maxLagSeconds.toFixed(2)),
    reportWrites: writes,
    // The write budget: qps × time leading + the bucket's burst (one second's worth), per term.
    reportWriteBudget: Math.ceil(DEFAULTS.reportQps * (r.leadingMs / 1000)) + Math.ceil(DEFAULTS.reportQps),
  };
}

async function run(): Promise<Record<string, unknown>> {
  const load = [loadavg()[0] ?? NaN];
  const server = spawn(process.execPath, ['--max-old-space-size=8192', '--import', 'tsx', fileURLToPath(import.meta.url), '--api-child', ...argv], { cwd: root, stdio: ['pipe', 'pipe', 'inherit'] });
  const [line] = (await once(createInterface({ input: server.stdout! }), 'line')) as [string];
  const info = JSON.parse(line) as { url: string; token: string; kubeconfigs: string[] };
  const admin = new DevApiClient(info.url, info.token);
  const dir = await mkdtemp(join(tmpdir(), 'portal-incremental-'));
  const replicas: Replica[] = [];
  try {
    for (const [i, kc] of info.kubeconfigs.entries()) {
      const file = join(dir, `kubeconfig-${i}`);
      await writeFile(file, kc, { mode: 0o600 });
      replicas.push(await startReplica(i, file));
    }
    const holder = async (): Promise<string | undefined> => {
      const res = await admin.request('GET', `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/portal-leader`);
      return res.status === 200 ? (res.body as { spec?: { holderIdentity?: string } }).spec?.holderIdentity || undefined : undefined;
    };
    // Every replica has evaluated the (empty) cluster once, and one leads.
    await until('a leader and every replica ready', 120_000, async () => {
      const all = await Promise.all(replicas.map(vars));
      return all.every((v) => (v?.audit?.completePasses ?? 0) > 0) && (await holder()) !== undefined ? true : undefined;
    });
    let lastHolder: { name: string; since: number } | undefined;
    const transitions: Array<{ at: number; holder: string | null }> = [];
    let tCreate0 = performance.now();
    const sample = async (): Promise<void> => {
      await Promise.all(
        replicas.map(async (r) => {
          if (r.killed) return;
          const v = await vars(r);
          if (!v) return;
          r.maxLagSeconds = Math.max(r.maxLagSeconds, v.audit?.queue?.lagSeconds ?? 0);
        }),
      );
      // Who leads, from the Lease (the API server's word, not a replica's answer under load).
      const now = performance.now();
      const h = await holder();
      const current = h?.slice(0, h.lastIndexOf('_'));
      if (lastHolder !== undefined) {
        const r = replicas.find((x) => x.name === lastHolder!.name);
        if (r) r.leadingMs += now - lastHolder.since;
      }
      if (current !== lastHolder?.name) transitions.push({ at: Number(((now - tCreate0) / 1000).toFixed(1)), holder: current ?? null });
      lastHolder = current ? { name: current, since: now } : undefined;
    };
    await sample();
    for (const r of replicas) {
      r.cpu0 = cpuSeconds(r.child.pid);
      r.handled0 = (await vars(r))?.audit?.handled ?? 0;
    }
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        await sample();
        await sleep(250);
      }
    })();

    // The creates, at a steady rate (the Lease holder killed halfway with --failover).
    const t0 = performance.now();
    tCreate0 = t0;
    const { created, failed, killed } = await createPods(admin, async () => {
      const h = await holder();
      const leader = replicas.find((r) => h !== undefined && r.name === h.slice(0, h.lastIndexOf('_')));
      if (!leader) return undefined;
      leader.child.kill('SIGKILL');
      leader.killed = true;
      return leader.name;
    });
    const killedAt = killed ? killed.at - t0 : undefined;
    const lastCreate = performance.now();
    const createSeconds = (lastCreate - t0) / 1000;

    // Settled: every namespace report covers every Pod created in it.
    let polls = 0;
    const settledAt = await until('every report to cover every Pod', 600_000, async () => {
      polls++;
      const reported = await reportedObjects(admin);
      for (const [ns, n] of created) if (reported.get(ns) !== n) return undefined;
      return performance.now();
    });
    sampling = false;
    await sampler;
    const settleSeconds = (settledAt - lastCreate) / 1000;

    const log = (await admin.request('GET', '/_portal/audit')).body as Array<{ resource: string; user: string; code: number; verb: string }>;
    const reportWrites = (user: string) => log.filter((e) => e.user === user && e.code < 300 && (e.resource === REPORTS.namespaced.plural || e.resource === REPORTS.cluster.plural)).length;
    const perReplica = await Promise.all(replicas.map((r, i) => replicaFigures(r, reportWrites(userOf(i)))));
    load.push(loadavg()[0] ?? NaN);
    const survivors = perReplica.filter((r) => !r.killed && r.cpuMicrosPerObject !== undefined);
    const leader = survivors.find((r) => r.name === lastHolder?.name);
    const follower = survivors.find((r) => r !== leader);
    return {
      benchmark: 'incremental',
      machine: { cpus: cpus().length, node: process.version, loadavg1m: load.map((l) => Math.round(l * 100) / 100) },
      pods: PODS,
      namespaces: NAMESPACES,
      reportQps: DEFAULTS.reportQps,
      reportFlushSeconds: DEFAULTS.reportFlush / 1000,
      targetRate: RATE,
      createSeconds: Number(createSeconds.toFixed(1)),
      achievedRate: Math.round((PODS - failed) / createSeconds),
      failedCreates: failed,
      ...(FAILOVER ? { failover: { killed: killed?.name, atSeconds: killedAt !== undefined ? Number((killedAt / 1000).toFixed(1)) : undefined } } : {}),
      leaderChanges: transitions,
      settleSeconds: Number(settleSeconds.toFixed(1)),
      settlePolls: polls,
      replicas: perReplica,
      ...(leader && follower && leader.cpuMicrosPerObject && follower.cpuMicrosPerObject ? { leaderToFollowerCpuPerObject: Number((leader.cpuMicrosPerObject / follower.cpuMicrosPerObject).toFixed(2)) } : {}),
    };
  } finally {
    // SIGTERM: a replica shuts down gracefully (and writes its CPU profile); SIGKILL after 20 s.
    await Promise.all(
      replicas.map(async (r) => {
        if (r.child.exitCode !== null || r.child.signalCode !== null) return;
        const exited = once(r.child, 'exit');
        r.child.kill('SIGTERM');
        const timer = setTimeout(() => r.child.kill('SIGKILL'), 20_000);
        await exited;
        clearTimeout(timer);
      }),
    );
    server.stdin!.end();
    if (server.exitCode === null) await once(server, 'exit');
    await rm(dir, { recursive: true, force: true });
  }
}

if (argv.includes('--api-child')) await apiChild();
else console.log(JSON.stringify(await run(), null, 2));
