import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as k8s from '@kubernetes/client-node';
import { withServer } from './helpers.ts';

function kc(kubeconfigYaml: string): k8s.KubeConfig {
  const c = new k8s.KubeConfig();
  c.loadFromString(kubeconfigYaml);
  return c;
}

test('client-node: leases, pods, namespaces, custom objects', () => withServer({}, async (s) => {
  const config = kc(s.kubeConfig('client'));
  const coord = config.makeApiClient(k8s.CoordinationV1Api);
  const core = config.makeApiClient(k8s.CoreV1Api);
  const custom = config.makeApiClient(k8s.CustomObjectsApi);
  const ext = config.makeApiClient(k8s.ApiextensionsV1Api);
  const now = new k8s.V1MicroTime(Date.now());
  const l = await coord.createNamespacedLease({ namespace: 'default', body: { metadata: { name: 'leader' }, spec: { holderIdentity: 'a', leaseDurationSeconds: 15, renewTime: now, acquireTime: now } } });
  assert.equal(l.spec?.holderIdentity, 'a');
  l.spec!.holderIdentity = 'b';
  const l2 = await coord.replaceNamespacedLease({ name: 'leader', namespace: 'default', body: l });
  assert.equal(l2.spec?.holderIdentity, 'b');
  l.spec!.holderIdentity = 'c';
  await assert.rejects(coord.replaceNamespacedLease({ name: 'leader', namespace: 'default', body: l }), (e: k8s.ApiException<string>) => {
    assert.equal(e.code, 409);
    assert.equal((JSON.parse(e.body) as { reason: string }).reason, 'Conflict');
    return true;
  });
  await core.createNamespace({ body: { metadata: { name: 'apps' } } });
  const ns = await core.readNamespace({ name: 'apps' });
  assert.equal(ns.metadata?.labels?.['kubernetes.io/metadata.name'], 'apps');
  await core.createNamespacedPod({ namespace: 'apps', body: { metadata: { name: 'p' }, spec: { containers: [{ name: 'c', image: 'i' }] } } });
  const pods = await core.listNamespacedPod({ namespace: 'apps' });
  assert.equal(pods.items.length, 1);
  await ext.createCustomResourceDefinition({ body: {
    metadata: { name: 'rules.portal.dev' },
    spec: { group: 'portal.dev', scope: 'Cluster', names: { plural: 'rules', singular: 'rule', kind: 'Rule' },
      versions: [{ name: 'v1alpha1', served: true, storage: true, subresources: { status: {} }, schema: { openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true } } }] },
  } });
  const r = await custom.createClusterCustomObject({ group: 'portal.dev', version: 'v1alpha1', plural: 'rules', body: { apiVersion: 'portal.dev/v1alpha1', kind: 'Rule', metadata: { name: 'r1' }, spec: { x: 1 } } }) as { metadata: { generation: number } };
  assert.equal(r.metadata.generation, 1);
  const patched = await custom.patchClusterCustomObject({ group: 'portal.dev', version: 'v1alpha1', plural: 'rules', name: 'r1', body: { spec: { x: 2 } } },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch)) as { metadata: { generation: number } };
  assert.equal(patched.metadata.generation, 2);
  const st = await custom.patchClusterCustomObjectStatus({ group: 'portal.dev', version: 'v1alpha1', plural: 'rules', name: 'r1', body: { status: { ready: true } } },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch)) as { status: unknown; metadata: { generation: number } };
  assert.deepEqual(st.status, { ready: true });
  assert.equal(st.metadata.generation, 2);
  await custom.deleteClusterCustomObject({ group: 'portal.dev', version: 'v1alpha1', plural: 'rules', name: 'r1' });
  await assert.rejects(custom.getClusterCustomObject({ group: 'portal.dev', version: 'v1alpha1', plural: 'rules', name: 'r1' }), (e: k8s.ApiException<string>) => e.code === 404);
}));

test('client-node informer: sees adds and deletes, relists after 410 when history is exceeded', () => withServer({ historyLimit: 3 }, async (s) => {
  const config = kc(s.kubeConfig('informer'));
  const core = config.makeApiClient(k8s.CoreV1Api);
  const informer = k8s.makeInformer(config, '/api/v1/namespaces/default/configmaps', () => core.listNamespacedConfigMap({ namespace: 'default' }));
  const seen = new Set<string>();
  const waitFor = async (cond: () => boolean): Promise<void> => {
    const deadline = Date.now() + 5000;
    while (!cond() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.ok(cond(), 'condition reached before deadline');
  };
  informer.on('add', (o) => seen.add(o.metadata!.name!));
  informer.on('delete', (o) => seen.delete(o.metadata!.name!));
  await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'before' } } });
  await informer.start();
  try {
    await waitFor(() => seen.has('before'));
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'live' } } });
    await waitFor(() => seen.has('live'));
    await core.deleteNamespacedConfigMap({ name: 'before', namespace: 'default' });
    await waitFor(() => !seen.has('before'));
    // Drop the watch, write past the retained history, and let the informer resume: 410 -> relist.
    s.faults.dropWatches({ user: 'informer' });
    for (let i = 0; i < 6; i++) await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: `later-${i}` } } });
    // 7 of ours plus kube-root-ca.crt, which every namespace has.
    await waitFor(() => seen.has('later-5') && informer.list().length === 8);
  } finally {
    await informer.stop();
  }
}));
