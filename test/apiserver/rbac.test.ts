/**
 * RBAC, impersonation and the review APIs of the embedded API server
 * (access.ts, rbac.ts), through the real kubectl 1.35.
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

function kubectl(kubeconfigYaml: string) {
  const dir = mkdtempSync(join(tmpdir(), 'portal-rbac-'));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, kubeconfigYaml);
  const opts = { env: { PATH: process.env['PATH'] ?? '', HOME: dir }, timeout: 60_000 };
  const k = async (...args: string[]): Promise<string> => (await run(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], opts)).stdout;
  /** stdout + stderr and the exit code, for commands expected to fail (or to answer "no" with exit 1). */
  const any = async (...args: string[]): Promise<{ code: number; out: string }> => {
    try {
      const r = await run(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], opts);
      return { code: 0, out: r.stdout + r.stderr };
    } catch (e) {
      const x = e as { code?: number; stdout?: string; stderr?: string };
      return { code: Number(x.code ?? 1), out: `${x.stdout ?? ''}${x.stderr ?? ''}` };
    }
  };
  return { k, any, done: () => rmSync(dir, { recursive: true, force: true }) };
}

test('RBAC is enforced for users other than the admin, with the real Forbidden message', { timeout: 90_000 }, () => withServer({ authorization: 'RBAC' }, async (s) => {
  const admin = kubectl(s.kubeConfig('admin'));
  const alice = kubectl(s.kubeConfig('alice'));
  try {
    const denied = await alice.any('get', 'pods');
    assert.equal(denied.code, 1);
    assert.match(denied.out, /Error from server \(Forbidden\): pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default"/);
    const named = await alice.any('get', 'deployment', 'web');
    assert.match(named.out, /deployments\.apps "web" is forbidden: User "alice" cannot get resource "deployments" in API group "apps" in the namespace "default"/);
    const cluster = await alice.any('get', 'nodes');
    assert.match(cluster.out, /nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope/);

    // A Role + RoleBinding grants exactly what it says, in its namespace only.
    await admin.k('create', 'role', 'pod-reader', '--verb=get,list,watch', '--resource=pods');
    await admin.k('create', 'rolebinding', 'alice-reads', '--role=pod-reader', '--user=alice');
    assert.equal((await alice.any('get', 'pods')).code, 0);
    assert.match((await alice.any('get', 'pods', '-n', 'kube-system')).out, /cannot list resource "pods" in API group "" in the namespace "kube-system"/);
    assert.match((await alice.any('run', 'x', '--image=nginx')).out, /pods is forbidden: User "alice" cannot create resource "pods" in API group "" in the namespace "default"/);
    // The bootstrap edit role (aggregated from system:aggregate-to-edit and view) through a ClusterRole RoleBinding.
    await admin.k('create', 'rolebinding', 'alice-edit', '--clusterrole=edit', '--user=alice');
    assert.match(await alice.k('run', 'x', '--image=nginx'), /pod\/x created/);
    assert.match((await alice.any('create', 'role', 'r', '--verb=get', '--resource=pods')).out, /roles\.rbac\.authorization\.k8s\.io is forbidden: User "alice" cannot create resource "roles"/);

    // kubectl auth can-i (SelfSubjectAccessReview) and whoami (SelfSubjectReview).
    assert.equal((await alice.any('auth', 'can-i', 'create', 'pods')).out.trim(), 'yes');
    const no = await alice.any('auth', 'can-i', 'create', 'roles');
    assert.equal(no.code, 1);
    assert.equal(no.out.trim(), 'no');
    assert.equal((await alice.any('auth', 'can-i', 'list', 'pods', '-n', 'kube-system')).out.trim(), 'no');
    assert.equal((await admin.any('auth', 'can-i', '*', '*')).out.trim(), 'yes');
    const who = await alice.k('auth', 'whoami', '-o', 'json');
    const info = (JSON.parse(who) as { status: { userInfo: { username: string; groups: string[] } } }).status.userInfo;
    assert.equal(info.username, 'alice');
    assert.ok(info.groups.includes('system:authenticated'));
    const list = await alice.k('auth', 'can-i', '--list');
    assert.match(list, /^pods\s+\[\]\s+\[\]\s+\[create delete deletecollection patch update get list watch\]$/m);
    assert.match(list, /selfsubjectaccessreviews\.authorization\.k8s\.io\s+\[\]\s+\[\]\s+\[create\]/);
  } finally {
    admin.done();
    alice.done();
  }
}));

test('impersonation: --as / --as-group are checked with the impersonate verb and then authorized as the target', { timeout: 90_000 }, () => withServer({ authorization: 'RBAC' }, async (s) => {
  const admin = kubectl(s.kubeConfig('admin'));
  const bob = kubectl(s.kubeConfig('bob'));
  try {
    // The admin may impersonate; the impersonated user is then held to its own RBAC.
    const asCarol = await admin.any('get', 'pods', '--as=carol');
    assert.match(asCarol.out, /pods is forbidden: User "carol" cannot list resource "pods" in API group "" in the namespace "default"/);
    assert.match(await admin.k('auth', 'whoami', '--as=carol', '--as-group=devs'), /carol[\s\S]*devs/);
    await admin.k('create', 'clusterrolebinding', 'devs-view', '--clusterrole=view', '--group=devs');
    assert.equal((await admin.any('get', 'pods', '--as=carol', '--as-group=devs')).code, 0);
    assert.equal((await admin.any('auth', 'can-i', 'list', 'deployments', '--as=carol', '--as-group=devs')).out.trim(), 'yes');
    assert.equal((await admin.any('auth', 'can-i', 'delete', 'deployments', '--as=carol', '--as-group=devs')).out.trim(), 'no');
    // Service account impersonation brings the service account groups.
    const sa = JSON.parse(await admin.k('auth', 'whoami', '--as=system:serviceaccount:default:builder', '-o', 'json')) as { status: { userInfo: { groups: string[] } } };
    assert.deepEqual(sa.status.userInfo.groups.sort(), ['system:authenticated', 'system:serviceaccounts', 'system:serviceaccounts:default']);

    // Bob may not impersonate until a rule grants the verb on that user. (--raw: kubectl's
    // discovery prints a refused impersonation as "unknown", as against kube-apiserver.)
    const pods = '/api/v1/namespaces/default/pods';
    const refused = await bob.any('get', '--raw', pods, '--as=carol');
    assert.match(refused.out, /users "carol" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope/);
    await admin.k('create', 'clusterrole', 'impersonate-carol', '--verb=impersonate', '--resource=users', '--resource-name=carol');
    await admin.k('create', 'clusterrolebinding', 'bob-as-carol', '--clusterrole=impersonate-carol', '--user=bob');
    assert.match((await bob.any('get', 'pods', '--as=carol')).out, /User "carol" cannot list resource "pods"/);
    assert.match((await bob.any('get', '--raw', pods, '--as=dave')).out, /users "dave" is forbidden: User "bob" cannot impersonate resource "users"/);
    assert.match((await bob.any('get', '--raw', pods, '--as=carol', '--as-group=devs')).out, /groups "devs" is forbidden: User "bob" cannot impersonate resource "groups"/);
  } finally {
    admin.done();
    bob.done();
  }
}));

test('SubjectAccessReview answers for another user; reviews are not stored; AlwaysAllow mode still serves them', { timeout: 30_000 }, async () => {
  await withServer({ authorization: 'RBAC' }, async (s) => {
    const call = caller(s, s.adminToken);
    const sar = (user: string, verb: string) => call('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview',
      spec: { user, groups: ['system:authenticated'], resourceAttributes: { namespace: 'default', verb, resource: 'configmaps' } },
    });
    const r = await sar('erin', 'get');
    assert.equal(r.status, 201);
    assert.deepEqual(r.body['status'], { allowed: false });
    const nobody = caller(s, s.addUser('frank'));
    const f = await nobody('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', { spec: { user: 'erin', resourceAttributes: { verb: 'get', resource: 'pods' } } });
    assert.equal(f.status, 403);
    assert.equal(f.body['message'], 'subjectaccessreviews.authorization.k8s.io is forbidden: User "frank" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope');
    // Reviews are create-only and never stored, as in kube-apiserver.
    assert.equal((await call('GET', '/apis/authorization.k8s.io/v1/subjectaccessreviews')).status, 405);
  });
  await withServer({}, async (s) => {
    const who = await caller(s, s.addUser('gina'))('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' });
    assert.equal(who.status, 201);
    assert.equal(((who.body['status'] as Record<string, unknown>)['userInfo'] as Record<string, unknown>)['username'], 'gina');
  });
});
