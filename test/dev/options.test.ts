// `portal dev` flag handling: owned flags, pass-through to replicas, reserved
// flags rejected; and the status line's metric parsing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseDevArgs } from '../../packages/devcluster/src/dev/options.ts';
import { clock, CounterTotals, formatStatus, leaderName, sumCounter, type ReplicaStatus } from '../../packages/devcluster/src/dev/status.ts';

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

void test('the product\'s parser (issue 34 item 3): a refused flag drops only the word right after it; -- ends dev\'s flags; --help=false', () => {
  // The word after --kubeconfig is --help=false (a dev flag), so "x" is not its value and goes to the replicas.
  const refused = parseDevArgs(['--kubeconfig', '--help=false', 'x', '--log-level=debug'], defaults);
  assert.deepEqual(refused.problems, ['--kubeconfig is set by portal dev on each replica; remove it']);
  assert.deepEqual(refused.options.passthrough, ['x', '--log-level=debug']);
  assert.equal(refused.options.help, false);
  const dropped = parseDevArgs(['--pod-name', 'p', '--self-signed=true', '--replicas', '1'], defaults);
  assert.equal(dropped.problems.length, 2);
  assert.deepEqual([dropped.options.passthrough, dropped.options.replicas], [[], 1]);
  // As for every portal command, -- ends the flags: what follows is handed on verbatim (and the replicas refuse it).
  const ended = parseDevArgs(['--port', '0', '--', '--replicas', '3'], defaults);
  assert.deepEqual([ended.problems, ended.options.replicas, ended.options.passthrough], [[], 2, ['--', '--replicas', '3']]);
  assert.equal(parseDevArgs(['--help'], defaults).options.help, true);
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
  assert.equal(clock(new Date(2026, 10, 28, 9, 5, 7)), '09:05:07');
});

const replica = (name: string, o: Partial<ReplicaStatus> = {}): ReplicaStatus => ({ name, ready: true, isLeader: false, leaseHolder: undefined, requests: 0, denials: 0, ...o });

void test('status line: the leader is named by replica name, and only a live process is leader (issue 33 item 7)', () => {
  // The lease holder's identity is mapped to the replica whose current process has it.
  assert.equal(leaderName([replica('portal-0', { identity: 'portal-0_aa', leaseHolder: 'portal-1_bb' }), replica('portal-1', { identity: 'portal-1_bb', leaseHolder: 'portal-1_bb' })]), 'portal-1');
  // portal-1 was SIGKILLed: its Lease is still held (until it expires) by an identity no live process has.
  assert.equal(leaderName([replica('portal-0', { identity: 'portal-0_aa', leaseHolder: 'portal-1_bb' }), replica('portal-1', { ready: false })]), 'none');
  // Restarted: a new identity, the old one still holds the Lease.
  assert.equal(leaderName([replica('portal-0', { identity: 'portal-0_aa', leaseHolder: 'portal-1_bb' }), replica('portal-1', { identity: 'portal-1_cc', leaseHolder: 'portal-1_bb' })]), 'none');
  assert.equal(leaderName([replica('portal-0', { isLeader: true, identity: 'portal-0_aa' })]), 'portal-0');
  assert.equal(leaderName([]), 'none');
});

void test('status line: counters add up across a replica\'s restarts and never go backwards (issue 33 item 7)', () => {
  const totals = new CounterTotals();
  const seen = (pid: number | undefined, requests: number, denials: number, counted = true) => totals.add(replica('portal-0', { requests, denials, counted }), pid);
  assert.deepEqual([seen(100, 5, 1).requests, seen(100, 9, 2).requests], [5, 9]);
  assert.equal(seen(100, 0, 0, false).requests, 9, '/metrics did not answer: the last counts stand');
  assert.equal(seen(undefined, 0, 0, false).requests, 9, 'exited: what it counted stays');
  const restarted = seen(200, 0, 0);
  assert.deepEqual([restarted.requests, restarted.denials], [9, 2], 'the new process starts at 0');
  const later = seen(200, 3, 1);
  assert.deepEqual([later.requests, later.denials], [12, 3]);
  // Another replica is counted on its own.
  assert.equal(totals.add(replica('portal-1', { requests: 4, counted: true }), 300).requests, 4);
});
