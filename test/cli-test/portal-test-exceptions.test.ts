/**
 * `portal test` with PortalExceptions (issue 18): the cases of
 * test/fixtures/exceptions (the same files test/dev/exceptions.test.ts applies
 * to a `portal dev` cluster), through the real executable, ad hoc and as
 * suites (`exceptions:` and `now`).
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
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

interface ReportDoc {
  apiVersion: string;
  scope?: { name: string };
  results: { rule: string; result: string; properties?: Record<string, string> }[];
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

  for (const [format, apiVersion] of [
    ['policyreport', 'wgpolicyk8s.io/v1alpha2'],
    ['openreports', 'openreports.io/v1alpha1'],
  ] as const) {
    void it(`the ${format} output carries the exception property on the exempted results only`, async () => {
      const r = await runPortal(['test', '-p', join(FIXTURES, 'policies'), '-p', join(FIXTURES, 'exceptions'), '-o', format, join(FIXTURES, 'resources', 'pods.yaml')]);
      const reports = parseAllDocuments(r.stdout).map((d) => d.toJS() as ReportDoc);
      const results = (pod: string): Map<string, [string, string | undefined]> => {
        const report = reports.find((x) => x.scope?.name === pod);
        assert.ok(report, `a report for ${pod}`);
        assert.equal(report.apiVersion, apiVersion);
        return new Map(report.results.map((x) => [x.rule, [x.result, x.properties?.['exception']]]));
      };
      const agent = results('node-agent-1');
      assert.deepEqual(agent.get('no-privileged'), ['skip', 'monitoring/agent']);
      assert.deepEqual(agent.get('vap-no-privileged-warn'), ['skip', 'monitoring/agent'], 'a VAP binding goes through the same exception');
      assert.deepEqual(agent.get('no-host-network'), ['pass', undefined]);
      assert.deepEqual(results('stray-1').get('no-privileged'), ['fail', undefined]);
      assert.deepEqual(results('wrong-rule-pod').get('no-host-network'), ['skip', 'monitoring/wrong-rule']);
    });
  }

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

void describe('suites: exceptions and now', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'portal-suite-exceptions-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** A suite over the fixtures, written in `dir`. */
  async function suite(name: string, fields: string, results: string): Promise<string> {
    const file = join(dir, `${name}.portal-test.yaml`);
    await writeFile(
      file,
      `apiVersion: cli.portal.dev/v1alpha1\nkind: Test\npolicies: [${join(FIXTURES, 'policies')}]\nresources: [${join(FIXTURES, 'resources')}]\n${fields}results:\n${results}`,
    );
    return file;
  }

  void it("the fixtures' suites: the same verdicts as the ad-hoc mode, expiry judged at each suite's now", async () => {
    const r = await runPortal(['test', '--output', 'json', join(FIXTURES, 'suites')]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const out = JSON.parse(r.stdout) as { suites: { name: string; expectations: { name: string; rule: string; got: string; ok: boolean }[] }[] };
    const got = (suiteName: string, pod: string): string | undefined =>
      out.suites.find((s) => s.name === suiteName)?.expectations.find((e) => e.name === pod && e.rule === 'no-privileged')?.got;
    assert.equal(got('exceptions-in-force', 'old-agent-1'), 'skip', 'a second before its expiresAt');
    assert.equal(got('exceptions-expired', 'old-agent-1'), 'fail', 'at its expiresAt');
    // As the ad-hoc mode judges the same files at the same instants.
    assert.deepEqual(verdict((await rows(['--now', '2019-12-31T23:59:59Z'])).rows, 'old-agent-1'), ['skip', 'monitoring/expired']);
    for (const s of out.suites) for (const e of s.expectations) assert.ok(e.ok, `${s.name}: ${e.rule} on ${e.name}`);
  });

  void it('exceptions among the policies apply too; without now the clock decides', async () => {
    const file = await suite(
      'among-policies',
      '',
      '  - {rule: no-privileged, kind: Pod, resources: [node-agent-1], result: fail}\n  - {rule: no-privileged, kind: Pod, resources: [old-agent-1], result: fail}\n',
    );
    const r = await runPortal(['test', file]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const withEx = await suite(
      'among-policies-2',
      '',
      '  - {rule: no-privileged, kind: Pod, resources: [node-agent-1], result: skip}\n  - {rule: no-privileged, kind: Pod, resources: [old-agent-1], result: fail}\n',
    );
    await writeFile(withEx, (await readFile(withEx, 'utf8')).replace(`policies: [${join(FIXTURES, 'policies')}]`, `policies: [${join(FIXTURES, 'policies')}, ${join(FIXTURES, 'exceptions')}]`));
    const r2 = await runPortal(['test', withEx]);
    assert.equal(r2.code, 0, r2.stdout + r2.stderr);
  });

  void it('bad input, each with its line: rules under exceptions, an entry with no exception, a duplicate, an invalid exception, an impossible now', async () => {
    const empty = join(dir, 'empty.yaml');
    await writeFile(empty, '# nothing\n');
    const bad = join(dir, 'bad-exception.yaml');
    await writeFile(bad, 'apiVersion: portal.dev/v1alpha1\nkind: PortalException\nmetadata: {name: y, namespace: monitoring}\nspec:\n  rules: []\n  match: {kinds: [{apiGroups: [""], kinds: [Pod]}]}\n  reason: r\n');
    const file = await suite(
      'bad',
      `exceptions:\n  - ${join(FIXTURES, 'policies')}\n  - ${empty}\n  - ${join(FIXTURES, 'exceptions')}\n  - ${join(FIXTURES, 'exceptions', 'exceptions.yaml')}\n  - ${bad}\n`,
      '  - {rule: no-privileged, kind: Pod, resources: [node-agent-1], result: skip}\n',
    );
    const r = await runPortal(['test', file]);
    assert.equal(r.code, 2, r.stdout + r.stderr);
    for (const expected of [
      /:6:5: exceptions\[0\]: .*holds rules or policies; exceptions lists PortalException manifests only/,
      /:7:5: exceptions\[1\]: .*holds no PortalException/,
      /:9:5: exceptions\[3\]: PortalException monitoring\/agent is also defined in .*exceptions/,
      /:10:5: exceptions\[4\]: .*PortalException "y" is invalid/,
    ]) assert.match(r.stdout + r.stderr, expected);

    const impossible = await suite('impossible-now', 'now: "2026-02-30T00:00:00Z"\n', '  - {rule: no-privileged, kind: Pod, resources: [node-agent-1], result: skip}\n');
    const r2 = await runPortal(['test', impossible]);
    assert.equal(r2.code, 2, r2.stdout + r2.stderr);
    assert.match(r2.stdout + r2.stderr, /:5:6: now is not a valid RFC 3339 time: "2026-02-30T00:00:00Z"/);
  });
});
