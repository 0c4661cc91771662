// Issue 9, item 5: portal_rules_loaded was set once at start and never moved
// in cluster mode. A spawned cluster-mode replica against the embedded API
// server: the gauge follows rules created and deleted in the cluster.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import { DevApiClient } from '../../packages/devcluster/src/dev/api-client.ts';
import { readManifests } from '../../packages/devcluster/src/dev/manifests.ts';
import { readyz, root, startServe, until } from './support.ts';

const NS = 'portal-system';

async function rulesLoaded(probes: string): Promise<number | undefined> {
  try {
    const text = await (await fetch(`${probes}/metrics`, { signal: AbortSignal.timeout(2000) })).text();
    const m = /^portal_rules_loaded (\S+)$/m.exec(text);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

function configMapRule(name: string, namespace?: string): Record<string, unknown> {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: namespace ? 'PortalRule' : 'PortalClusterRule',
    metadata: namespace ? { name, namespace } : { name },
    spec: {
      match: { kinds: [{ apiGroups: [''], kinds: ['ConfigMap'] }] },
      validate: { message: 'data.a is a word', schema: { properties: { data: { properties: { a: { pattern: '^[a-z]+$' } } } } } },
    },
  };
}

test('cluster mode: portal_rules_loaded follows the rules in the cluster', { timeout: 90_000 }, async (t) => {
  const api = await startApiServer({ port: 0, namespaces: ['default', 'kube-system', 'kube-public', 'kube-node-lease', NS] });
  t.after(() => api.close());
  const dir = await mkdtemp(join(tmpdir(), 'portal-rules-loaded-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, api.kubeConfig(`system:serviceaccount:${NS}:portal-0`), { mode: 0o600 });
  const admin = new DevApiClient(api.url, api.adminToken);
  const { objects: crds, problems } = await readManifests(join(root, 'charts', 'portal', 'crds'), ['CustomResourceDefinition']);
  assert.deepEqual(problems, []);
  for (const crd of crds) await admin.apply(crd);
  await admin.apply(configMapRule('first'));

  const s = await startServe(t, ['--kubeconfig', kubeconfig, '--leader-elect=false'], { POD_NAME: 'portal-0', POD_NAMESPACE: NS });
  await until('/readyz 200', 30_000, async () => (await readyz(s.probes)) === 200);
  await until('portal_rules_loaded 1 (the rule that existed at start)', 15_000, async () => (await rulesLoaded(s.probes)) === 1);

  await admin.apply(configMapRule('second'));
  await admin.apply(configMapRule('third', 'default'));
  await until('portal_rules_loaded 3 after two rules are created', 15_000, async () => (await rulesLoaded(s.probes)) === 3);

  const del = await admin.request('DELETE', '/apis/portal.dev/v1alpha1/portalclusterrules/first');
  assert.equal(del.status, 200);
  await until('portal_rules_loaded 2 after one is deleted', 15_000, async () => (await rulesLoaded(s.probes)) === 2);
});
