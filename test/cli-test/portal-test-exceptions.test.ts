/**
 * `portal test` with PortalExceptions (issue 18): the cases of
 * test/fixtures/exceptions (the same files test/dev/exceptions.test.ts applies
 * to a `portal dev` cluster), through the real executable.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ROOT, runPortal } from './run-portal.ts';

export const FIXTURES = join(ROOT, 'test', 'fixtures', 'exceptions');

interface Row {
  rule: string;
  namespace: string;
  name: string;
  result: string;
  message: string;
  exception?: string;
}

async function rows(extra: string[] = []): Promise<{ code: number | null; rows: Row[]; stderr: string }> {
  const r = await runPortal(['test', '-p', join(FIXTURES, 'policies'), '-p', join(FIXTURES, 'exceptions'), '-o', 'json', ...extra, join(FIXTURES, 'resources', 'pods.yaml')]);
  return { code: r.code, rows: r.stdout ? (JSON.parse(r.stdout) as Row[]) : [], stderr: r.stderr };
}

const verdict = (rs: Row[], name: string, rule = 'no-privileged'): [string, string | undefined] => {
  const row = rs.find((r) => r.name === name && r.rule === rule);
  assert.ok(row, `a row for ${name} / ${rule}`);
  return [row.result, row.exception];
};

void describe('portal test applies PortalExceptions like the cluster does', () => {
  void it('own namespace and named rule: skip naming the exception; another namespace, another rule, expired: fail', async () => {
    const { code, rows: rs } = await rows();
    assert.equal(code, 1, 'some Pods still fail');
    assert.deepEqual(verdict(rs, 'node-agent-1'), ['skip', 'monitoring/agent']);
    assert.match(rs.find((r) => r.name === 'node-agent-1' && r.rule === 'no-privileged')!.message, /exempted by PortalException monitoring\/agent \(node agent needs host access; ticket OPS-123\)/);
    assert.deepEqual(verdict(rs, 'stray-1'), ['fail', undefined], "other/elsewhere cannot exempt a Pod in monitoring");
    assert.deepEqual(verdict(rs, 'wrong-rule-pod'), ['fail', undefined], 'monitoring/wrong-rule names another rule');
    assert.deepEqual(verdict(rs, 'wrong-rule-pod', 'no-host-network'), ['skip', 'monitoring/wrong-rule']);
    assert.deepEqual(verdict(rs, 'old-agent-1'), ['fail', undefined], 'monitoring/expired expired in 2020');
    // A ValidatingAdmissionPolicy named by the exception: skip too (Portal's audit and reports honour it).
    assert.deepEqual(verdict(rs, 'node-agent-1', 'vap-no-privileged'), ['skip', 'monitoring/agent']);
    assert.deepEqual(verdict(rs, 'stray-1', 'vap-no-privileged'), ['warn', undefined]);
  });

  void it('--now judges expiry: before 2020 the expired exception applies, after 2099 the agent one does not', async () => {
    assert.deepEqual(verdict((await rows(['--now', '2019-12-31T23:59:59Z'])).rows, 'old-agent-1'), ['skip', 'monitoring/expired']);
    assert.deepEqual(verdict((await rows(['--now', '2020-01-01T00:00:00Z'])).rows, 'old-agent-1'), ['fail', undefined], 'expiresAt itself is expired');
    assert.deepEqual(verdict((await rows(['--now', '2099-01-01T00:00:00Z'])).rows, 'node-agent-1'), ['fail', undefined]);
  });

  void it('--exception-namespaces makes other a privileged namespace: its exception then reaches monitoring', async () => {
    assert.deepEqual(verdict((await rows(['--exception-namespaces', 'other'])).rows, 'stray-1'), ['skip', 'other/elsewhere']);
  });

  void it('--max-exception-lifetime refuses exceptions that never expire or live longer', async () => {
    const rs = (await rows(['--max-exception-lifetime', '720h', '--exception-namespaces', 'other'])).rows;
    assert.deepEqual(verdict(rs, 'stray-1'), ['fail', undefined], 'other/elsewhere never expires');
    assert.deepEqual(verdict(rs, 'node-agent-1'), ['fail', undefined], 'monitoring/agent lives until 2099');
  });

  void it('the policyreport output carries the exception property', async () => {
    const r = await runPortal(['test', '-p', join(FIXTURES, 'policies'), '-p', join(FIXTURES, 'exceptions'), '-o', 'policyreport', join(FIXTURES, 'resources', 'pods.yaml')]);
    assert.match(r.stdout, /result: skip\n(.*\n)*?\s+properties:\n\s+exception: monitoring\/agent/);
  });

  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'portal-test-exceptions-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  void it('bad input: an invalid exception, a bad --now, a bad lifetime; exit 2 with every problem', async () => {
    const bad = join(dir, 'bad.yaml');
    await writeFile(
      bad,
      'apiVersion: portal.dev/v1alpha1\nkind: PortalException\nmetadata: {name: x, namespace: monitoring}\nspec:\n  rules: [no-privileged]\n  match: {kinds: [{apiGroups: [""], kinds: [Pod]}], names: ["a*b"]}\n  expiresAt: next week\n  reason: "   "\n',
    );
    const r = await runPortal(['test', '-p', join(FIXTURES, 'policies'), '-p', bad, '--now', 'yesterday', '--max-exception-lifetime', 'forever', join(FIXTURES, 'resources', 'pods.yaml')]);
    assert.equal(r.code, 2, r.stderr);
    for (const expected of [/--now "yesterday" is not an RFC 3339 date-time/, /--max-exception-lifetime "forever" is not a duration/, /PortalException "x" is invalid/, /spec\.match\.names\[0\]/, /spec\.expiresAt: "next week" is not an RFC 3339/, /spec\.reason: say why/]) assert.match(r.stderr, expected);
  });
});
