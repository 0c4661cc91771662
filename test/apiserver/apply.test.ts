/**
 * Server-side apply with managedFields through the real kubectl 1.35:
 * ownership per manager, conflicts, --force-conflicts, pruning, Update
 * entries, and client-side apply next to it.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { kubectlPath } from '../support/tools.ts';
import { caller, withServer } from './helpers.ts';

const run = promisify(execFile);

interface Entry { manager: string; operation: string; apiVersion: string; time: string; fieldsType: string; fieldsV1: Record<string, unknown>; subresource?: string }

const deployment = (replicas: number, labels: string): string => `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {${labels}}
spec:
  replicas: ${replicas}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: nginx, image: nginx}
`;

test('kubectl apply --server-side: ownership, conflict, --force-conflicts, pruning', { timeout: 90_000 }, () => withServer({}, async (s) => {
  const dir = mkdtempSync(join(tmpdir(), 'portal-ssa-'));
  try {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, s.kubeConfig('kubectl-user'));
    const k = async (...args: string[]) => run(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], { env: { PATH: process.env['PATH'] ?? '', HOME: dir } });
    const fails = async (...args: string[]): Promise<string> => {
      try {
        await k(...args);
      } catch (e) {
        return (e as { stderr: string }).stderr;
      }
      throw new Error(`kubectl ${args.join(' ')} succeeded`);
    };
    const get = async (): Promise<{ metadata: { labels?: Record<string, string>; managedFields: Entry[] }; spec: { replicas: number } }> =>
      JSON.parse((await k('get', 'deployment', 'web', '-o', 'json', '--show-managed-fields')).stdout) as never;
    const file = join(dir, 'd.yaml');

    writeFileSync(file, deployment(1, 'app: web, extra: x'));
    assert.match((await k('apply', '--server-side', '--field-manager=alice', '-f', file)).stdout, /deployment.apps\/web serverside-applied/);
    let d = await get();
    assert.equal(d.metadata.managedFields.length, 1);
    const alice = d.metadata.managedFields[0]!;
    assert.equal(alice.manager, 'alice');
    assert.equal(alice.operation, 'Apply');
    assert.equal(alice.apiVersion, 'apps/v1');
    assert.equal(alice.fieldsType, 'FieldsV1');
    assert.match(alice.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.deepEqual(alice.fieldsV1, {
      'f:metadata': { 'f:labels': { 'f:app': {}, 'f:extra': {} } },
      'f:spec': {
        'f:replicas': {}, 'f:selector': {},
        'f:template': { 'f:metadata': { 'f:labels': { 'f:app': {} } }, 'f:spec': { 'f:containers': { 'k:{"name":"nginx"}': { '.': {}, 'f:image': {}, 'f:name': {} } } } },
      },
    });

    writeFileSync(file, deployment(2, 'app: web'));
    const err = await fails('apply', '--server-side', '--field-manager=bob', '-f', file);
    assert.match(err, /Apply failed with 1 conflict: conflict with "alice": \.spec\.replicas/);
    assert.equal((await get()).spec.replicas, 1);

    await k('apply', '--server-side', '--field-manager=bob', '--force-conflicts', '-f', file);
    d = await get();
    assert.equal(d.spec.replicas, 2);
    const owners = (path: (f: Record<string, Record<string, unknown>>) => unknown): string[] =>
      d.metadata.managedFields.filter((e) => path(e.fieldsV1 as Record<string, Record<string, unknown>>) !== undefined).map((e) => e.manager);
    assert.deepEqual(owners((f) => f['f:spec']?.['f:replicas']), ['bob']);
    assert.deepEqual(owners((f) => (f['f:spec']?.['f:template'] as Record<string, unknown> | undefined)?.['f:spec']).sort(), ['alice', 'bob']);

    // alice stops applying the label `extra`: nobody else owns it, so it goes.
    writeFileSync(file, deployment(1, 'app: web').replace('  replicas: 1\n', ''));
    await k('apply', '--server-side', '--field-manager=alice', '-f', file);
    d = await get();
    assert.deepEqual(d.metadata.labels, { app: 'web' });
    assert.equal(d.spec.replicas, 2, 'bob still owns replicas');

    // bob stops applying the image, which alice also applies: it stays.
    const noImage = deployment(2, 'app: web').replace('{name: nginx, image: nginx}', '{name: nginx}');
    writeFileSync(file, noImage);
    await k('apply', '--server-side', '--field-manager=bob', '-f', file);
    assert.equal(JSON.parse((await k('get', 'deployment', 'web', '-o', 'json')).stdout).spec.template.spec.containers[0].image, 'nginx', 'alice still owns the image');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}));

test('client-side apply records kubectl-client-side-apply; a server-side apply that changes its field conflicts with it', { timeout: 60_000 }, () => withServer({}, async (s) => {
  const dir = mkdtempSync(join(tmpdir(), 'portal-ssa-'));
  try {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, s.kubeConfig('kubectl-user'));
    const k = async (...args: string[]) => run(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], { env: { PATH: process.env['PATH'] ?? '', HOME: dir } });
    const file = join(dir, 'cm.yaml');
    writeFileSync(file, 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {k: v1, gone: x}\n');
    assert.match((await k('apply', '-f', file)).stdout, /configmap\/cm created/);
    writeFileSync(file, 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {k: v2}\n');
    assert.match((await k('apply', '-f', file)).stdout, /configmap\/cm configured/);
    const cm = JSON.parse((await k('get', 'cm', 'cm', '-o', 'json', '--show-managed-fields')).stdout) as { data: Record<string, string>; metadata: { managedFields: Entry[]; annotations: Record<string, string> } };
    assert.deepEqual(cm.data, { k: 'v2' }, 'three-way merge removed the dropped key');
    assert.ok(cm.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration']);
    const csa = cm.metadata.managedFields.find((e) => e.manager === 'kubectl-client-side-apply');
    assert.equal(csa?.operation, 'Update');
    assert.deepEqual((csa?.fieldsV1['f:data'] as Record<string, unknown>)['f:k'], {});
    assert.equal((csa?.fieldsV1['f:data'] as Record<string, unknown>)['f:gone'], undefined, 'a removed field leaves every manager');
    writeFileSync(file, 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {k: v3}\n');
    let stderr = '';
    try {
      await k('apply', '--server-side', '-f', file);
    } catch (e) {
      stderr = (e as { stderr: string }).stderr;
    }
    assert.match(stderr, /Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: \.data\.k/);
    // With --force-conflicts kubectl migrates the client-side apply ownership to its
    // Apply entry (a JSON patch of managedFields) and applies again: `j`, which only
    // the client-side apply had set, is pruned.
    writeFileSync(file, 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {j: x, k: v2}\n');
    await k('apply', '-f', file);
    writeFileSync(file, 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {k: v3}\n');
    await k('apply', '--server-side', '--force-conflicts', '-f', file);
    const migrated = JSON.parse((await k('get', 'cm', 'cm', '-o', 'json', '--show-managed-fields')).stdout) as { data: Record<string, string>; metadata: { managedFields: Entry[] } };
    assert.deepEqual(migrated.data, { k: 'v3' });
    assert.deepEqual(migrated.metadata.managedFields.map((e) => [e.manager, e.operation]), [['kubectl', 'Apply'], ['kubectl-last-applied', 'Apply']]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}));

test('raw HTTP: Update entries name the User-Agent product without fieldManager; the 409 carries FieldManagerConflict causes', { timeout: 30_000 }, () => withServer({}, async (s) => {
  const call = caller(s, s.adminToken);
  const created = await call('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'a' }, data: { x: '1' } }, 'application/json', { 'User-Agent': 'mytool/1.2 (linux)' });
  assert.equal(created.status, 201);
  const entries = (created.body['metadata'] as { managedFields: Entry[] }).managedFields;
  assert.equal(entries.length, 1);
  assert.equal(entries[0]!.manager, 'mytool');
  assert.equal(entries[0]!.operation, 'Update');
  assert.deepEqual(entries[0]!.fieldsV1, { 'f:data': { '.': {}, 'f:x': {} } }, 'the writer that added the map owns it too, as in kube');
  const conflict = await call('PATCH', '/api/v1/namespaces/default/configmaps/a?fieldManager=other', JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a' }, data: { x: '2' } }), 'application/apply-patch+yaml');
  assert.equal(conflict.status, 409);
  assert.equal(conflict.body['reason'], 'Conflict');
  assert.equal(conflict.body['message'], 'Apply failed with 1 conflict: conflict with "mytool" using v1: .data.x');
  assert.deepEqual((conflict.body['details'] as { causes: unknown[] }).causes, [{ reason: 'FieldManagerConflict', message: 'conflict with "mytool" using v1', field: '.data.x' }]);
  const unknown = await call('PATCH', '/api/v1/namespaces/default/configmaps/a?fieldManager=other', JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a' }, bogus: 1 }), 'application/apply-patch+yaml');
  assert.equal(unknown.status, 500);
  assert.equal(unknown.body['message'], 'failed to create typed patch object (default/a; /v1, Kind=ConfigMap): .bogus: field not declared in schema');
  const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { containers: [{ name: 'c', image: 'i', bogus: 1 }] } };
  const nested = await call('PATCH', '/api/v1/namespaces/default/pods/p?fieldManager=other', JSON.stringify(pod), 'application/apply-patch+yaml');
  assert.equal(nested.status, 500);
  assert.equal(nested.body['message'], 'failed to create typed patch object (default/p; /v1, Kind=Pod): .spec.containers[name="c"].bogus: field not declared in schema');
}));

test('client-node: KubernetesObjectApi server-side apply records ownership, conflicts with 409, force takes over', { timeout: 30_000 }, () => withServer({}, async (s) => {
  const config = new k8s.KubeConfig();
  config.loadFromString(s.kubeConfig('client'));
  const api = k8s.KubernetesObjectApi.makeApiClient(config);
  const cm = (v: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'ssa', namespace: 'default' }, data: { k: v } });
  const first = await api.patch(cm('1'), undefined, undefined, 'first', false, k8s.PatchStrategy.ServerSideApply) as k8s.V1ConfigMap;
  assert.deepEqual(first.metadata?.managedFields?.map((e) => [e.manager, e.operation]), [['first', 'Apply']]);
  await assert.rejects(api.patch(cm('2'), undefined, undefined, 'second', false, k8s.PatchStrategy.ServerSideApply), (e: { code: number; body: string }) => {
    assert.equal(e.code, 409);
    assert.match(e.body, /Apply failed with 1 conflict: conflict with \\"first\\": \.data\.k/);
    return true;
  });
  const forced = await api.patch(cm('2'), undefined, undefined, 'second', true, k8s.PatchStrategy.ServerSideApply) as k8s.V1ConfigMap;
  assert.equal(forced.data?.['k'], '2');
  assert.deepEqual(forced.metadata?.managedFields?.map((e) => e.manager), ['second']);
}));

test('kubectl apply --server-side on a custom resource: the CRD schema types the field sets', { timeout: 60_000 }, () => withServer({}, async (s) => {
  const dir = mkdtempSync(join(tmpdir(), 'portal-ssa-'));
  try {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, s.kubeConfig('kubectl-user'));
    const k = async (...args: string[]) => run(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], { env: { PATH: process.env['PATH'] ?? '', HOME: dir } });
    await k('apply', '-f', join(import.meta.dirname, '..', '..', 'charts', 'portal', 'crds', 'portal.dev_portalclusterrules.yaml'));
    const file = join(dir, 'rule.yaml');
    const rule = (enforcement: string, message: string): string => `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata: {name: r1}
spec:
  enforcement: ${enforcement}
  match: {kinds: [{apiGroups: [""], kinds: [Pod]}]}
  validate: {message: ${message}, schema: {type: object, required: [spec]}}
`;
    writeFileSync(file, rule('Deny', 'one'));
    await k('apply', '--server-side', '--field-manager=alice', '-f', file);
    const got = JSON.parse((await k('get', 'portalclusterrule', 'r1', '-o', 'json', '--show-managed-fields')).stdout) as { metadata: { managedFields: Entry[] } };
    const spec = got.metadata.managedFields[0]!.fieldsV1['f:spec'] as Record<string, Record<string, unknown>>;
    assert.deepEqual(spec['f:match'], { 'f:kinds': {} }, 'a list without x-kubernetes-list-type is atomic');
    assert.deepEqual(spec['f:validate'], { 'f:message': {}, 'f:schema': { 'f:required': {}, 'f:type': {} } });
    writeFileSync(file, rule('Warn', 'one'));
    let stderr = '';
    try {
      await k('apply', '--server-side', '--field-manager=bob', '-f', file);
    } catch (e) {
      stderr = (e as { stderr: string }).stderr;
    }
    assert.match(stderr, /Apply failed with 1 conflict: conflict with "alice": \.spec\.enforcement/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}));
