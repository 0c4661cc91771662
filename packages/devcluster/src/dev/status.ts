/**
 * The live one-line status of `portal dev`: readiness from each replica's
 * `/readyz`, the leader from `/debug/vars` (`leader_election`), requests and
 * denials summed from `/metrics` (`portal_admission_requests_total`).
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
  leaseHolder: string | undefined;
  requests: number;
  denials: number;
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
  const status: ReplicaStatus = { name: r.name, ready: false, isLeader: false, leaseHolder: undefined, requests: 0, denials: 0 };
  if (!r.running) return status;
  const base = `http://127.0.0.1:${r.probesPort}`;
  const [ready, vars, metrics] = await Promise.all([get(`${base}/readyz`), get(`${base}/debug/vars`), get(`${base}/metrics`)]);
  status.ready = ready?.status === 200;
  if (vars?.status === 200) {
    try {
      const le = (JSON.parse(vars.text) as { leader_election?: { is_leader?: boolean; lease_holder?: string } }).leader_election;
      status.isLeader = le?.is_leader === true;
      if (le?.lease_holder) status.leaseHolder = le.lease_holder;
    } catch {
      // not JSON yet: leave the leader unknown
    }
  }
  if (metrics?.status === 200) {
    status.requests = sumCounter(metrics.text, 'portal_admission_requests_total');
    status.denials = sumCounter(metrics.text, 'portal_admission_requests_total', ['decision', 'deny']);
  }
  return status;
}

export function formatStatus(apiserver: string, statuses: readonly ReplicaStatus[]): string {
  const ready = statuses.filter((s) => s.ready).length;
  const leader = statuses.find((s) => s.isLeader)?.name ?? statuses.find((s) => s.leaseHolder)?.leaseHolder ?? 'none';
  const requests = statuses.reduce((n, s) => n + s.requests, 0);
  const denials = statuses.reduce((n, s) => n + s.denials, 0);
  return `portal dev: ${ready}/${statuses.length} replicas ready · leader ${leader} · ${requests} requests · ${denials} denied · ${apiserver}`;
}
