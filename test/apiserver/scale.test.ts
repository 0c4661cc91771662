// The scale subresource (issue 11 item 6, scale part) through the real
// kubectl 1.35 and raw HTTP: `kubectl scale` on Deployments, ReplicaSets,
// StatefulSets and ReplicationControllers, resourceVersion preconditions,
// and discovery listing `<resource>/scale` as autoscaling/v1 Scale.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { caller, withKubectl, withServer } from './helpers.ts';

const MANIFESTS = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: nginx, image: "nginx:1.27"}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: nginx, image: "nginx:1.27"}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: pg, image: "postgres:17"}]}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: rc}
spec:
  selector: {app: rc}
  template:
    metadata: {labels: {app: rc}}
    spec: {containers: [{name: nginx, image: "nginx:1.27"}]}
`;

void test('kubectl scale changes spec.replicas through the scale subresource', { timeout: 90_000 }, () => withKubectl(async (k, dir) => {
  writeFileSync(join(dir, 'm.yaml'), MANIFESTS);
  await k('apply', '-f', join(dir, 'm.yaml'));
  for (const [resource, name] of [['deployment', 'web'], ['replicaset', 'rs'], ['statefulset', 'db'], ['replicationcontroller', 'rc']] as const) {
    assert.match(await k('scale', `${resource}/${name}`, '--replicas=3'), /scaled/);
    assert.equal(await k('get', resource, name, '-o', 'jsonpath={.spec.replicas}'), '3', resource);
  }
  // --current-replicas is a precondition: a mismatch is refused.
  await assert.rejects(k('scale', 'deployment/web', '--current-replicas=2', '--replicas=5'), /Expected replicas to be 2, was 3/);
  assert.match(await k('scale', 'deployment/web', '--current-replicas=3', '--replicas=0'), /scaled/);
  assert.equal(await k('get', 'deployment', 'web', '-o', 'jsonpath={.spec.replicas} {.metadata.generation}'), '0 3');
  assert.match(await k('get', 'deployment', 'web'), /web\s+0\/0\s/);
}));

void test('scale over HTTP: Scale shape, stale resourceVersion 409, invalid replicas 422, discovery', { timeout: 30_000 }, () => withServer({}, async (s) => {
  const call = caller(s, s.adminToken);
  const created = await call('POST', '/apis/apps/v1/namespaces/default/deployments', {
    metadata: { name: 'web' }, spec: { replicas: 2, selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'a', image: 'a' }] } } },
  });
  assert.equal(created.status, 201);
  const scale = await call('GET', '/apis/apps/v1/namespaces/default/deployments/web/scale');
  assert.equal(scale.status, 200);
  assert.deepEqual({ kind: scale.body['kind'], apiVersion: scale.body['apiVersion'], spec: scale.body['spec'], status: scale.body['status'] },
    { kind: 'Scale', apiVersion: 'autoscaling/v1', spec: { replicas: 2 }, status: { replicas: 0, selector: 'app=web' } });
  const rv = (scale.body['metadata'] as { resourceVersion: string }).resourceVersion;
  const put = await call('PUT', '/apis/apps/v1/namespaces/default/deployments/web/scale', { ...scale.body, spec: { replicas: 4 } });
  assert.equal(put.status, 200);
  assert.equal((put.body['spec'] as { replicas: number }).replicas, 4);
  const stale = await call('PUT', '/apis/apps/v1/namespaces/default/deployments/web/scale', { ...scale.body, metadata: { ...(scale.body['metadata'] as object), resourceVersion: rv }, spec: { replicas: 5 } });
  assert.equal(stale.status, 409);
  const bad = await call('PATCH', '/apis/apps/v1/namespaces/default/deployments/web/scale', { spec: { replicas: -1 } }, 'application/merge-patch+json');
  assert.equal(bad.status, 422);
  assert.equal((await call('GET', '/api/v1/namespaces/default/pods/x/scale')).status, 404);
  const resources = (await call('GET', '/apis/apps/v1')).body['resources'] as { name: string; group?: string; version?: string; kind: string }[];
  assert.deepEqual(resources.find((r) => r.name === 'deployments/scale'), { name: 'deployments/scale', singularName: '', namespaced: true, group: 'autoscaling', version: 'v1', kind: 'Scale', verbs: ['get', 'patch', 'update'] });
}));
