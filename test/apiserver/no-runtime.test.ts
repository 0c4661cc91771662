// `kubectl logs` / `exec` / `attach` against the embedded API server (issue 11
// item 6): a clear "no container runtime" answer instead of a bare NotFound.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { kubectlPath } from '../support/tools.ts';
import { withServer } from './helpers.ts';

function kubectl(kubeconfig: string, dir: string, args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], { env: { PATH: process.env['PATH'] ?? '', HOME: dir }, timeout: 30_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }));
  });
}

void test('kubectl logs, exec and attach say that portal dev has no container runtime', { timeout: 60_000 }, () => withServer({ plainHttp: false }, async (s) => {
  const dir = mkdtempSync(join(tmpdir(), 'portal-noruntime-'));
  try {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, s.kubeConfig('admin'));
    writeFileSync(join(dir, 'p.yaml'), 'apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: app, image: "nginx:1.27"}]\n');
    assert.equal((await kubectl(kubeconfig, dir, ['apply', '-f', join(dir, 'p.yaml')])).code, 0);
    for (const [sub, args] of [['log', ['logs', 'p']], ['exec', ['exec', 'p', '--', 'ls']], ['attach', ['attach', 'p']]] as const) {
      const r = await kubectl(kubeconfig, dir, [...args]);
      assert.equal(r.code, 1, r.out);
      assert.match(r.out, new RegExp(`Error from server \\(BadRequest\\): portal dev has no container runtime: pods/${sub} is not available \\(the Pod "p" is stored and admitted, never run\\)`));
    }
    const missing = await kubectl(kubeconfig, dir, ['logs', 'nope']);
    assert.match(missing.out, /pods "nope" not found/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}));
