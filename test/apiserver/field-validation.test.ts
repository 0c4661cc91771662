/**
 * Server-side field validation of built-in kinds (field-validation.ts):
 * kubectl's default (Strict) rejects unknown fields with kube's message,
 * Warn (the server default) warns, Ignore accepts.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { unknownFields } from '../../src/devcluster/apiserver/field-validation.ts';
import { kubectlPath } from '../support/tools.ts';
import { caller, withServer } from './helpers.ts';

const run = promisify(execFile);

test('unknown fields are found at any depth, lists and maps included; known ones (inline, opaque) are not', () => {
  const dep = {
    apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'x', labels: { a: 'b' }, bogus: 1 },
    spec: { replicas: 1, strategy: { rollingUpdate: { maxSurge: '25%' } }, template: { spec: { containers: [{ name: 'c', image: 'i', imagePullPolice: 'Always', resources: { limits: { cpu: '1' } } }] } } },
    status: { conditions: [{ type: 'Available', lastUpdateTime: '2026-01-01T00:00:00Z' }] },
  };
  assert.deepEqual(unknownFields('apps/v1', 'Deployment', dep), ['unknown field "metadata.bogus"', 'unknown field "spec.template.spec.containers[0].imagePullPolice"']);
  assert.deepEqual(unknownFields('v1', 'ConfigMap', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' }, data: { k: 'v' }, binaryData: {} }), []);
  assert.deepEqual(unknownFields('example.com/v1', 'Widget', { spec: { anything: 1 } }), []);
});

test('kubectl create/apply with an unknown field: Strict by default, --validate=warn and =false', { timeout: 60_000 }, () => withServer({}, async (s) => {
  const dir = mkdtempSync(join(tmpdir(), 'portal-fv-'));
  try {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, s.kubeConfig('admin'));
    const opts = { env: { PATH: process.env['PATH'] ?? '', HOME: dir } };
    const k = (...args: string[]): Promise<{ stdout: string; stderr: string }> => run(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], opts);
    const file = join(dir, 'd.yaml');
    writeFileSync(file, 'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - {name: app, image: nginx, imagePullPolice: Always}\n');
    const strict = await k('create', '-f', file).then(() => '', (e: { stderr?: string }) => String(e.stderr));
    assert.match(strict, /Error from server \(BadRequest\): error when creating ".*d\.yaml": Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec\.template\.spec\.containers\[0\]\.imagePullPolice"/);
    const warn = await k('create', '--validate=warn', '-f', file);
    assert.match(warn.stderr, /Warning: unknown field "spec\.template\.spec\.containers\[0\]\.imagePullPolice"/);
    assert.match(warn.stdout, /deployment.apps\/web created/);
    await k('delete', 'deployment', 'web');
    assert.match((await k('create', '--validate=false', '-f', file)).stdout, /created/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}));

test('fieldValidation over HTTP: Warn is the default, a bad value is 400, custom resources are not checked here', { timeout: 30_000 }, () => withServer({}, async (s) => {
  const call = caller(s, s.adminToken);
  const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' }, data: { a: '1' }, extra: true };
  const r = await call('POST', '/api/v1/namespaces/default/configmaps', cm);
  assert.equal(r.status, 201);
  assert.equal(r.headers.get('warning'), '299 - "unknown field \\"extra\\""');
  assert.equal(r.body['extra'], undefined); // dropped, as kube's decoder does
  const bad = await call('POST', '/api/v1/namespaces/default/configmaps?fieldValidation=Loud', { ...cm, metadata: { name: 'd' } });
  assert.equal(bad.status, 400);
  assert.equal(bad.body['message'], 'fieldValidation parameter unsupported: Loud, must be one of Ignore, Warn, Strict');
  const patch = await call('PATCH', '/api/v1/namespaces/default/configmaps/c?fieldValidation=Strict', { data: { b: '2' }, bogus: 1 }, 'application/merge-patch+json');
  assert.equal(patch.status, 400);
  assert.equal(patch.body['message'], 'strict decoding error: unknown field "bogus"');
}));
