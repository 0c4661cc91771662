/**
 * buildReplica(config) (issue 10 item 4): fastify's factory style — it
 * returns an un-started replica whose Manager shows who starts what; the CLI
 * only listens, starts and exits. In-process, against the embedded API server.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { DEFAULTS, type ServeConfig } from '../../src/config/options.ts';
import { MANAGER_DEFAULTS } from '../../src/manager/manager.ts';
import { buildReplica } from '../../src/manager/replica.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { clusterWithCrds } from '../audit/support/controller-harness.ts';
import { until } from './support.ts';

async function tempDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'portal-build-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

function config(overrides: Partial<ServeConfig>): Readonly<ServeConfig> {
  return Object.freeze({ ...DEFAULTS, webhookPort: 0, probesPort: 0, bindAddress: '127.0.0.1', selfSigned: true, podName: 'portal-0', ...overrides });
}

test('cluster mode: built un-started (no request to the API server); the actuator is leader-only and runs once elected', async (t) => {
  // Portal's CRDs installed (the rule informers must be able to list).
  const { api } = await clusterWithCrds(t);
  const dir = await tempDir(t);
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, api.kubeConfig('portal-0'));
  const cfg = config({ kubeconfig, leaseNamespace: 'default', leaseDuration: 2000, renewDeadline: 1500, retryPeriod: 500 });

  const built = await buildReplica(cfg, { root: silentLogger(), env: {} });
  assert.ok(built.ok, 'built');
  const { replica } = built;
  t.after(() => replica.close());
  assert.equal(replica.mode, 'cluster');
  assert.deepEqual(replica.manager.describe(), {
    groups: { probes: ['probes', 'evaluation-admission', 'evaluation-memory', 'rule-check', 'runtime-stats'], webhook: ['webhook'], informers: ['rule-informers', 'namespace-informer', 'evaluation-audit'], others: ['crd-schemas', 'vap-informers', 'audit-evaluation'] },
    leaderOnly: ['audit-actuator', 'problem-events', 'exception-events'],
    leading: null,
  });
  assert.deepEqual(api.auditLog().filter((e) => e.user === 'portal-0'), [], 'building sends nothing');

  const urls = await replica.listen();
  const stop = new AbortController();
  const running = replica.start(stop.signal);
  t.after(() => {
    stop.abort();
    return running;
  });
  await until('the leader-only group to run', 15_000, () => (replica.manager.describe().leading !== null ? true : undefined));
  const vars = (await (await fetch(`${urls.probes}/debug/vars`)).json()) as { manager: { leaderOnly: string[]; leading: string | null } };
  assert.deepEqual(vars.manager.leaderOnly, ['audit-actuator', 'problem-events', 'exception-events']);
  assert.equal(vars.manager.leading, replica.manager.describe().leading);
  stop.abort();
  await running;
  assert.equal(replica.manager.describe().leading, null, 'the leader group stopped with the Manager');
  await replica.close();
  await replica.close(); // idempotent
});

test('file mode: no election, no leader-only work; bad rules are a build problem, not a crash', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'rule.yaml'), 'apiVersion: portal.dev/v1alpha1\nkind: PortalClusterRule\nmetadata: {name: r}\nspec:\n  enforcement: Deny\n  match: {kinds: [{apiGroups: [""], kinds: [Pod]}]}\n  validate: {message: m, schema: {type: object}}\n');
  const built = await buildReplica(config({ policies: dir }), { root: silentLogger(), env: {} });
  assert.ok(built.ok, built.ok ? '' : built.problems.join('; '));
  t.after(() => built.replica.close());
  assert.equal(built.replica.mode, 'files');
  assert.deepEqual(built.replica.manager.describe().leaderOnly, []);
  assert.deepEqual(built.replica.manager.describe().groups.informers, ['rule-files']);

  const bad = await tempDir(t);
  await writeFile(join(bad, 'rule.yaml'), 'apiVersion: portal.dev/v1alpha1\nkind: PortalClusterRule\nmetadata: {name: r}\nspec: {enforcement: Sometimes}\n');
  const failed = await buildReplica(config({ policies: bad }), { root: silentLogger(), env: {} });
  assert.equal(failed.ok, false);
  assert.equal(!failed.ok && failed.title, 'invalid rules');
});

test('one graceful-shutdown default: the Manager uses --shutdown-grace-period\'s', () => {
  assert.equal(MANAGER_DEFAULTS.gracefulShutdownMs, DEFAULTS.shutdownGracePeriod);
});
