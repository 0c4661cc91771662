// End to end: `portal dev` as a user runs it. Real processes (the dev
// supervisor, two `portal serve` replicas), the real kubectl 1.35, and the
// chain kubectl -> embedded API server -> webhook (HTTPS) -> Portal's denial.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { until, untilReady } from '../support/until.ts';
import { alive, kubectl, readState, startDevFor } from './support.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

const PRIVILEGED = `apiVersion: v1
kind: Pod
metadata:
  name: privileged
spec:
  containers:
    - name: app
      image: nginx:1.27
      securityContext:
        privileged: true
`;
const COMPLIANT = `apiVersion: v1
kind: Pod
metadata:
  name: compliant
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

void test('portal dev: kubectl is denied by Portal through the API server; replicas are supervised; SIGTERM stops everything', { timeout: 120_000 }, async (t) => {
  const dev = await startDevFor(t, { name: 'dev', replicas: 2, policies: join(root, 'policies'), readyMs: 60_000 });
  const { dir, state, stateFile } = dev;
  const pids = new Set<number>(state.replicas.map((r) => r.pid as number));
  assert.ok(dev.output().includes(`portal dev: replicas run Node ${process.version} (${process.execPath})`), dev.output());

  await writeFile(join(dir, 'privileged-pod.yaml'), PRIVILEGED);
  await writeFile(join(dir, 'compliant-pod.yaml'), COMPLIANT);
  const denied = await kubectl(state.kubeconfig, ['apply', '-f', join(dir, 'privileged-pod.yaml')]);
  assert.equal(denied.code, 1, denied.stderr);
  assert.match(denied.stderr, /admission webhook "validate\.portal\.dev" denied the request/);
  assert.match(denied.stderr, /disallow-privileged-containers/);

  const created = await kubectl(state.kubeconfig, ['apply', '-f', join(dir, 'compliant-pod.yaml')]);
  assert.equal(created.code, 0, created.stderr);
  assert.match(created.stdout, /pod\/compliant created/);
  const got = await kubectl(state.kubeconfig, ['get', 'pod', 'compliant', '-o', 'jsonpath={.metadata.name}']);
  assert.equal(got.stdout, 'compliant');

  // A replica that dies is restarted (new pid in state.json) and becomes ready again.
  const victim = state.replicas[0]!;
  process.kill(victim.pid as number, 'SIGKILL');
  const restarted = await until('portal-0 restarted with a new pid', 30_000, async () => {
    const s = await readState(stateFile);
    const r = s?.replicas.find((x) => x.name === victim.name);
    return r?.pid && r.pid !== victim.pid ? r : undefined;
  });
  pids.add(restarted.pid as number);
  await untilReady(restarted.probes, 30_000);

  // SIGTERM stops the replicas and dev itself, and removes state.json.
  assert.equal(await dev.stop(), 0, dev.output());
  for (const pid of pids) assert.equal(alive(pid), false, `replica pid ${pid} still running`);
  assert.equal(await readState(stateFile), undefined);
  assert.match(dev.output(), /replicas ready/);
});

void test('portal dev: usage errors exit 2 before anything starts', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'portal-dev-'));
  try {
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      execFile(process.execPath, [join(root, 'bin', 'portal.js'), 'dev', '--replicas', 'zero', '--kubeconfig', 'x'], { cwd: dir }, (err, _o, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }),
      );
    });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--replicas "zero"/);
    assert.match(r.stderr, /--kubeconfig is set by portal dev/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
