// `portal dev` flag handling: owned flags, pass-through to replicas, reserved
// flags rejected; and the status line's metric parsing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseDevArgs } from '../../packages/devcluster/src/dev/options.ts';
import { formatStatus, sumCounter } from '../../packages/devcluster/src/dev/status.ts';

const defaults = { chart: '/c', policies: '/p', stateDir: '/s' };

void test('owned flags are parsed, everything else is passed through in order', () => {
  const { options, problems } = parseDevArgs(
    ['--replicas=3', '--lease-duration', '5s', '--port', '0', '--alertmanager-url=http://a:9093', '--state-dir', '/x', '--leader-elect=false', '--grace-period', '2s'],
    defaults,
  );
  assert.deepEqual(problems, []);
  assert.equal(options.replicas, 3);
  assert.equal(options.port, 0);
  assert.equal(options.stateDir, '/x');
  assert.equal(options.gracePeriodMs, 2000);
  assert.equal(options.policies, '/p');
  assert.deepEqual(options.passthrough, ['--lease-duration', '5s', '--alertmanager-url=http://a:9093', '--leader-elect=false']);
});

void test('bad values and flags dev sets itself are all reported at once', () => {
  const { problems } = parseDevArgs(['--replicas', '0', '--port=70000', '--webhook-port', '1', '--tls-cert-file=x', '--policies'], defaults);
  assert.equal(problems.length, 5, problems.join('\n'));
  assert.match(problems.join('\n'), /--webhook-port is set by portal dev/);
  assert.match(problems.join('\n'), /--policies needs a value/);
});

void test('status line sums requests and denials from /metrics', () => {
  const metrics = [
    '# TYPE portal_admission_requests_total counter',
    'portal_admission_requests_total{operation="CREATE",kind="Pod",decision="allow"} 4',
    'portal_admission_requests_total{operation="CREATE",kind="Pod",decision="deny"} 2',
    'portal_admission_requests_total_other 9',
  ].join('\n');
  assert.equal(sumCounter(metrics, 'portal_admission_requests_total'), 6);
  assert.equal(sumCounter(metrics, 'portal_admission_requests_total', ['decision', 'deny']), 2);
  const line = formatStatus('http://127.0.0.1:6443', [
    { name: 'portal-0', ready: true, isLeader: false, leaseHolder: 'portal-1_abc', requests: 6, denials: 2 },
    { name: 'portal-1', ready: false, isLeader: true, leaseHolder: 'portal-1_abc', requests: 1, denials: 0 },
  ]);
  assert.equal(line, 'portal dev: 1/2 replicas ready · leader portal-1 · 7 requests · 2 denied · http://127.0.0.1:6443');
});
