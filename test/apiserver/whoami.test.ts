// `kubectl auth whoami` (SelfSubjectReview, issue 11 item 2's review APIs):
// the real kubectl 1.35 sends it as protobuf and prints the request's user.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { kubectlPath } from '../support/tools.ts';
import { caller, withServer } from './helpers.ts';

const run = promisify(execFile);

void test('kubectl auth whoami shows the user of the kubeconfig and its groups', { timeout: 60_000 }, () => withServer({}, async (s) => {
  const dir = mkdtempSync(join(tmpdir(), 'portal-whoami-'));
  try {
    s.addUser('jane', ['developers']);
    for (const [user, groups] of [['admin', ['system:masters', 'system:authenticated']], ['jane', ['developers', 'system:authenticated']]] as const) {
      const kubeconfig = join(dir, `${user}.kubeconfig`);
      writeFileSync(kubeconfig, s.kubeConfig(user));
      const env = { PATH: process.env['PATH'] ?? '', HOME: dir };
      const table = (await run(kubectlPath(), ['--kubeconfig', kubeconfig, 'auth', 'whoami'], { env })).stdout;
      assert.match(table, new RegExp(`^ATTRIBUTE\\s+VALUE\\nUsername\\s+${user}\\n`));
      const json = JSON.parse((await run(kubectlPath(), ['--kubeconfig', kubeconfig, 'auth', 'whoami', '-o', 'json'], { env })).stdout) as { kind: string; status: { userInfo: { username: string; groups: string[] } } };
      assert.equal(json.kind, 'SelfSubjectReview');
      assert.equal(json.status.userInfo.username, user);
      assert.deepEqual(json.status.userInfo.groups, groups);
    }
    // Discovery lists it (create only), as kube-apiserver does.
    const list = await caller(s, s.adminToken)('GET', '/apis/authentication.k8s.io/v1');
    assert.deepEqual(list.body['resources'], [{ name: 'selfsubjectreviews', singularName: 'selfsubjectreview', namespaced: false, kind: 'SelfSubjectReview', verbs: ['create'] }]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}));
