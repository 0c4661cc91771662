/**
 * `portal dev` runs its replicas as the chart's ServiceAccount under the
 * chart's RBAC (packages/devcluster/src/dev/chart-rbac.ts): the committed render
 * matches `helm template`, and the embedded API server enforces it.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { CHART_RBAC, CHART_RBAC_DENIAL_EVENTS, chartServiceAccount, DENIAL_EVENTS_SET, rbacForReplicas, selectRbac } from '../../packages/devcluster/src/dev/chart-rbac.ts';
import { replicasWriteDenialEvents } from '../../packages/devcluster/src/dev/options.ts';
import { render } from '../chart/helm.ts';
import { caller, withServer } from '../apiserver/helpers.ts';
import { kubectlPath } from '../support/tools.ts';

const run = promisify(execFile);

test('the committed chart RBAC is what helm renders (re-run scripts/gen-dev-rbac.mjs if not)', { timeout: 60_000 }, async () => {
  assert.deepEqual(JSON.parse(JSON.stringify(selectRbac(await render()))), JSON.parse(JSON.stringify(CHART_RBAC)));
  assert.equal(chartServiceAccount().username, 'system:serviceaccount:portal-system:portal');
  // `portal dev --denial-events` grants what an install with denials.events=true grants.
  assert.deepEqual(JSON.parse(JSON.stringify(selectRbac(await render(undefined, [...DENIAL_EVENTS_SET])))), JSON.parse(JSON.stringify(CHART_RBAC_DENIAL_EVENTS)));
  assert.notDeepEqual(CHART_RBAC_DENIAL_EVENTS, CHART_RBAC);
  assert.deepEqual(rbacForReplicas(['portal-0'], { denialEvents: true }).find((o) => o.kind === 'ClusterRole'), CHART_RBAC_DENIAL_EVENTS.find((o) => o.kind === 'ClusterRole'));
  assert.deepEqual(
    [[], ['--denial-events'], ['--denial-events=true'], ['--denial-events=false'], ['--denial-events', '--denial-events=false'], ['--log-level', 'debug']].map(replicasWriteDenialEvents),
    [false, true, true, false, false, false],
  );
});

test("the chart's ServiceAccount, and each portal dev replica, get exactly the chart's permissions on the embedded API server", { timeout: 60_000 }, () => withServer({ authorization: 'RBAC', namespaces: ['default', 'kube-system', 'portal-system'] }, async (s) => {
  const call = caller(s, s.adminToken);
  for (const o of rbacForReplicas(['portal-0'])) {
    const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
    const plural = `${o.kind.toLowerCase()}s`;
    const ns = o.metadata.namespace;
    const path = `${group ? `/apis/${group}/${version}` : '/api/v1'}${ns ? `/namespaces/${ns}` : ''}/${plural}`;
    assert.equal((await call('POST', path, o)).status, 201, `${o.kind} ${o.metadata.name}`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'portal-chart-rbac-'));
  try {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, s.kubeConfig('admin'));
    for (const sa of [chartServiceAccount().username, 'system:serviceaccount:portal-system:portal-0']) {
    const canI = async (...args: string[]): Promise<string> => {
      try {
        return (await run(kubectlPath(), ['--kubeconfig', kubeconfig, 'auth', 'can-i', `--as=${sa}`, ...args], { env: { PATH: process.env['PATH'] ?? '', HOME: dir } })).stdout.trim();
      } catch (e) {
        return String((e as { stdout?: string }).stdout ?? '').trim();
      }
    };
    assert.equal(await canI('list', 'pods', '-A'), 'yes');
    assert.equal(await canI('create', 'pods', '--subresource=eviction', '-n', 'default'), 'yes');
    assert.equal(await canI('update', 'leases', '-n', 'portal-system'), 'yes');
    assert.equal(await canI('update', 'leases', '-n', 'default'), 'no');
    assert.equal(await canI('delete', 'pods', '-n', 'default'), 'no');
    assert.equal(await canI('patch', 'validatingwebhookconfigurations'), 'no');
    assert.equal(await canI('get', 'secrets', '-n', 'portal-system'), 'no');
    // A request the chart does not allow fails with the real message.
    const denied = await run(kubectlPath(), ['--kubeconfig', kubeconfig, 'delete', 'pod', 'x', `--as=${sa}`], { env: { PATH: process.env['PATH'] ?? '', HOME: dir } }).then(() => '', (e: { stderr?: string }) => String(e.stderr));
    assert.match(denied, new RegExp(`pods "x" is forbidden: User "${sa}" cannot delete resource "pods" in API group "" in the namespace "default"`));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}));
