// Issue 21 item 6: every benchmark runs, through `npm run bench`'s runner
// (bench/run.ts), with its smallest settings, so a broken bench fails CI.
// Asserts that each ran and printed its report, never its figures (those
// are for docs/benchmarks.md, measured on purpose, with the load noted).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** The smallest settings of each benchmark (its flags, see the head of each bench/*.ts); every bench run.ts knows is here. */
const SMOKE: Record<string, string[]> = {
  engine: ['--seconds', '0.2'],
  vap: ['--seconds', '0.2'],
  // All three sides (ceiling, files mode, cluster mode), one short round each.
  // --cpus 0: the pinned layout (servers on CPU 0, the load generator on the others), with the hand-off floor side.
  admission: ['--rounds', '1', '--open-rounds', '1', '--seconds', '0.5', '--connections', '4', '--rate', '100', '--cpus', '0', '--hop'],
  apiserver: ['--rate', '50', '--seconds', '1'],
  protobuf: ['--ms', '100'],
  apply: ['--n', '20', '--rounds', '1'],
  controllers: ['--pods', '10'],
  audit: ['--pods', '50', '--sample', '10'],
  failover: ['--trials', '1', '--kinds', 'graceful', '--window', '1s'],
  cel: ['--seconds', '0.2'],
  suites: ['--rounds', '1'],
  'cel-conformance': [],
  exceptions: ['--rounds', '1'],
  reports: ['--pods', '50', '--namespaces', '2', '--flush-ms', '1000'],
  incremental: ['--pods', '40', '--namespaces', '2', '--rate', '40'],
  'fair-queue': ['--rounds', '1'],
  accept: ['--rounds', '1', '--queued', '50'],
  'type-check': ['--rounds', '1'],
  'rule-results': ['--rounds', '1'],
  'denial-events': ['--rounds', '1'],
  'rule-check': ['--rules', '2', '--rounds', '1'],
  'rule-churn': ['--cycles', '2', '--keys', '2000', '--old-max', '2000', '--huge', 'false', '--rules', '1', '--quiet', '1'],
};

function runBench(name: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', name, ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }));
  });
}

test('every benchmark run.ts knows has smoke settings here', async () => {
  const help = await runBench('--help', []);
  assert.equal(help.code, 0);
  const listed = [...help.stdout.matchAll(/^ {2}(\S+) /gm)].map((m) => m[1]);
  assert.deepEqual(listed.sort(), Object.keys(SMOKE).sort());
});

for (const [name, args] of Object.entries(SMOKE)) {
  test(`bench ${name} runs with its smallest settings`, { timeout: 900_000 }, async () => {
    const r = await runBench(name, args);
    const tail = r.stderr.split('\n').slice(-30).join('\n');
    assert.equal(r.code, 0, `bench ${name} exited ${r.code}:\n${tail}`);
    const results = JSON.parse(r.stdout) as Record<string, unknown>[];
    assert.equal(results.length, 1);
    const report = results[0]!;
    assert.equal(report.error, undefined, tail);
    assert.ok(Object.keys(report).length > 1, `bench ${name} printed a report: ${r.stdout.slice(0, 200)}`);
    if (name === 'admission') {
      // Issue 21 item 6: all three sides ran, each with its ratio to the ceiling.
      const median = report.median as Record<string, { throughputRatio?: number }>;
      for (const side of ['ceiling', 'hop', 'portal', 'cluster']) assert.equal(typeof median[side]?.throughputRatio, 'number', `admission side ${side}`);
      const setup = report.setup as { cpus?: string; generatorCpus?: string };
      assert.deepEqual([setup.cpus, setup.generatorCpus], ['0', cpus().length > 1 ? Array.from({ length: cpus().length - 1 }, (_, i) => i + 1).join(',') : 'all']);
      // The replicas' main-thread figures from /debug/vars `runtime` (the ceiling has none).
      const main = report.median as Record<string, { openMainThread?: { busyMs?: number } }>;
      for (const side of ['portal', 'cluster']) assert.equal(typeof main[side]?.openMainThread?.busyMs, 'number', `admission side ${side}: main thread`);
    }
  });
}
