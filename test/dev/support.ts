/**
 * What the `portal dev` end-to-end tests share: the state file a running dev
 * writes, waiting for its replicas, kubectl against it, and process checks.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
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

/** Waits until state.json lists `count` replicas with a process each, then until every one answers /readyz 200. */
export async function untilReplicasReady(stateFile: string, count: number, ms: number): Promise<DevState> {
  const state = await until(`state.json with ${count} running replica(s)`, ms, async () => {
    const s = await readState(stateFile);
    return s && s.replicas.length === count && s.replicas.every((r) => r.pid !== null) ? s : undefined;
  }, SLOW_CHECK);
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
