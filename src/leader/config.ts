/**
 * Leader-election configuration: one defaults object, Go-style duration
 * parsing, and client-go's validation rules (all problems reported at once).
 */
import { randomBytes } from 'node:crypto';
import { parseDuration } from '../util/duration.ts';
import { ErrorCode, PortalError } from '../observability/errors.ts';

export interface LeaderElectionConfig {
  /** false = single-replica mode: this replica leads alone, no Lease. @default true */
  leaderElect: boolean;
  /** @default "portal-leader" */
  leaseName: string;
  /** The install namespace (POD_NAMESPACE). */
  leaseNamespace: string;
  /** How long a candidate waits after last observing a change before taking over. @default 15000 */
  leaseDurationMs: number;
  /** How long a leader keeps retrying a renewal before it gives up. @default 10000 */
  renewDeadlineMs: number;
  /** Pause between attempts. @default 2000 */
  retryPeriodMs: number;
  /** Release the Lease (holder "") when stopped gracefully. @default true */
  releaseOnCancel: boolean;
  /**
   * Subtracted from `last renew sent + leaseDuration` for fencing: covers the
   * time a side effect spends in flight after its check and the drift between
   * replicas' monotonic clocks. @default 10% of leaseDurationMs (1.5 s at 15 s)
   */
  safetyMarginMs?: number;
  /**
   * /livez tolerance on top of leaseDuration before an overdue leader is
   * unhealthy (client-go's HealthzAdaptor timeout). @default 20000
   */
  healthTimeoutMs: number;
}

export const LEADER_ELECTION_DEFAULTS = Object.freeze({
  leaderElect: true,
  leaseName: 'portal-leader',
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
  releaseOnCancel: true,
  healthTimeoutMs: 20_000,
});

/** client-go's JitterFactor for the acquire loop: sleep retryPeriod × (1 + rand × 1.2). */
export const JITTER_FACTOR = 1.2;

export function leaderElectionConfig(
  partial: Partial<LeaderElectionConfig> & Pick<LeaderElectionConfig, 'leaseNamespace'>,
): Readonly<LeaderElectionConfig> {
  return Object.freeze({ ...LEADER_ELECTION_DEFAULTS, ...partial });
}

export function safetyMarginMs(config: Pick<LeaderElectionConfig, 'safetyMarginMs' | 'leaseDurationMs'>): number {
  return config.safetyMarginMs ?? config.leaseDurationMs / 10;
}

/** Every problem with the config (empty when valid). */
export function leaderElectionProblems(config: LeaderElectionConfig, identity: string): string[] {
  const problems: string[] = [];
  if (!config.leaderElect) return problems;
  const positive: Array<[string, number]> = [
    ['lease-duration', config.leaseDurationMs],
    ['renew-deadline', config.renewDeadlineMs],
    ['retry-period', config.retryPeriodMs],
  ];
  for (const [name, value] of positive) {
    if (!(Number.isFinite(value) && value > 0)) problems.push(`${name} must be greater than zero (got ${value}ms)`);
  }
  if (!(config.leaseDurationMs > config.renewDeadlineMs)) {
    problems.push(`lease-duration (${config.leaseDurationMs}ms) must be greater than renew-deadline (${config.renewDeadlineMs}ms)`);
  }
  if (!(config.renewDeadlineMs > JITTER_FACTOR * config.retryPeriodMs)) {
    problems.push(`renew-deadline (${config.renewDeadlineMs}ms) must be greater than ${JITTER_FACTOR} × retry-period (${config.retryPeriodMs}ms)`);
  }
  const margin = safetyMarginMs(config);
  if (!(margin >= 0 && margin < config.leaseDurationMs)) {
    problems.push(`safety margin (${margin}ms) must be >= 0 and less than lease-duration`);
  }
  if (!(config.healthTimeoutMs >= 0)) problems.push('health timeout must be >= 0');
  if (identity.trim() === '') problems.push('identity must not be empty');
  if (config.leaseName.trim() === '') problems.push('lease-name must not be empty');
  if (config.leaseNamespace.trim() === '') problems.push('lease-namespace must not be empty (set POD_NAMESPACE or --lease-namespace)');
  return problems;
}

export function validateLeaderElectionConfig(config: LeaderElectionConfig, identity: string): void {
  const problems = leaderElectionProblems(config, identity);
  if (problems.length > 0) {
    throw new PortalError(ErrorCode.ConfigInvalid, `invalid leader election config: ${problems.join('; ')}`);
  }
}

/**
 * `<POD_NAME or hostname>_<random>`: the random part makes a restarted
 * container a new holder, so its terms get a new epoch (it never inherits the
 * previous incarnation's lease as if it had been renewing it).
 */
export function makeIdentity(podNameOrHostname: string): string {
  return `${podNameOrHostname}_${randomBytes(4).toString('hex')}`;
}

/** Parses a Go duration (`500ms`, `15s`, `1m30s`, `1.5s`) into milliseconds; throws ConfigInvalid naming the text. */
export function parseGoDuration(text: string): number {
  const ms = parseDuration(text.trim());
  if (ms === undefined) throw new PortalError(ErrorCode.ConfigInvalid, `invalid duration "${text}" (use e.g. 500ms, 15s, 1m30s)`);
  return ms;
}
