/**
 * The three failover trials (graceful stop, crash, paused leader) and the
 * steady-state Lease traffic measurement, each against a running DevCluster.
 * All intervals come from the API server's write log (wall clock, ms) and
 * the benchmark's Date.now() at the moment it sent the signal.
 */
import { leaderVars, until, userOf, type DevCluster, type LeaseWrite, type Replica } from './failover-cluster.ts';

export interface GracefulTrial {
  from: string;
  to: string;
  /** SIGTERM → the next leader's first successful Lease write. */
  handoverMs: number;
  /** The old leader's release write → the next leader's takeover write (null: no release seen). */
  releaseToTakeoverMs: number | null;
}

export interface CrashTrial {
  from: string;
  to: string;
  /** SIGKILL → takeover write. */
  fromSignalMs: number;
  /** The dead leader's last successful renewal → takeover write (lease math: [L, L + 2 × 2.2 R]). */
  fromLastRenewalMs: number;
}

export interface PausedTrial {
  from: string;
  to: string;
  /** Last renewal before SIGSTOP → takeover write. */
  fromLastRenewalMs: number;
  /** SIGCONT → first /debug/vars answer of the woken replica. */
  firstAnswerMs: number;
  /** is_leader in that first answer (must be false). */
  firstAnswerIsLeader: boolean;
  /** Answers with is_leader true in the 3 retry periods after waking (must be 0). */
  leaderAnswersAfterWake: number;
  /** Successful Lease writes by the woken replica after the takeover (must be 0). */
  leaseWritesAfterTakeover: number;
  /** Any other successful writes by it after the takeover, by resource (e.g. its "stopped leading" Event). */
  otherWritesAfterTakeover: Record<string, number>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A leader, with every replica running and ready (so there are followers to take over). */
async function steadyLeader(c: DevCluster): Promise<Replica & { pid: number }> {
  await c.waitAllReady(180_000);
  const l = await until('exactly one leader', 60_000, () => c.leader(), 50);
  // One more renewal period so every follower has observed the current record through its watch.
  await sleep(c.timings.retryMs);
  return { ...l, pid: l.pid! };
}

function takeoverAfter(writes: LeaseWrite[], old: string, after: number): LeaseWrite | undefined {
  return writes.find((w) => w.user !== userOf(old) && w.at >= after);
}

function lastBy(writes: LeaseWrite[], name: string, notAfter: number): LeaseWrite | undefined {
  return writes.filter((w) => w.user === userOf(name) && w.at <= notAfter).at(-1);
}

const nameOf = (user: string): string => user.split(':').at(-1) ?? user;

/** Upper bound for a takeover to be seen at all: L + 2 × 2.2 R plus generous scheduling slack. */
function takeoverWaitMs(c: DevCluster): number {
  return c.timings.leaseMs + 2 * 2.2 * c.timings.retryMs + 20_000;
}

export async function gracefulTrial(c: DevCluster): Promise<GracefulTrial> {
  const old = await steadyLeader(c);
  const t0 = Date.now();
  process.kill(old.pid, 'SIGTERM');
  const take = await until('a takeover write after SIGTERM', takeoverWaitMs(c), async () => takeoverAfter(await c.leaseWrites(), old.name, t0), 10);
  const writes = await c.leaseWrites();
  const release = writes.find((w) => w.user === userOf(old.name) && w.at >= t0);
  return { from: old.name, to: nameOf(take.user), handoverMs: take.at - t0, releaseToTakeoverMs: release ? take.at - release.at : null };
}

export async function crashTrial(c: DevCluster): Promise<CrashTrial> {
  const old = await steadyLeader(c);
  const t0 = Date.now();
  process.kill(old.pid, 'SIGKILL');
  const take = await until('a takeover write after SIGKILL', takeoverWaitMs(c), async () => takeoverAfter(await c.leaseWrites(), old.name, t0), 50);
  const last = lastBy(await c.leaseWrites(), old.name, take.at);
  if (!last) throw new Error(`no renewal by ${old.name} in the write log`);
  return { from: old.name, to: nameOf(take.user), fromSignalMs: take.at - t0, fromLastRenewalMs: take.at - last.at };
}

export async function pausedTrial(c: DevCluster): Promise<PausedTrial> {
  const old = await steadyLeader(c);
  const t0 = Date.now();
  process.kill(old.pid, 'SIGSTOP');
  let take: LeaseWrite;
  try {
    take = await until('a takeover write while the leader is stopped', takeoverWaitMs(c), async () => takeoverAfter(await c.leaseWrites(), old.name, t0), 50);
  } finally {
    process.kill(old.pid, 'SIGCONT');
  }
  const woke = performance.now();
  // The first answer after waking: poll fast, each attempt bounded.
  const first = await until('the woken replica to answer', 10_000, () => leaderVars(old.probes, 2000), 2);
  const firstAnswerMs = performance.now() - woke;
  let leaderAnswers = first.is_leader ? 1 : 0;
  const watchUntil = performance.now() + 3 * c.timings.retryMs;
  while (performance.now() < watchUntil) {
    if ((await leaderVars(old.probes, 1000))?.is_leader === true) leaderAnswers++;
    await sleep(20);
  }
  const after = (await c.audit()).filter((e) => e.user === userOf(old.name) && e.code < 300 && Date.parse(e.time) > take.at);
  const other: Record<string, number> = {};
  for (const e of after) if (e.resource !== 'leases') other[e.resource] = (other[e.resource] ?? 0) + 1;
  const last = lastBy(await c.leaseWrites(), old.name, take.at);
  return {
    from: old.name,
    to: nameOf(take.user),
    fromLastRenewalMs: last ? take.at - last.at : Number.NaN,
    firstAnswerMs: Math.round(firstAnswerMs),
    firstAnswerIsLeader: first.is_leader,
    leaderAnswersAfterWake: leaderAnswers,
    leaseWritesAfterTakeover: after.filter((e) => e.resource === 'leases').length,
    otherWritesAfterTakeover: other,
  };
}

export interface PartitionTrial {
  from: string;
  to: string;
  /** Cut-off → the leader's /debug/vars says is_leader false. */
  demotedAfterCutMs: number;
  /** Its last successful renewal → that answer (client-go bound: R + D, plus the last request's round trip). */
  demotedAfterLastRenewalMs: number;
  /** Its last successful renewal → the takeover write (never before L). */
  takeoverFromLastRenewalMs: number;
}

/** The API server hangs up on everything the leader sends (fault injection); its webhook keeps running. */
export async function partitionTrial(c: DevCluster): Promise<PartitionTrial> {
  const old = await steadyLeader(c);
  const user = userOf(old.name);
  const t0 = Date.now();
  await c.fault({ action: 'cutOff', user });
  try {
    await until('the cut-off leader to report is_leader false', takeoverWaitMs(c), async () => (await leaderVars(old.probes, 1000))?.is_leader === false, 5);
    const demoted = Date.now();
    const take = await until('a takeover write after the cut-off', takeoverWaitMs(c), async () => takeoverAfter(await c.leaseWrites(), old.name, t0), 50);
    const last = lastBy(await c.leaseWrites(), old.name, take.at);
    if (!last) throw new Error(`no renewal by ${old.name} in the write log`);
    return { from: old.name, to: nameOf(take.user), demotedAfterCutMs: demoted - t0, demotedAfterLastRenewalMs: demoted - last.at, takeoverFromLastRenewalMs: take.at - last.at };
  } finally {
    await c.fault({ action: 'restore', user });
  }
}

export interface SteadyTraffic {
  windowS: number;
  /** Successful + failed Lease writes per second, by replica (leader first). */
  leaseWritesPerS: Record<string, number>;
  /** All writes per second by replica (Lease, Events, anything else). */
  allWritesPerS: Record<string, number>;
  /** Lease API requests (reads, writes, watches opened) per second, by replica: from the API server's request counter. */
  leaseRequestsPerS: Record<string, number>;
  /** The same by replica and `METHOD path` (paths shortened to what follows `/v1/`). */
  leaseRequestsByKind: Record<string, Record<string, number>>;
  /** Writes in the window by replica and resource (what besides the Lease a replica writes). */
  writesByResource: Record<string, Record<string, number>>;
  leader: string;
}

/** Lease writes per replica over `windowMs` of steady state (the write log records writes only). */
export async function steadyTraffic(c: DevCluster, windowMs: number): Promise<SteadyTraffic> {
  const leader = await steadyLeader(c);
  const before = await c.requests();
  const from = Date.now();
  await sleep(windowMs);
  const to = Date.now();
  const after = await c.requests();
  const inWindow = (await c.audit()).filter((e) => {
    const at = Date.parse(e.time);
    return at >= from && at < to;
  });
  const lease: Record<string, number> = {};
  const all: Record<string, number> = {};
  for (const r of await c.replicaList()) {
    lease[r.name] = 0;
    all[r.name] = 0;
  }
  const byResource: Record<string, Record<string, number>> = {};
  for (const e of inWindow) {
    const n = nameOf(e.user);
    if (!(n in all)) continue;
    all[n]! += 1;
    const key = `${e.verb} ${e.resource}${e.subresource ? `/${e.subresource}` : ''}`;
    byResource[n] ??= {};
    byResource[n][key] = (byResource[n][key] ?? 0) + 1;
    if (e.resource === 'leases') lease[n]! += 1;
  }
  const per = (m: Record<string, number>): Record<string, number> =>
    Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Math.round((v / ((to - from) / 1000)) * 1000) / 1000]));
  const leaseReq: Record<string, number> = {};
  const leaseKinds: Record<string, Record<string, number>> = {};
  for (const name of Object.keys(all)) {
    const user = userOf(name);
    leaseReq[name] = 0;
    leaseKinds[name] = {};
    for (const [key, n] of Object.entries(after[user] ?? {})) {
      if (!key.includes('/leases')) continue;
      const d = n - (before[user]?.[key] ?? 0);
      if (d === 0) continue;
      leaseReq[name] += d;
      leaseKinds[name][key.replace(/ \/apis\/coordination\.k8s\.io\/v1\//, ' ')] = d;
    }
  }
  return { windowS: (to - from) / 1000, leaseRequestsPerS: per(leaseReq), leaseRequestsByKind: leaseKinds, leaseWritesPerS: per(lease), allWritesPerS: per(all), writesByResource: byResource, leader: leader.name };
}
