/**
 * CEL rules in cluster mode, with real processes: a `portal serve` replica
 * against the embedded API server. A PortalClusterRule with `validate.cel`
 * denies at admission; one whose expression does not compile shows
 * Ready=False / CompileError with the position in its status (written by the
 * leader), in /debug/vars and in `portal_rules_not_ready`, and denies what it
 * matches (fail closed).
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import { DevApiClient } from '../../packages/devcluster/src/dev/api-client.ts';
import { readManifests } from '../../packages/devcluster/src/dev/manifests.ts';
import { debugVars, podReview, readyz, review, root, startServe, until } from './support.ts';

const NS = 'portal-system';
const USER = `system:serviceaccount:${NS}:portal-0`;
const LEASE = ['--lease-duration', '2s', '--renew-deadline', '1500ms', '--retry-period', '500ms'];
const ENV = { POD_NAME: 'portal-0', POD_NAMESPACE: NS };

function celRule(name: string, expression: string): Record<string, unknown> {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalClusterRule',
    metadata: { name },
    spec: {
      match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] },
      validate: {
        message: 'Privileged containers are not allowed.',
        cel: {
          expressions: [{ expression, messageExpression: "'privileged: ' + object.spec.containers.filter(c, c.?securityContext.?privileged.orValue(false)).map(c, c.name).join(', ')" }],
        },
      },
    },
  };
}

interface RuleVars {
  rules?: { key: string; ready: boolean; reason: string; message: string }[];
}

test('cluster mode: CEL rules deny, and a CEL compile error is reported in status, /debug/vars and metrics', async (t) => {
  const api = await startApiServer({ port: 0, namespaces: ['default', 'kube-system', 'kube-public', 'kube-node-lease', NS] });
  t.after(() => api.close());
  const dir = await mkdtemp(join(tmpdir(), 'portal-cel-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, api.kubeConfig(USER), { mode: 0o600 });
  const admin = new DevApiClient(api.url, api.adminToken);
  const { objects: crds, problems } = await readManifests(join(root, 'charts', 'portal', 'crds'), ['CustomResourceDefinition']);
  assert.deepEqual(problems, []);
  for (const crd of crds) await admin.apply(crd);

  const serve = await startServe(t, ['--kubeconfig', kubeconfig, ...LEASE], ENV);
  await until('/readyz 200', 30_000, async () => (await readyz(serve.probes)) === 200);
  const ca = await readFile(serve.caFile);

  await t.test('the API server accepts a validate.cel rule and the replica enforces it', async () => {
    await admin.apply(celRule('cel-no-privileged', 'object.spec.containers.all(c, !c.?securityContext.?privileged.orValue(false))'));
    const denied = await until('the CEL rule to deny', 15_000, async () => {
      const r = await review(serve.webhook, ca, podReview({ privileged: true }));
      return r.allowed ? undefined : r;
    });
    assert.equal(denied.status?.code, 403);
    assert.equal(denied.status?.message, 'cel-no-privileged: Privileged containers are not allowed. [privileged: app]');
    assert.equal((await review(serve.webhook, ca, podReview({ privileged: false }))).allowed, true);
  });

  await t.test('a CEL compile error: Ready=False/CompileError with the position, metric, and fail closed', async () => {
    await admin.apply(celRule('cel-typo', 'object.spec.containers.all(c, c.securityContext.privileged == false) && variables.nope'));
    const vars = await until('the broken rule in /debug/vars', 15_000, async () => {
      const v = (await debugVars(serve.probes)) as RuleVars | undefined;
      return v?.rules?.find((r) => r.key === 'PortalClusterRule/cel-typo');
    });
    assert.equal(vars.ready, false);
    assert.equal(vars.reason, 'CompileError');
    assert.match(vars.message, /spec\.validate\.cel\.expressions\[0\]\.expression: compilation failed: line 1, column 73: undefined variable "variables\.nope"/);

    const metrics = await (await fetch(`${serve.probes}/metrics`)).text();
    assert.match(metrics, /^portal_rules_not_ready 1$/m);

    // The leader writes the status through the status subresource.
    const ready = await until('the status to say CompileError', 20_000, async () => {
      const res = await admin.request('GET', '/apis/portal.dev/v1alpha1/portalclusterrules/cel-typo');
      const conditions = (res.body as { status?: { conditions?: { type: string; status: string; reason: string; message: string }[] } }).status?.conditions;
      return conditions?.find((c) => c.type === 'Ready' && c.reason === 'CompileError');
    });
    assert.equal(ready.status, 'False');
    assert.match(ready.message, /compilation failed: line 1, column 73: undefined variable "variables\.nope"/);

    // It never compiled, so it denies what it matches, even a compliant Pod.
    const r = await review(serve.webhook, ca, podReview({ privileged: false }));
    assert.equal(r.allowed, false);
    assert.match(r.status?.message ?? '', /rule cel-typo could not be evaluated: it has never compiled/);
    assert.equal(serve.child.exitCode, null, 'still running');
    const del = await admin.request('DELETE', '/apis/portal.dev/v1alpha1/portalclusterrules/cel-typo');
    assert.equal(del.status, 200);
  });

  await t.test('a hostile expression (a 10^8-step loop) is a cost error that denies; the replica keeps answering', async () => {
    const hundred = `[${Array.from({ length: 100 }, (_, i) => i).join(',')}]`;
    await admin.apply(celRule('cel-hostile', `${hundred}.all(a, ${hundred}.all(b, ${hundred}.all(c, ${hundred}.all(d, a + b + c + d >= 0))))`));
    const denied = await until('the hostile rule to deny', 15_000, async () => {
      const r = await review(serve.webhook, ca, podReview({ privileged: false }));
      return r.allowed ? undefined : r;
    });
    assert.match(denied.status?.message ?? '', /rule cel-hostile could not be evaluated: validate\.cel\.expressions\[0\] failed: evaluation exceeded the per-expression cost limit/);
    assert.equal(await readyz(serve.probes), 200);
    assert.equal(serve.child.exitCode, null, 'still running');
  });
});
