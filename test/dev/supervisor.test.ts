// Supervision backoff: a replica that keeps dying is restarted after
// increasing delays (not a hot loop), and one that stayed up long enough
// starts again from the first delay. The first test drives the real
// `portal dev` with its production backoff (500 ms doubling) and watches the
// pid in state.json; the second drives the Supervisor with short timings so
// the reset (30 s in production) fits in a test.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test, type TestContext } from 'node:test';
import { BACKOFF_INITIAL_MS, Supervisor, type ReplicaState } from '../../packages/devcluster/src/dev/supervisor.ts';
import { until } from '../support/until.ts';
import { alive, startDevFor } from './support.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

async function tempDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'portal-supervisor-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}


async function replicaPid(stateFile: string): Promise<number | undefined> {
  try {
    const s = JSON.parse(await readFile(stateFile, 'utf8')) as { replicas: { pid: number | null }[] };
    return s.replicas[0]?.pid ?? undefined;
  } catch {
    return undefined; // not written yet (written atomically, so never half a file)
  }
}

void test('portal dev: a replica SIGKILLed again and again is restarted with exponential backoff', { timeout: 60_000 }, async (t) => {
  const dev = await startDevFor(t, { name: 'supervisor', replicas: 1, policies: join(root, 'policies'), flags: ['--grace-period', '2s'], waitFor: 'running', readyMs: 30_000 });
  const stateDir = join(dev.dir, 'state');
  const stateFile = dev.stateFile;
  const pids = new Set<number>();
  t.after(() => {
    for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });

  let pid = dev.state.replicas[0]!.pid as number;
  pids.add(pid);
  // Kill the replica as soon as each incarnation appears: the time from the
  // kill to the next pid is the supervisor's restart delay (plus the spawn).
  const gaps: number[] = [];
  for (let i = 0; i < 4; i++) {
    const killedAt = performance.now();
    process.kill(pid, 'SIGKILL');
    const previous = pid;
    pid = await until(`restart ${i + 1}`, 15_000, async () => {
      const p = await replicaPid(stateFile);
      return p !== undefined && p !== previous ? p : undefined;
    });
    gaps.push(performance.now() - killedAt);
    pids.add(pid);
  }
  const expected = gaps.map((_, i) => BACKOFF_INITIAL_MS * 2 ** i); // 500, 1000, 2000, 4000
  const report = `gaps ${gaps.map((g) => Math.round(g)).join(', ')} ms, expected about ${expected.join(', ')}`;
  for (const [i, gap] of gaps.entries()) {
    // Never earlier than the delay (a timer does not fire early); generous slack above for a busy machine.
    assert.ok(gap >= expected[i]! - 20, `restart ${i + 1} came too early: ${report}`);
    assert.ok(gap <= expected[i]! + 3000, `restart ${i + 1} came too late: ${report}`);
  }
  for (let i = 1; i < gaps.length; i++) assert.ok(gaps[i]! > gaps[i - 1]! * 1.4, `delays must grow: ${report}`);

  // The supervisor logged each exit; dev itself is still up and stops cleanly.
  const log = await readFile(join(stateDir, 'logs', 'dev.log'), 'utf8');
  assert.ok(log.split('\n').filter((l) => l.includes('"replica exited"')).length >= 4, log);
  assert.equal(await dev.stop(), 0, dev.output());
  for (const p of pids) assert.equal(alive(p), false, `replica pid ${p} still running`);
});

void test('Supervisor: backoff doubles up to its cap and resets after a replica stayed up', { timeout: 30_000 }, async (t) => {
  const dir = await tempDir(t);
  const script = join(dir, 'replica.mjs');
  // A stand-in replica that runs until killed.
  await writeFile(script, 'setInterval(() => {}, 60_000);\n');
  const changes: { at: number; pid: number | undefined }[] = [];
  const supervisor = new Supervisor({
    nodePath: process.execPath,
    script,
    replicas: [{ name: 'r0', webhookPort: 1, probesPort: 2, args: [], env: {}, logFile: join(dir, 'r0.log') }],
    gracePeriodMs: 2000,
    backoff: { initialMs: 150, maxMs: 2000, resetAfterMs: 1500 },
    onChange: (states: ReplicaState[]) => changes.push({ at: performance.now(), pid: states[0]?.pid }),
  });
  const stop = new AbortController();
  const done = supervisor.start(stop.signal);
  const pids = new Set<number>();
  t.after(async () => {
    stop.abort();
    await done;
    for (const p of pids) if (alive(p)) process.kill(p, 'SIGKILL');
  });

  const current = () => supervisor.states()[0]?.pid;
  /** Kills the running replica; resolves with the delay until a new one was spawned. */
  const killAndTime = async (): Promise<number> => {
    const pid = await until('a running replica', 5000, current);
    pids.add(pid);
    const killedAt = performance.now();
    process.kill(pid, 'SIGKILL');
    const next = await until('the restart', 5000, () => {
      const p = current();
      return p !== undefined && p !== pid ? p : undefined;
    });
    pids.add(next);
    return changes.find((c) => c.pid === next)!.at - killedAt;
  };

  const gaps: number[] = [];
  for (let i = 0; i < 5; i++) gaps.push(await killAndTime());
  const report = `gaps ${gaps.map((g) => Math.round(g)).join(', ')} ms`;
  // 150, 300, 600, 1200, then capped at 2000 (not 2400).
  for (const [i, want] of [150, 300, 600, 1200, 2000].entries()) {
    assert.ok(gaps[i]! >= want - 10 && gaps[i]! <= want + 1000, `restart ${i + 1}: want about ${want} ms; ${report}`);
  }
  assert.equal(supervisor.states()[0]?.restarts, 5);

  // Stays up past resetAfterMs: the next crash is restarted after the first delay again.
  const since = changes.at(-1)!.at;
  await until('the replica to stay up past the reset bound', 5000, () => (performance.now() - since > 1700 ? true : undefined));
  const afterReset = await killAndTime();
  assert.ok(afterReset >= 140 && afterReset < 1000, `after a healthy run the delay starts over at 150 ms, got ${Math.round(afterReset)} ms; ${report}`);
  // And doubles again from there.
  const second = await killAndTime();
  assert.ok(second >= 290 && second < 1500, `then 300 ms, got ${Math.round(second)} ms`);

  stop.abort();
  await done;
  assert.equal(current(), undefined);
  for (const p of pids) assert.equal(alive(p), false, `pid ${p} still running`);
});
