/**
 * Server-side apply with managedFields (managed-fields.ts) through the real
 * kubectl 1.35: per-manager ownership, 409 conflicts with kube's message,
 * --force-conflicts, pruning; client-side apply keeps working.
 */
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

test('kubectl apply --server-side: ownership, conflicts, --force-conflicts, pruning', { timeout: 90_000 }, () => withServer({}, async (s) => {
  const dir = mkdtempSync(join(tmpdir(), 'portal-ssa-'));
  try {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, s.kubeConfig('admin'));
    const opts = { env: { PATH: process.env['PATH'] ?? '', HOME: dir } };
    const k = async (...args: string[]): Promise<string> => (await run(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], opts)).stdout;
    const fails = (...args: string[]): Promise<string> => run(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], opts).then(
      (r) => { throw new Error(`expected failure, got ${r.stdout}`); }, (e: { stderr?: string }) => String(e.stderr));
    const file = join(dir, 'cm.yaml');
    const write = (data: Record<string, string>): void => writeFileSync(file, `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: ${JSON.stringify(data)}\n`);

    write({ a: '1', b: '2' });
    assert.match(await k('apply', '--server-side', '-f', file), /configmap\/cfg serverside-applied/);
    const got = JSON.parse(await k('get', 'cm', 'cfg', '-o', 'json', '--show-managed-fields')) as { metadata: { managedFields: { manager: string; operation: string; fieldsV1: Record<string, unknown> }[] } };
    const mine = got.metadata.managedFields.find((e) => e.manager === 'kubectl');
    assert.equal(mine?.operation, 'Apply');
    assert.deepEqual(mine?.fieldsV1, { 'f:data': { 'f:a': {}, 'f:b': {} } });

    // Another manager changes .data.a: re-applying the old value conflicts, with kube's message.
    await k('patch', 'cm', 'cfg', '--type', 'merge', '-p', '{"data":{"a":"changed"}}');
    const conflict = await fails('apply', '--server-side', '-f', file);
    assert.match(conflict, /Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: \.data\.a/);
    assert.equal(await k('get', 'cm', 'cfg', '-o', 'jsonpath={.data.a}'), 'changed');
    // Applying the live value is no conflict (shared ownership); forcing takes the field over.
    write({ a: 'changed', b: '2' });
    assert.match(await k('apply', '--server-side', '-f', file), /serverside-applied/);
    write({ a: '1', b: '2' });
    assert.match(await k('apply', '--server-side', '--force-conflicts', '-f', file), /serverside-applied/);
    assert.equal(await k('get', 'cm', 'cfg', '-o', 'jsonpath={.data.a}'), '1');
    const after = JSON.parse(await k('get', 'cm', 'cfg', '-o', 'json', '--show-managed-fields')) as typeof got;
    assert.equal(after.metadata.managedFields.some((e) => e.manager === 'kubectl-patch'), false);

    // Pruning: a field the manager stops applying goes, unless another manager owns it.
    await k('label', 'cm', 'cfg', 'team=x');
    write({ a: '1' });
    await k('apply', '--server-side', '-f', file);
    assert.deepEqual(JSON.parse(await k('get', 'cm', 'cfg', '-o', 'jsonpath={.data}')), { a: '1' });
    assert.equal(await k('get', 'cm', 'cfg', '-o', 'jsonpath={.metadata.labels.team}'), 'x');

    // A second applier of a keyed list item (containers by name) conflicts on the image only.
    const dep = join(dir, 'dep.yaml');
    const deployment = (image: string, replicas: number): string => `apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: ${replicas}\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - {name: app, image: "${image}"}\n`;
    writeFileSync(dep, deployment('nginx:1', 2));
    await k('apply', '--server-side', '-f', dep);
    writeFileSync(dep, deployment('nginx:2', 2));
    const c2 = await fails('apply', '--server-side', '--field-manager=ci', '-f', dep);
    assert.match(c2, /Apply failed with 1 conflict: conflict with "kubectl" using apps\/v1: \.spec\.template\.spec\.containers\[name="app"\]\.image/);

    // Client-side apply still works alongside.
    const cm2 = join(dir, 'cm2.yaml');
    writeFileSync(cm2, 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: csa}\ndata: {k: v}\n');
    assert.match(await k('apply', '-f', cm2), /configmap\/csa created/);
    writeFileSync(cm2, 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: csa}\ndata: {k: v2}\n');
    assert.match(await k('apply', '-f', cm2), /configmap\/csa configured/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}));

test('apply over HTTP: 409 details carry FieldManagerConflict causes; force=true takes ownership', { timeout: 30_000 }, () => withServer({}, async (s) => {
  const call = caller(s, s.adminToken);
  const path = '/api/v1/namespaces/default/configmaps/x';
  const apply = (manager: string, body: string, force = false) =>
    call('PATCH', `${path}?fieldManager=${manager}${force ? '&force=true' : ''}`, body, 'application/apply-patch+yaml');
  assert.equal((await apply('one', 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: "1", b: "1"}\n')).status, 201);
  const r = await apply('two', 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: "2", b: "2"}\n');
  assert.equal(r.status, 409);
  assert.equal(r.body['reason'], 'Conflict');
  assert.equal(r.body['message'], 'Apply failed with 2 conflicts: conflicts with "one" using v1:\n- .data.a\n- .data.b');
  assert.deepEqual((r.body['details'] as Record<string, unknown>)['causes'], [
    { reason: 'FieldManagerConflict', message: 'conflict with "one" using v1', field: '.data.a' },
    { reason: 'FieldManagerConflict', message: 'conflict with "one" using v1', field: '.data.b' },
  ]);
  const f = await apply('two', 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: "2"}\n', true);
  assert.equal(f.status, 200);
  // "one" keeps b (not forced away), "two" owns a.
  assert.deepEqual(f.body['data'], { a: '2', b: '1' });
  const mf = (f.body['metadata'] as Record<string, unknown>)['managedFields'] as { manager: string; fieldsV1: unknown }[];
  assert.deepEqual(mf.map((e) => [e.manager, e.fieldsV1]), [['one', { 'f:data': { 'f:b': {} } }], ['two', { 'f:data': { 'f:a': {} } }]]);
}));
