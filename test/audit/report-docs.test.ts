/**
 * The one-liners of docs/reports.md, run as written with the real kubectl
 * 1.35 (and jq) against the embedded API server, with the audit writing the
 * reports: a namespace `shop` holding a privileged Pod `web` and a compliant
 * Pod `api`, and the shipped rule disallow-privileged-containers. The `#`
 * lines under a command are what it must print (a header row is compared
 * cell by cell and later rows by their first cell; a line ending in `…`
 * is a prefix). Editing the docs edits this test.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { readManifests } from '../../packages/devcluster/src/dev/manifests.ts';
import type { ReportGranularity } from '../../src/policy/report-api.ts';
import { kubectlPath } from '../support/tools.ts';
import { listReports } from '../support/reports.ts';
import { clusterWithCrds, pod, reportConfig, startReplica, until } from './support/controller-harness.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

interface Step {
  command: string;
  expected: string[];
}

/** The shell blocks of one `###` section under "## One-liners". */
function section(doc: string, heading: string): Step[] {
  const start = doc.indexOf(`### ${heading}`);
  assert.ok(start >= 0, `docs/reports.md has "### ${heading}"`);
  const end = doc.slice(start + 4).search(/^#{2,3} /m);
  const text = end < 0 ? doc.slice(start) : doc.slice(start, start + 4 + end);
  const steps: Step[] = [];
  for (const m of text.matchAll(/^```sh\n([\s\S]*?)^```$/gm)) {
    const lines = (m[1] ?? '').split('\n').filter((l) => l.trim() !== '');
    const command = lines.filter((l) => !l.startsWith('#')).join('\n');
    steps.push({ command, expected: lines.filter((l) => l.startsWith('#')).map((l) => l.replace(/^# ?/, '')) });
  }
  return steps;
}

const cells = (line: string): string[] => line.trim().split(/\s{2,}/);

function mismatch(step: Step, output: string): string | undefined {
  const lines = output.split('\n').map((l) => l.trimEnd());
  const expected = step.expected;
  if (expected.length > 0 && /^[A-Z]+(\s{2,}[A-Z]+)+$/.test(expected[0]!.trim())) {
    if (JSON.stringify(cells(lines[0] ?? '')) !== JSON.stringify(cells(expected[0]!))) return `header ${JSON.stringify(lines[0])}, docs ${JSON.stringify(expected[0])}`;
    for (const row of expected.slice(1)) {
      const want = cells(row).filter((c) => c !== '…');
      // Every cell shown, in order, but the last (the age).
      if (!lines.slice(1).some((l) => JSON.stringify(cells(l).slice(0, want.length)) === JSON.stringify(want))) return `no row ${JSON.stringify(row)}`;
    }
    return undefined;
  }
  for (const e of expected) {
    const ok = e.endsWith('…') ? lines.some((l) => l.startsWith(e.slice(0, -1))) : lines.includes(e);
    if (!ok) return `no line ${JSON.stringify(e)}`;
  }
  return undefined;
}

function sh(command: string, env: NodeJS.ProcessEnv): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile('bash', ['-o', 'pipefail', '-c', command], { env, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, output: stdout + stderr });
    });
  });
}

async function runSection(t: TestContext, granularity: ReportGranularity, heading: string): Promise<void> {
  const { api, admin } = await clusterWithCrds(t);
  await admin.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop' } });
  const { objects } = await readManifests(join(root, 'policies', 'pod-security'), ['PortalClusterRule']);
  const rule = objects.find((o) => o.metadata.name === 'disallow-privileged-containers');
  assert.ok(rule);
  await admin.apply(rule);
  for (const [name, privileged] of [['web', true], ['api', false]] as const) {
    assert.equal((await admin.request('POST', '/api/v1/namespaces/shop/pods', pod(name, privileged, 'shop'))).status, 201);
  }
  const leader = await startReplica(t, api, 'replica-a', { reports: reportConfig({ api: 'openreports', granularity }) });
  leader.grant();
  await until('the reports', 15_000, async () => (await listReports(admin, 'openreports', 'shop')).length === (granularity === 'namespace' ? 1 : 2) && leader.actuator.flusher.backlog === 0);

  const dir = await mkdtemp(join(tmpdir(), 'portal-report-docs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'kubeconfig'), api.kubeConfig('operator'));
  const env: NodeJS.ProcessEnv = { PATH: `${dirname(kubectlPath())}:${process.env['PATH'] ?? ''}`, HOME: dir, KUBECONFIG: join(dir, 'kubeconfig') };
  const doc = await readFile(join(root, 'docs', 'reports.md'), 'utf8');
  const steps = section(doc, heading);
  assert.ok(steps.length >= 2, `${heading}: ${steps.length} commands`);
  for (const step of steps) {
    const r = await sh(step.command, env);
    assert.equal(r.code, 0, `${step.command}\n${r.output}`);
    const why = mismatch(step, r.output);
    assert.equal(why, undefined, `docs/reports.md: ${step.command}: ${why}\n${r.output}`);
  }
}

test('docs/reports.md one-liners, one report per namespace', async (t) => {
  await runSection(t, 'namespace', 'One report per namespace');
});

test('docs/reports.md one-liners, one report per object', async (t) => {
  await runSection(t, 'resource', 'One report per object');
});
