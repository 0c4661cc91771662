// End to end (issue 9 item 2): the real `kubectl debug` (1.35) against a real
// `portal dev`. kubectl adds the debug container with a strategic merge patch
// on pods/NAME/ephemeralcontainers; the embedded API server sends that UPDATE
// to Portal's webhook (same webhook rules as the chart), and the rules that
// match Pod check it. Before, the server had no such subresource and Portal
// never saw the request.
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { kubectl, withDev } from './support.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

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
  await withDev({ name: 'debug', replicas: 1, policies: join(root, 'policies'), readyMs: 60_000 }, async (dev) => {
    const { dir, state } = dev;
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

    assert.equal(await dev.stop(), 0, dev.output());
  });
});
