/**
 * What the `portal dev` end-to-end tests share: starting one in a directory
 * of its own and waiting for its replicas, the state file a running dev
 * writes, kubectl against it, and process checks.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';
import { killMentioning } from '../support/processes.ts';
import { kubectlPath } from '../support/tools.ts';
import { SLOW_CHECK, until, untilReady } from '../support/until.ts';

/** `<state-dir>/state.json`, as `portal dev` writes it while it runs (removed when it stops). */
export interface DevState {
  kubeconfig: string;
  apiserver: string;
  replicas: { name: string; pid: number | null; webhook: string; probes: string }[];
}

export async function readState(file: string): Promise<DevState | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as DevState;
  } catch {
    return undefined;
  }
}

/** Waits until state.json lists `count` replicas with a process each. */
export function untilReplicasRunning(stateFile: string, count: number, ms: number): Promise<DevState> {
  return until(`state.json with ${count} running replica(s)`, ms, async () => {
    const s = await readState(stateFile);
    return s && s.replicas.length === count && s.replicas.every((r) => r.pid !== null) ? s : undefined;
  }, SLOW_CHECK);
}

/** Waits until state.json lists `count` replicas with a process each, then until every one answers /readyz 200. */
export async function untilReplicasReady(stateFile: string, count: number, ms: number): Promise<DevState> {
  const state = await untilReplicasRunning(stateFile, count, ms);
  await Promise.all(state.replicas.map((r) => untilReady(r.probes, ms)));
  return state;
}

/** The real kubectl against a dev cluster; never throws (a failure is a non-zero code). */
export function kubectl(kubeconfig: string, args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], { timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
    if (stdin !== undefined) child.stdin?.end(stdin);
  });
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface DevOptions {
  /** Names the test's temporary directory (the mkdtemp prefix after `portal-`). */
  name: string;
  replicas: number;
  /**
   * --policies: a directory; or its files (name → text), written to `<dir>/policies`; or a function
   * that writes one into the test's directory and returns its path.
   */
  policies: string | Readonly<Record<string, string>> | ((dir: string) => Promise<string>);
  /** Flags after the common ones (--replicas, --port 0, --state-dir, --policies, --grace-period 5s, --log-level). */
  flags?: string[];
  /** Default `warn`. */
  logLevel?: string;
  /** How long the replicas may take to be ready; default 90 s. */
  readyMs?: number;
  /**
   * What startDev waits for: `ready` (default) every replica answers /readyz
   * 200; `running` state.json lists every replica with a pid, for tests that
   * kill replicas or wait for a leader themselves and need no more.
   */
  waitFor?: 'ready' | 'running';
  /** Keep only this many last characters of the output (a flood's warnings would be too many); default all. */
  outputTail?: number;
}

export interface Dev {
  /** The test's directory, portal dev's working directory; removed by cleanup(). */
  dir: string;
  stateFile: string;
  /** state.json once every replica was ready (or running: DevOptions.waitFor). */
  state: DevState;
  child: ChildProcess;
  /** What portal dev wrote to stdout and stderr so far. */
  output: () => string;
  /** SIGTERM, then its exit code. */
  stop: () => Promise<number | null>;
  /** SIGTERM if it still runs (SIGKILL after 15 s), what still names the directory killed, then the directory removed. Safe to call twice. */
  cleanup: () => Promise<void>;
}

/**
 * `portal dev` in a new directory (state in `<dir>/state`), resolved once
 * its replicas are ready (or running: DevOptions.waitFor). The caller owns
 * cleanup(); if the replicas are never ready (or dev exits first), it cleans
 * up itself and throws with the output.
 */
export async function startDev(o: DevOptions): Promise<Dev> {
  const dir = await mkdtemp(join(tmpdir(), `portal-${o.name}-`));
  const stateDir = join(dir, 'state');
  let output = '';
  let child: ChildProcess | undefined;
  let exitCode: Promise<number | null> = Promise.resolve(null);
  const cleanup = async (): Promise<void> => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child?.kill('SIGKILL'), 15_000);
      await exitCode;
      clearTimeout(timer);
    }
    killMentioning(dir); // a replica its supervisor could not stop
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const policies = typeof o.policies === 'string' ? o.policies : typeof o.policies === 'function' ? await o.policies(dir) : await writePolicies(dir, o.policies);
    const args = ['dev', '--replicas', String(o.replicas), '--port', '0', '--state-dir', stateDir, '--policies', policies, '--grace-period', '5s', '--log-level', o.logLevel ?? 'warn', ...(o.flags ?? [])];
    const dev = spawn(process.execPath, [join(root, 'bin', 'portal.js'), ...args], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    child = dev;
    const add = (c: Buffer): void => {
      output += c.toString();
      if (o.outputTail !== undefined) output = output.slice(-o.outputTail);
    };
    dev.stdout?.on('data', add);
    dev.stderr?.on('data', add);
    exitCode = new Promise((resolve) => dev.once('exit', (code) => resolve(code)));
    const early = exitCode.then((code) => Promise.reject(new Error(`portal dev exited (${code}) before its replicas were ready`)));
    early.catch(() => undefined);
    const stateFile = join(stateDir, 'state.json');
    const wait = o.waitFor === 'running' ? untilReplicasRunning : untilReplicasReady;
    const state = await Promise.race([wait(stateFile, o.replicas, o.readyMs ?? 90_000), early]);
    const stop = (): Promise<number | null> => {
      dev.kill('SIGTERM');
      return exitCode;
    };
    return { dir, stateFile, state, child: dev, output: () => output, stop, cleanup };
  } catch (err) {
    await cleanup();
    throw withOutput(err, output);
  }
}

/** startDev, cleaned up after the test `t` whatever happens. */
export async function startDevFor(t: TestContext, o: DevOptions): Promise<Dev> {
  const dev = await startDev(o);
  t.after(dev.cleanup);
  return dev;
}

/** Runs `body` against a started `portal dev`; a failure carries the end of its output; cleans up either way. */
export async function withDev<T>(o: DevOptions, body: (dev: Dev) => Promise<T>): Promise<T> {
  const dev = await startDev(o);
  try {
    return await body(dev);
  } catch (err) {
    throw withOutput(err, dev.output());
  } finally {
    await dev.cleanup();
  }
}

async function writePolicies(dir: string, files: Readonly<Record<string, string>>): Promise<string> {
  const policies = join(dir, 'policies');
  await mkdir(policies);
  for (const [file, text] of Object.entries(files)) await writeFile(join(policies, file), text);
  return policies;
}

function withOutput(err: unknown, output: string): unknown {
  if (err instanceof Error) err.message += `\n--- portal dev output ---\n${output.slice(-4000)}`;
  return err;
}
