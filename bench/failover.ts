/**
 * Failover benchmark (issue 4 part 5): `portal dev --replicas 3` clusters,
 * real signals to real replica processes, intervals taken from the embedded
 * API server's write log. Per profile, over `--trials` trials of each kind:
 *
 * - graceful: SIGTERM to the leader → the next leader's first Lease write
 *   (goal: median ≤ 250 ms; followers watch the Lease, the leader releases it);
 * - crash: SIGKILL → takeover write, and the gap from the dead leader's last
 *   renewal (goal: within [L, L + 2 × 2.2 R], never earlier);
 * - paused: SIGSTOP until someone took over, SIGCONT → the woken replica's
 *   first /debug/vars answer must say is_leader false, and it must write no
 *   Lease after the takeover;
 * - partition: the API server hangs up on the leader (fault injection) →
 *   it reports is_leader false at most R + D after its last renewal;
 * - throughout: every replica's is_leader sampled in rounds ~20 ms apart;
 *   goal: zero rounds with two leaders;
 * - steady state: Lease writes per second per replica over `--window`.
 *
 * `--clusters K` runs K clusters side by side and splits the trials between
 * them (production timings spend ~20 s per crash trial waiting for the lease).
 *
 * Run: node --import tsx bench/failover.ts [--profile scaled|default]
 *        [--trials 10] [--clusters 1] [--window 30s] [--kinds graceful,crash,paused,partition]
 * Prints one JSON object on stdout; progress on stderr.
 */
import { cpus, loadavg } from 'node:os';
import { parseGoDuration } from '../src/leader/config.ts';
import { DevCluster, type SampleStats, type Timings } from './failover-cluster.ts';
import {
  crashTrial,
  gracefulTrial,
  partitionTrial,
  pausedTrial,
  steadyTraffic,
  type CrashTrial,
  type GracefulTrial,
  type PartitionTrial,
  type PausedTrial,
  type SteadyTraffic,
} from './failover-trials.ts';

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? (process.argv[i + 1] ?? fallback) : fallback;
}

const PROFILES: Record<string, Timings> = {
  /** The e2e tests' timings: 3 s / 2 s / 500 ms. */
  scaled: { leaseMs: 3000, renewDeadlineMs: 2000, retryMs: 500 },
  /** Production defaults (client-go's): 15 s / 10 s / 2 s. */
  default: { leaseMs: 15_000, renewDeadlineMs: 10_000, retryMs: 2000 },
};
const PROFILE = flag('profile', 'scaled');
const TIMINGS = PROFILES[PROFILE];
if (!TIMINGS) throw new Error(`--profile must be one of ${Object.keys(PROFILES).join(', ')}`);
const TRIALS = Number(flag('trials', '10'));
const CLUSTERS = Number(flag('clusters', '1'));
const WINDOW_MS = parseGoDuration(flag('window', '30s'));
const KINDS = flag('kinds', 'graceful,crash,paused,partition').split(',');
/** Graceful handover goal (issue 4): median ≤ 0.25 s thanks to the Lease watch. */
const GRACEFUL_GOAL_MS = 250;

const log = (msg: string): void => {
  process.stderr.write(`[failover ${PROFILE}] ${msg}\n`);
};

function summary(values: number[]): { n: number; min: number; median: number; p90: number; max: number } | null {
  const v = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const q = (p: number): number => v[Math.min(v.length - 1, Math.ceil(p * v.length) - 1)]!;
  return { n: v.length, min: v[0]!, median: q(0.5), p90: q(0.9), max: v.at(-1)! };
}

interface ClusterResult {
  graceful: GracefulTrial[];
  crash: CrashTrial[];
  paused: PausedTrial[];
  partition: PartitionTrial[];
  errors: string[];
  sampling: SampleStats;
  steady?: SteadyTraffic;
}

async function runCluster(index: number, trials: number, withSteady: boolean): Promise<ClusterResult> {
  const c = new DevCluster(3, TIMINGS!);
  const r: ClusterResult = { graceful: [], crash: [], paused: [], partition: [], errors: [], sampling: c.stats };
  try {
    await c.start();
    log(`cluster ${index}: 3 replicas ready`);
    c.startSampling(20, 150);
    if (withSteady) {
      r.steady = await steadyTraffic(c, WINDOW_MS);
      log(`cluster ${index}: steady traffic ${JSON.stringify(r.steady.leaseWritesPerS)}`);
    }
    const run = async <T>(kind: string, fn: (c: DevCluster) => Promise<T>, into: T[]): Promise<void> => {
      if (!KINDS.includes(kind)) return;
      for (let i = 0; i < trials; i++) {
        try {
          const t = await fn(c);
          into.push(t);
          log(`cluster ${index}: ${kind} ${i + 1}/${trials} ${JSON.stringify(t)}`);
        } catch (err) {
          r.errors.push(`${kind} trial ${i + 1}: ${(err as Error).message}`);
          log(`cluster ${index}: ${kind} ${i + 1}/${trials} FAILED ${(err as Error).message}`);
        }
      }
    };
    await run('graceful', gracefulTrial, r.graceful);
    await run('crash', crashTrial, r.crash);
    await run('paused', pausedTrial, r.paused);
    await run('partition', partitionTrial, r.partition);
    await c.stopSampling();
  } finally {
    await c.stop();
  }
  return r;
}

const load0 = loadavg();
const started = Date.now();
const perCluster = Array.from({ length: CLUSTERS }, (_, i) => Math.floor(TRIALS / CLUSTERS) + (i < TRIALS % CLUSTERS ? 1 : 0));
const results = await Promise.all(perCluster.map((n, i) => runCluster(i, n, i === 0)));
const load1 = loadavg();

const L = TIMINGS.leaseMs;
const R = TIMINGS.retryMs;
const graceful = results.flatMap((r) => r.graceful);
const crash = results.flatMap((r) => r.crash);
const paused = results.flatMap((r) => r.paused);
const partition = results.flatMap((r) => r.partition);
const D = TIMINGS.renewDeadlineMs;
/**
 * Demotion is observed, not reported: a /debug/vars poll every 5 ms plus its
 * round trip, and the last renewal's time is when the API server processed it
 * (the replica's own clock starts R later, when the response arrived). 100 ms
 * covers that on a loaded 2-core machine; the raw figures are printed.
 */
const OBSERVATION_ALLOWANCE_MS = 100;
const crashBound = { min: L, max: L + 2 * 2.2 * R };
const inBound = (ms: number): boolean => ms >= crashBound.min && ms <= crashBound.max;
const gracefulSummary = summary(graceful.map((g) => g.handoverMs));
const sampling = results.reduce(
  (a, r) => ({
    rounds: a.rounds + r.sampling.rounds,
    twoLeaderRounds: a.twoLeaderRounds + r.sampling.twoLeaderRounds,
    maxLeaders: Math.max(a.maxLeaders, r.sampling.maxLeaders),
    maxRoundGapMs: Math.max(a.maxRoundGapMs, Math.round(r.sampling.maxRoundGapMs)),
  }),
  { rounds: 0, twoLeaderRounds: 0, maxLeaders: 0, maxRoundGapMs: 0 },
);

const out = {
  benchmark: 'failover',
  profile: PROFILE,
  timings: TIMINGS,
  trialsPerKind: TRIALS,
  clusters: CLUSTERS,
  machine: { cpus: cpus().length, loadavgBefore: load0.map((x) => Math.round(x * 100) / 100), loadavgAfter: load1.map((x) => Math.round(x * 100) / 100) },
  durationS: Math.round((Date.now() - started) / 1000),
  graceful: {
    handoverMs: gracefulSummary,
    releaseToTakeoverMs: summary(graceful.flatMap((g) => (g.releaseToTakeoverMs === null ? [] : [g.releaseToTakeoverMs]))),
    withoutRelease: graceful.filter((g) => g.releaseToTakeoverMs === null).length,
    goal: `median <= ${GRACEFUL_GOAL_MS}ms`,
    met: gracefulSummary !== null && gracefulSummary.median <= GRACEFUL_GOAL_MS,
  },
  crash: {
    fromSignalMs: summary(crash.map((t) => t.fromSignalMs)),
    fromLastRenewalMs: summary(crash.map((t) => t.fromLastRenewalMs)),
    boundMs: crashBound,
    earlierThanLease: crash.filter((t) => t.fromLastRenewalMs < L).length,
    laterThanBound: crash.filter((t) => t.fromLastRenewalMs > crashBound.max).length,
    met: crash.length > 0 && crash.every((t) => inBound(t.fromLastRenewalMs)),
  },
  paused: {
    fromLastRenewalMs: summary(paused.map((t) => t.fromLastRenewalMs)),
    firstAnswerAfterWakeMs: summary(paused.map((t) => t.firstAnswerMs)),
    firstAnswerSaidLeader: paused.filter((t) => t.firstAnswerIsLeader).length,
    leaderAnswersAfterWake: paused.reduce((a, t) => a + t.leaderAnswersAfterWake, 0),
    leaseWritesAfterTakeover: paused.reduce((a, t) => a + t.leaseWritesAfterTakeover, 0),
    otherWritesAfterTakeover: paused.reduce<Record<string, number>>((a, t) => {
      for (const [k, v] of Object.entries(t.otherWritesAfterTakeover)) a[k] = (a[k] ?? 0) + v;
      return a;
    }, {}),
    earlierThanLease: paused.filter((t) => t.fromLastRenewalMs < L).length,
    met: paused.length > 0 && paused.every((t) => !t.firstAnswerIsLeader && t.leaderAnswersAfterWake === 0 && t.leaseWritesAfterTakeover === 0 && t.fromLastRenewalMs >= L),
  },
  partition: {
    demotedAfterCutMs: summary(partition.map((t) => t.demotedAfterCutMs)),
    demotedAfterLastRenewalMs: summary(partition.map((t) => t.demotedAfterLastRenewalMs)),
    takeoverFromLastRenewalMs: summary(partition.map((t) => t.takeoverFromLastRenewalMs)),
    demotionBoundMs: R + D,
    observationAllowanceMs: OBSERVATION_ALLOWANCE_MS,
    laterThanBound: partition.filter((t) => t.demotedAfterLastRenewalMs > R + D + OBSERVATION_ALLOWANCE_MS).length,
    takeoverEarlierThanLease: partition.filter((t) => t.takeoverFromLastRenewalMs < L).length,
    met: partition.length > 0 && partition.every((t) => t.demotedAfterLastRenewalMs <= R + D + OBSERVATION_ALLOWANCE_MS && t.takeoverFromLastRenewalMs >= L),
  },
  twoLeaders: { ...sampling, goal: 'zero rounds with two replicas answering is_leader true', met: sampling.twoLeaderRounds === 0 },
  steady: results[0]?.steady ?? null,
  errors: results.flatMap((r) => r.errors),
  trials: { graceful, crash, paused, partition },
};
process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
