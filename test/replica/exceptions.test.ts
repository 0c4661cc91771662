// Issue 18 through the evaluation workers (adr/0013, adr/0014): a real
// `portal serve --kubeconfig` with two evaluation worker threads admits a
// request that a PortalException covers once the exception is created in the
// cluster, with the audit annotation naming it, and denies it again when the
// exception expires or is deleted. The RuleSet on the main thread only
// replicates the exception to the workers; every decision below is a
// worker's.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import { DevApiClient } from '../../packages/devcluster/src/dev/api-client.ts';
import { readManifests } from '../../packages/devcluster/src/dev/manifests.ts';
import { debugVars, podReview, review, root, startServe, until, type Serve } from './support.ts';

const NS = 'portal-system';
const APP = 'apps';
const USER = `system:serviceaccount:${NS}:portal-0`;
const ENV = { POD_NAME: 'portal-0', POD_NAMESPACE: NS };
const RULE = 'disallow-privileged-containers';
const EXCEPTIONS = `/apis/portal.dev/v1alpha1/namespaces/${APP}/portalexceptions`;

interface Answer {
  allowed: boolean;
  message: string;
  exception: string | undefined;
}

async function decide(s: Serve): Promise<Answer> {
  const r = (await review(s.webhook, await readFile(s.caFile), podReview({ namespace: APP, privileged: true }))) as Awaited<ReturnType<typeof review>> & {
    auditAnnotations?: Record<string, string>;
  };
  return { allowed: r.allowed, message: r.status?.message ?? '', exception: r.auditAnnotations?.['portal.dev/exception'] };
}

function exception(name: string, spec: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalException',
    metadata: { name, namespace: APP },
    spec: { rules: [RULE], match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: ['web'] }, reason: 'node agent; ticket OPS-123', ...spec },
  };
}

test('portal serve: an exception created in the cluster reaches the evaluation workers; expiry and deletion end it', { timeout: 300_000 }, async (t) => {
  const api = await startApiServer({ port: 0, namespaces: ['default', 'kube-system', 'kube-public', 'kube-node-lease', NS, APP] });
  t.after(() => api.close());
  const dir = await mkdtemp(join(tmpdir(), 'portal-replica-exceptions-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, api.kubeConfig(USER), { mode: 0o600 });
  const admin = new DevApiClient(api.url, api.adminToken);
  const { objects: crds } = await readManifests(join(root, 'charts', 'portal', 'crds'), ['CustomResourceDefinition']);
  for (const crd of crds) await admin.apply(crd);
  const { objects: rules } = await readManifests(join(root, 'policies', 'pod-security'), ['PortalClusterRule']);
  const rule = rules.find((o) => o.metadata.name === RULE);
  assert.ok(rule, `the shipped ${RULE} rule`);
  await admin.apply(rule);

  const serve = await startServe(t, ['--kubeconfig', kubeconfig, '--evaluation-workers', '2'], ENV, { ready: true, listenTimeoutMs: 120_000 });
  const denied = await until('the rule to deny', 30_000, async () => {
    const d = await decide(serve);
    return d.allowed ? undefined : d;
  });
  assert.match(denied.message, new RegExp(RULE));
  assert.equal(denied.exception, undefined);

  await t.test('created: admitted, the audit annotation names the exception', async () => {
    const expiresAt = Date.now() + 60_000;
    assert.equal((await admin.request('POST', EXCEPTIONS, exception('agent', { expiresAt: new Date(expiresAt).toISOString() }))).status, 201);
    const admitted = await until('the exception to reach the workers', 30_000, async () => {
      const d = await decide(serve);
      return d.allowed ? d : undefined;
    });
    assert.equal(admitted.exception, `${APP}/agent`);
    // Both workers answer a burst: each holds the exception.
    // Decisions travel in batches (adr/0013): count the items the workers evaluated, not the tasks.
    const completed = async (): Promise<{ workers?: number; batchedItems?: number } | undefined> =>
      ((await debugVars(serve.probes, 5000)) as { admission?: { evaluation?: { workers?: number; batchedItems?: number } } } | undefined)?.admission?.evaluation;
    const before = await completed();
    const burst = await Promise.all(Array.from({ length: 8 }, () => decide(serve)));
    assert.deepEqual(new Set(burst.map((d) => `${d.allowed} ${d.exception}`)), new Set([`true ${APP}/agent`]));
    const after = await completed();
    assert.equal(after?.workers, 2);
    assert.ok((after?.batchedItems ?? 0) - (before?.batchedItems ?? 0) >= 8, `every decision was evaluated by a worker: ${JSON.stringify({ before, after })}`);
  });

  await t.test('deleted: denied again', async () => {
    assert.equal((await admin.request('DELETE', `${EXCEPTIONS}/agent`)).status, 200);
    const d = await until('the deletion to reach the workers', 30_000, async () => {
      const a = await decide(serve);
      return a.allowed ? undefined : a;
    });
    assert.match(d.message, new RegExp(RULE));
    assert.equal(d.exception, undefined);
  });

  await t.test('expired: denied again at expiresAt, without any change to the exception', async () => {
    // Long enough to see it in force on a loaded machine; the check below proves it was.
    const expiresAt = Date.now() + 15_000;
    assert.equal((await admin.request('POST', EXCEPTIONS, exception('brief', { expiresAt: new Date(expiresAt).toISOString() }))).status, 201);
    await until('the exception to be in force', 15_000, async () => ((await decide(serve)).allowed ? true : undefined));
    assert.ok(Date.now() < expiresAt, 'seen in force before it expired (else the test proves nothing)');
    const after = await until('the exception to expire', 30_000, async () => {
      const d = await decide(serve);
      return d.allowed ? undefined : d;
    });
    assert.ok(Date.now() >= expiresAt, 'denied only once expired');
    assert.match(after.message, new RegExp(RULE));
    const burst = await Promise.all(Array.from({ length: 8 }, () => decide(serve)));
    assert.ok(burst.every((d) => !d.allowed), 'expired on every worker');
  });
});
