/**
 * One `portal dev --replicas N` cluster for the failover benchmark: spawns
 * it, reads `state.json` (replica pids and probe URLs), reads the embedded
 * API server's write log over the `/_portal` side API with the admin token,
 * and samples every replica's `/debug/vars` leader_election in rounds.
 *
 * Times: the write log stamps each write with the API server's wall clock
 * (ms). The benchmark stamps its own signals with Date.now() on the same
 * machine, so differences between the two are meaningful to the millisecond.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { DevApiClient } from '../packages/devcluster/src/dev/api-client.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const NS = 'portal-system';
export const LEASE = 'portal-leader';

export interface Timings {
  leaseMs: number;
  renewDeadlineMs: number;
  retryMs: number;
}

export interface Replica {
  name: string;
  pid: number | null;
  webhook: string;
  probes: string;
}

export interface AuditEntry {
  verb: string;
  resource: string;
  subresource: string;
  name: string;
  user: string;
  code: number;
  time: string;
}

export interface LeaseWrite {
  user: string;
  verb: string;
  at: number;
}

interface LeaderVars {
  is_leader: boolean;
  identity: string;
  lease_holder: string;
}

export const userOf = (name: string): string => `system:serviceaccount:${NS}:${name}`;

/** Polls `check` every `everyMs` until it returns something other than undefined/false. */
export async function until<T>(what: string, ms: number, check: () => T | undefined | false | Promise<T | undefined | false>, everyMs = 20): Promise<T> {
  const deadline = performance.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (performance.now() > deadline) throw new Error(`timed out after ${ms}ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export async function leaderVars(probes: string, timeoutMs: number): Promise<LeaderVars | undefined> {
  try {
    const res = await fetch(`${probes}/debug/vars`, { signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) return undefined;
    return ((await res.json()) as { leader_election?: LeaderVars }).leader_election;
  } catch {
    return undefined;
  }
}

async function readyz(probes: string): Promise<boolean> {
  try {
    return (await fetch(`${probes}/readyz`, { signal: AbortSignal.timeout(1000) })).status === 200;
  } catch {
    return false;
  }
}

export interface SampleStats {
  rounds: number;
  /** Rounds in which more than one replica answered is_leader: true. */
  twoLeaderRounds: number;
  maxLeaders: number;
  /** Longest interval between two completed rounds (a stopped replica makes a round wait for its timeout). */
  maxRoundGapMs: number;
}

export class DevCluster {
  readonly replicas: number;
  readonly timings: Timings;
  #dir = '';
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  /** The embedded API server's side API: HTTPS with `portal dev`'s own CA, trusted from the kubeconfig it writes. */
  #api: DevApiClient | undefined;
  #pids = new Set<number>();
  #sampling = false;
  #sampler: Promise<void> = Promise.resolve();
  readonly stats: SampleStats = { rounds: 0, twoLeaderRounds: 0, maxLeaders: 0, maxRoundGapMs: 0 };
  /** Latest round: name → is_leader (undefined when it did not answer). */
  latest = new Map<string, boolean | undefined>();

  constructor(replicas: number, timings: Timings) {
    this.replicas = replicas;
    this.timings = timings;
  }

  async start(): Promise<void> {
    this.#dir = await mkdtemp(join(tmpdir(), 'portal-failover-'));
    const t = this.timings;
    const child = spawn(
      process.execPath,
      [
        join(root, 'bin', 'portal.js'), 'dev', '--replicas', String(this.replicas), '--port', '0', '--state-dir', this.#dir, '--grace-period', '5s',
        '--lease-duration', `${t.leaseMs}ms`, '--renew-deadline', `${t.renewDeadlineMs}ms`, '--retry-period', `${t.retryMs}ms`,
      ],
      { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()));
    const s = await until('portal dev state.json with running replicas', 60_000, async () => {
      if (child.exitCode !== null) throw new Error(`portal dev exited ${child.exitCode}: ${err}`);
      const st = await this.state();
      return st && st.replicas.length === this.replicas && st.replicas.every((r) => r.pid !== null) ? st : undefined;
    }, 100);
    const kubeconfig = parseYaml(await readFile(s.kubeconfig, 'utf8')) as {
      clusters: { cluster: { 'certificate-authority-data'?: string } }[];
      users: { user: { token: string } }[];
    };
    const caData = kubeconfig.clusters[0]?.cluster['certificate-authority-data'];
    this.#api = new DevApiClient(s.apiserver, kubeconfig.users[0]?.user.token ?? '', caData ? Buffer.from(caData, 'base64').toString('utf8') : undefined);
    await this.waitAllReady(120_000);
  }

  async state(): Promise<{ kubeconfig: string; apiserver: string; replicas: Replica[] } | undefined> {
    try {
      const s = JSON.parse(await readFile(join(this.#dir, 'state.json'), 'utf8')) as { kubeconfig: string; apiserver: string; replicas: Replica[] };
      for (const r of s.replicas) if (r.pid !== null) this.#pids.add(r.pid);
      return s;
    } catch {
      return undefined;
    }
  }

  async replicaList(): Promise<Replica[]> {
    return (await this.state())?.replicas ?? [];
  }

  /** Every replica running (the supervisor restarts killed ones) and ready. */
  async waitAllReady(ms: number): Promise<void> {
    await until('every replica running and ready', ms, async () => {
      const rs = await this.replicaList();
      if (rs.length !== this.replicas || rs.some((r) => r.pid === null)) return false;
      return (await Promise.all(rs.map((r) => readyz(r.probes)))).every(Boolean);
    }, 100);
  }

  /** The one replica answering is_leader: true (undefined unless exactly one does). */
  async leader(): Promise<Replica | undefined> {
    const rs = await this.replicaList();
    const vars = await Promise.all(rs.map((r) => leaderVars(r.probes, 500)));
    const leaders = rs.filter((_, i) => vars[i]?.is_leader === true);
    return leaders.length === 1 && leaders[0]!.pid !== null ? leaders[0] : undefined;
  }

  /** One side-API call, bounded (5 s) like every wait of the bench. */
  async #call(method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
    const api = this.#api;
    if (!api) throw new Error('the cluster is not started');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${method} ${path}: no answer within 5 s`)), 5000);
    });
    try {
      return await Promise.race([api.request(method, path, body), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #side(path: string): Promise<unknown> {
    const res = await this.#call('GET', path);
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status}`);
    return res.body;
  }

  /** POST /_portal/faults (e.g. `{action: 'cutOff', user}`). */
  async fault(body: Record<string, unknown>): Promise<void> {
    const res = await this.#call('POST', '/_portal/faults', body);
    if (res.status !== 200) throw new Error(`POST /_portal/faults ${JSON.stringify(body)}: ${res.status}`);
  }

  async audit(): Promise<AuditEntry[]> {
    return (await this.#side('/_portal/audit')) as AuditEntry[];
  }

  /** Requests by user since the API server started, reads and watches included. */
  async requests(): Promise<Record<string, Record<string, number>>> {
    return (await this.#side('/_portal/requests')) as Record<string, Record<string, number>>;
  }

  /** Successful writes of the leader Lease, oldest first. */
  async leaseWrites(): Promise<LeaseWrite[]> {
    return (await this.audit())
      .filter((e) => e.resource === 'leases' && e.name === LEASE && e.code < 300)
      .map((e) => ({ user: e.user, verb: e.verb, at: Date.parse(e.time) }));
  }

  /** Samples every replica's is_leader in rounds, ~`everyMs` apart, each answer bounded by `timeoutMs`. */
  startSampling(everyMs = 20, timeoutMs = 150): void {
    this.#sampling = true;
    this.#sampler = (async () => {
      let last = performance.now();
      while (this.#sampling) {
        const rs = await this.replicaList();
        const vars = await Promise.all(rs.map((r) => leaderVars(r.probes, timeoutMs)));
        const n = vars.filter((v) => v?.is_leader === true).length;
        this.latest = new Map(rs.map((r, i) => [r.name, vars[i]?.is_leader]));
        this.stats.rounds++;
        if (n > 1) this.stats.twoLeaderRounds++;
        this.stats.maxLeaders = Math.max(this.stats.maxLeaders, n);
        const now = performance.now();
        this.stats.maxRoundGapMs = Math.max(this.stats.maxRoundGapMs, now - last);
        last = now;
        await new Promise((r) => setTimeout(r, everyMs));
      }
    })();
  }

  async stopSampling(): Promise<void> {
    this.#sampling = false;
    await this.#sampler;
  }

  async stop(): Promise<void> {
    await this.stopSampling();
    const child = this.#child;
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await this.#exited;
      clearTimeout(timer);
    }
    // Replicas run in their own process groups: make sure none outlives the
    // benchmark — but only a process whose command line names this cluster's
    // state directory (a pid may have been reused since).
    for (const pid of this.#pids) {
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      if (!cmdline.includes(this.#dir)) continue;
      try {
        process.kill(pid, 'SIGCONT');
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    if (this.#dir) await rm(this.#dir, { recursive: true, force: true });
  }
}
