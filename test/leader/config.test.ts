import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { createKubeClient } from '../../src/kube/client.ts';
import {
  LEADER_ELECTION_DEFAULTS,
  leaderElectionConfig,
  leaderElectionProblems,
  makeIdentity,
  parseGoDuration,
} from '../../src/leader/config.ts';
import { LeaderElector } from '../../src/leader/elector.ts';
import { ErrorCode, isPortalError } from '../../src/observability/errors.ts';
import { silentLogger } from '../../src/observability/logger.ts';

const base = leaderElectionConfig({ leaseNamespace: 'portal' });

test('defaults are client-go-like: 15s / 10s / 2s, lease portal-leader', () => {
  assert.equal(LEADER_ELECTION_DEFAULTS.leaseDurationMs, 15_000);
  assert.equal(LEADER_ELECTION_DEFAULTS.renewDeadlineMs, 10_000);
  assert.equal(LEADER_ELECTION_DEFAULTS.retryPeriodMs, 2_000);
  assert.equal(base.leaseName, 'portal-leader');
  assert.deepEqual(leaderElectionProblems(base, 'x_1'), []);
});

test('validation: leaseDuration > renewDeadline > 1.2 × retryPeriod, all > 0, identity non-empty (all reported)', () => {
  assert.match(leaderElectionProblems({ ...base, leaseDurationMs: 10_000 }, 'x').join(), /lease-duration .* greater than renew-deadline/);
  assert.match(leaderElectionProblems({ ...base, retryPeriodMs: 9000 }, 'x').join(), /1.2 × retry-period/);
  assert.match(leaderElectionProblems({ ...base, retryPeriodMs: 0 }, 'x').join(), /retry-period must be greater than zero/);
  assert.match(leaderElectionProblems(base, '').join(), /identity/);
  const many = leaderElectionProblems({ ...base, leaseDurationMs: -1, renewDeadlineMs: -2, leaseNamespace: '' }, '');
  assert.ok(many.length >= 4, many.join('\n'));
  // Boundary: renewDeadline exactly 1.2 × retryPeriod is rejected (client-go uses >).
  assert.equal(leaderElectionProblems({ ...base, renewDeadlineMs: 2400, retryPeriodMs: 2000 }, 'x').length, 1);
  assert.deepEqual(leaderElectionProblems({ ...base, leaderElect: false, leaseDurationMs: 0 }, 'x'), [], 'not checked when disabled');
});

test('the elector refuses an invalid config with ConfigInvalid', () => {
  const client = createKubeClient({
    kubeconfigYaml: JSON.stringify({
      apiVersion: 'v1',
      clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:1' } }],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }),
    qps: 1,
    burst: 1,
    userAgent: 'test',
  });
  assert.throws(
    () => new LeaderElector({ ...base, renewDeadlineMs: 20_000 }, { client, identity: 'x', logger: silentLogger(), registry: new Registry() }),
    (e: unknown) => isPortalError(e, ErrorCode.ConfigInvalid),
  );
});

test('Go durations', () => {
  assert.equal(parseGoDuration('500ms'), 500);
  assert.equal(parseGoDuration('15s'), 15_000);
  assert.equal(parseGoDuration('1m30s'), 90_000);
  assert.equal(parseGoDuration('1.5s'), 1500);
  assert.equal(parseGoDuration('0'), 0);
  for (const bad of ['', '15', 's', '1x', '1s ms']) assert.throws(() => parseGoDuration(bad), (e: unknown) => isPortalError(e, ErrorCode.ConfigInvalid));
});

test('identity is <name>_<random> and differs per process start', () => {
  const a = makeIdentity('portal-0');
  const b = makeIdentity('portal-0');
  assert.match(a, /^portal-0_[0-9a-f]{8}$/);
  assert.notEqual(a, b);
});
