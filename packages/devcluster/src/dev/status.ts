/**
 * The live one-line status of `portal dev`: readiness from each replica's
 * `/readyz`, the leader from `/debug/vars` (`leader_election`), requests and
 * denials summed from `/metrics` (`portal_admission_requests_total`).
 *
 * Replicas are named one way, by their name (`portal-1`), never by their
 * Lease identity (`portal-1_07b5f61b`, a new one per process). Only a live
 * process is called leader: one that says so itself, or whose current
 * identity holds the Lease; a Lease still held by a process that exited
 * (until it expires) shows `leader none`. Counters are summed per replica
 * across its restarts ({@link CounterTotals}): a restarted replica's
 * `/metrics` starts at 0, the line never goes backwards.
 */
export interface ReplicaProbe {
  name: string;
  probesPort: number;
  running: boolean;
}

export interface ReplicaStatus {
  name: string;
  ready: boolean;
  isLeader: boolean;
  /** This process's Lease identity (`<name>_<random>`), once known. */
  identity?: string | undefined;
  leaseHolder: string | undefined;
  requests: number;
  denials: number;
  /** `/metrics` answered (else `requests` and `denials` are 0 for want of an answer). */
  counted?: boolean;
}

/** Each probe gets this long: the status line refreshes every second. */
const PROBE_TIMEOUT_MS = 800;

async function get(url: string): Promise<{ status: number; text: string } | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    return { status: res.status, text: await res.text() };
  } catch {
    return undefined;
  }
}

/** Sums a counter over all label sets, optionally only those with `label="value"`. */
export function sumCounter(metrics: string, name: string, label?: [string, string]): number {
  let total = 0;
  for (const line of metrics.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (label && !line.includes(`${label[0]}="${label[1]}"`)) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(value)) total += value;
  }
  return total;
}

export async function probeReplica(r: ReplicaProbe): Promise<ReplicaStatus> {
  const status: ReplicaStatus = { name: r.name, ready: false, isLeader: false, identity: undefined, leaseHolder: undefined, requests: 0, denials: 0 };
  if (!r.running) return status;
  const base = `http://127.0.0.1:${r.probesPort}`;
  const [ready, vars, metrics] = await Promise.all([get(`${base}/readyz`), get(`${base}/debug/vars`), get(`${base}/metrics`)]);
  status.ready = ready?.status === 200;
  if (vars?.status === 200) {
    try {
      const le = (JSON.parse(vars.text) as { leader_election?: { is_leader?: boolean; identity?: string; lease_holder?: string } }).leader_election;
      status.isLeader = le?.is_leader === true;
      if (le?.identity) status.identity = le.identity;
      if (le?.lease_holder) status.leaseHolder = le.lease_holder;
    } catch {
      // not JSON yet: leave the leader unknown
    }
  }
  if (metrics?.status === 200) {
    status.counted = true;
    status.requests = sumCounter(metrics.text, 'portal_admission_requests_total');
    status.denials = sumCounter(metrics.text, 'portal_admission_requests_total', ['decision', 'deny']);
  }
  return status;
}

/**
 * The leader's replica name: a live replica that says it leads, else the
 * live replica whose current identity holds the Lease, else `none` (a Lease
 * held by an exited process is nobody's until it expires).
 */
export function leaderName(statuses: readonly ReplicaStatus[]): string {
  const self = statuses.find((s) => s.isLeader);
  if (self) return self.name;
  const holders = new Set(statuses.map((s) => s.leaseHolder).filter((h) => h !== undefined));
  return statuses.find((s) => s.identity !== undefined && holders.has(s.identity))?.name ?? 'none';
}

export function formatStatus(apiserver: string, statuses: readonly ReplicaStatus[]): string {
  const ready = statuses.filter((s) => s.ready).length;
  const requests = statuses.reduce((n, s) => n + s.requests, 0);
  const denials = statuses.reduce((n, s) => n + s.denials, 0);
  return `portal dev: ${ready}/${statuses.length} replicas ready · leader ${leaderName(statuses)} · ${requests} requests · ${denials} denied · ${apiserver}`;
}

/** `HH:MM:SS` (local time), the moment a status line was printed. */
export function clock(at: Date): string {
  const two = (n: number): string => String(n).padStart(2, '0');
  return `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}`;
}

/**
 * Request and denial counts per replica across its restarts: a replica's
 * counters live in its process and start at 0 in the next one, so the last
 * counts seen of each process that is gone are kept as a base. A process is
 * told by its pid (the supervisor's).
 */
export class CounterTotals {
  readonly #replicas = new Map<string, { pid: number | undefined; base: Counts; last: Counts }>();

  /** `status` with its counters replaced by the totals since `portal dev` started. */
  add(status: ReplicaStatus, pid: number | undefined): ReplicaStatus {
    let r = this.#replicas.get(status.name);
    if (!r) {
      r = { pid, base: { requests: 0, denials: 0 }, last: { requests: 0, denials: 0 } };
      this.#replicas.set(status.name, r);
    }
    if (pid !== undefined && pid !== r.pid) {
      // Another process: what the previous one counted becomes the base.
      if (r.pid !== undefined) r.base = { requests: r.base.requests + r.last.requests, denials: r.base.denials + r.last.denials };
      r.last = { requests: 0, denials: 0 };
      r.pid = pid;
    }
    // A /metrics that did not answer says nothing: the last counts stand.
    if (pid !== undefined && status.counted) r.last = { requests: status.requests, denials: status.denials };
    return { ...status, requests: r.base.requests + r.last.requests, denials: r.base.denials + r.last.denials };
  }
}

interface Counts { requests: number; denials: number }
