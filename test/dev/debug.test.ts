// End to end (issue 9 item 2): the real `kubectl debug` (1.35) against a real
// `portal dev`. kubectl adds the debug container with a strategic merge patch
// on pods/NAME/ephemeralcontainers; the embedded API server sends that UPDATE
// to Portal's webhook (same webhook rules as the chart), and the rules that
// match Pod check it. Before, the server had no such subresource and Portal
// never saw the request.
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { kubectlPath } from '../support/tools.ts';
import { until as untilShared } from '../support/until.ts';

/** Checks that run kubectl or read another process's files: every 100 ms, not the default 20. */
const until = <T>(what: string, ms: number, check: () => Promise<T | undefined> | T | undefined): Promise<T> => untilShared(what, ms, check, { intervalMs: 100 });

const root = fileURLToPath(new URL('../..', import.meta.url));

interface State { kubeconfig: string; replicas: { pid: number | null; probes: string }[] }


function kubectl(kubeconfig: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], { timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

// Compliant with every Deny rule in policies/ (restricted Pod Security).
const POD = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: { team: platform }
spec:
  securityContext: { runAsNonRoot: true, seccompProfile: { type: RuntimeDefault } }
  containers:
    - name: app
      image: nginx:1.27
      securityContext:
        allowPrivilegeEscalation: false
        capabilities: { drop: [ALL] }
`;

void test('portal dev: kubectl debug --profile=sysadmin is denied naming the rule; a restricted debug container is admitted', { timeout: 120_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'portal-debug-'));
  const stateFile = join(dir, 'state', 'state.json');
  let dev: ChildProcess | undefined;
  let output = '';
  try {
    dev = spawn(process.execPath, [join(root, 'bin', 'portal.js'), 'dev', '--replicas', '1', '--port', '0', '--state-dir', join(dir, 'state'), '--policies', join(root, 'policies'), '--grace-period', '5s', '--log-level', 'warn'], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    dev.stdout?.on('data', (c: Buffer) => (output += c.toString()));
    dev.stderr?.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((resolve) => dev?.once('exit', (code) => resolve(code)));
    const state = await until('state.json with a running replica', 60_000, async () => {
      try {
        const s = JSON.parse(await readFile(stateFile, 'utf8')) as State;
        return s.replicas.length === 1 && s.replicas[0]!.pid !== null ? s : undefined;
      } catch {
        return undefined;
      }
    });
    await until('the replica ready', 60_000, async () => {
      try {
        return (await fetch(`${state.replicas[0]!.probes}/readyz`, { signal: AbortSignal.timeout(1000) })).status === 200 ? true : undefined;
      } catch {
        return undefined;
      }
    });
    await writeFile(join(dir, 'pod.yaml'), POD);
    const created = await kubectl(state.kubeconfig, ['apply', '-f', join(dir, 'pod.yaml')]);
    assert.equal(created.code, 0, created.stderr);

    const denied = await kubectl(state.kubeconfig, ['debug', 'web', '--image=busybox:1.36', '--profile=sysadmin']);
    assert.equal(denied.code, 1, `${denied.stdout}\n${denied.stderr}`);
    assert.match(denied.stderr, /admission webhook "validate\.portal\.dev" denied the request: disallow-privileged-containers: /);
    assert.match(denied.stderr, /spec\.ephemeralContainers\[0\]\.securityContext\.privileged: must be equal to false/);
    const none = await kubectl(state.kubeconfig, ['get', 'pod', 'web', '-o', 'jsonpath={.spec.ephemeralContainers}']);
    assert.equal(none.stdout, '', 'the denied debug container was not added');

    const admitted = await kubectl(state.kubeconfig, ['debug', 'web', '--image=busybox:1.36', '--profile=restricted', '--container=dbg']);
    assert.equal(admitted.code, 0, admitted.stderr);
    const added = await kubectl(state.kubeconfig, ['get', 'pod', 'web', '-o', 'jsonpath={.spec.ephemeralContainers[*].name}']);
    assert.equal(added.stdout, 'dbg');

    dev.kill('SIGTERM');
    assert.equal(await exited, 0, output);
  } finally {
    if (dev && dev.exitCode === null && dev.signalCode === null) dev.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  }
});
