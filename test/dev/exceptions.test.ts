// PortalExceptions end to end (issue 18): `portal dev` with two replicas, the
// real kubectl 1.35, the cases of test/fixtures/exceptions (the same files
// test/cli-test/portal-test-exceptions.test.ts gives `portal test`):
// - a privileged Pod is denied, then admitted once an exception in its
//   namespace names the rule, with the audit annotation recorded by the API
//   server (its audit log, as kube-apiserver's audit events);
// - an exception in another namespace (refused at apply: its match names
//   monitoring, out of its reach), one for another rule, an expired one:
//   still denied; `portal test` gives the same verdicts;
// - the report shows skip with the exception (for the ValidatingAdmissionPolicy
//   too, which the API server itself still enforces);
// - an exception that expires: the next admission is judged without it at
//   once, and within seconds (a timer: --audit-interval is an hour) the
//   report flips and the audit action runs once;
// - `kubectl get portalexceptions` shows rules, expiry, exempted count.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { sideApi, sideGet } from '../support/side-api.ts';
import { until } from '../support/until.ts';
import { runPortal } from '../cli-test/run-portal.ts';
import { kubectl, withDev } from './support.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const FIXTURES = join(root, 'test', 'fixtures', 'exceptions');
const WEBHOOK = 'validate.portal.dev';
const LABEL = 'violation.portal.dev/no-privileged';

function privilegedPod(name: string): string {
  return `apiVersion: v1\nkind: Pod\nmetadata:\n  name: ${name}\n  namespace: monitoring\nspec:\n  containers:\n    - name: agent\n      image: nginx:1.27\n      securityContext:\n        privileged: true\n`;
}

/** The fixture's Pods, one manifest each. */
async function fixturePods(): Promise<Map<string, string>> {
  const text = await readFile(join(FIXTURES, 'resources', 'pods.yaml'), 'utf8');
  const out = new Map<string, string>();
  for (const doc of text.split(/^---$/m)) {
    const name = /^ {2}name: (\S+)$/m.exec(doc)?.[1];
    if (name) out.set(name, doc);
  }
  return out;
}

interface Report { scope: { name: string }; results: { policy: string; rule: string; result: string; properties?: Record<string, string> }[] }

async function reports(kubeconfig: string): Promise<Report[]> {
  // One openreports.io Report per object (--report-granularity resource): every result, skips included.
  const r = await kubectl(kubeconfig, ['get', 'reports.openreports.io', '-n', 'monitoring', '-o', 'json']);
  return r.code === 0 ? (JSON.parse(r.stdout) as { items: Report[] }).items : [];
}

async function result(kubeconfig: string, pod: string, policy: string): Promise<{ result: string; exception?: string } | undefined> {
  const r = (await reports(kubeconfig)).find((x) => x.scope.name === pod)?.results.find((x) => x.policy === policy);
  return r ? { result: r.result, ...(r.properties?.['exception'] ? { exception: r.properties['exception'] } : {}) } : undefined;
}

void test('PortalExceptions through portal dev and kubectl: scope, rule, expiry, audit annotation, reports; portal test agrees', { timeout: 300_000 }, async () => {
  const flags = ['--audit-interval', '1h', '--report-granularity', 'resource', '--report-flush', '1s'];
  await withDev({ name: 'dev-exceptions', replicas: 2, policies: join(FIXTURES, 'policies'), flags }, async (dev) => {
    const kc = dev.state.kubeconfig;
    const side = await sideApi(kc);

    for (const f of ['resources/namespaces.yaml', 'policies/vap.yaml']) {
      const r = await kubectl(kc, ['apply', '-f', join(FIXTURES, f)]);
      assert.equal(r.code, 0, r.stderr);
    }
    const pods = await fixturePods();
    const apply = (yaml: string) => kubectl(kc, ['apply', '-f', '-'], yaml);

    // Before any exception: denied by Portal.
    const denied = await apply(pods.get('node-agent-1')!);
    assert.equal(denied.code, 1);
    assert.match(denied.stderr, new RegExp(`admission webhook "${WEBHOOK}" denied the request: no-privileged`));

    // other/elsewhere names monitoring, out of its reach: the webhook for Portal's kinds refuses it
    // (issue 33 item 5); kubectl applies the other documents of the file.
    const applied = await kubectl(kc, ['apply', '-f', join(FIXTURES, 'exceptions', 'exceptions.yaml')]);
    assert.equal(applied.code, 1, applied.stderr);
    assert.match(applied.stderr, /PortalException "elsewhere" is invalid: spec\.match\.namespaces\[0\]: "monitoring" is out of reach: an exception in namespace other exempts only objects in other/);
    assert.equal(applied.stderr.trim().split('\n').length, 1, applied.stderr);
    assert.match(applied.stdout, /portalexception.portal.dev\/agent created/);
    // Both replicas read the exception from their informers; the API server alternates between them.
    const admitted = await until('node-agent-1 admitted through the exception', 30_000, async () => {
      const r = await apply(pods.get('node-agent-1')!);
      return r.code === 0 ? r : undefined;
    });
    assert.match(admitted.stdout, /pod\/node-agent-1 created/);
    // The API server itself still enforces the VAP (a Warn binding): the exception is Portal's, not the API server's.
    assert.match(admitted.stderr, /Warning: Validation failed for ValidatingAdmissionPolicy 'vap-no-privileged'/);
    for (let i = 0; i < 4; i++) {
      // Every replica admits it (the next requests go to both).
      assert.equal((await kubectl(kc, ['apply', '--dry-run=server', '-f', '-'], pods.get('node-agent-1')!)).code, 0);
    }
    const audit = await sideGet<{ verb: string; resource: string; name: string; code: number; annotations?: Record<string, string> }[]>(side, '/_portal/audit');
    const created = audit.find((e) => e.resource === 'pods' && e.verb === 'create' && e.name === 'node-agent-1' && e.code === 201);
    assert.deepEqual(created?.annotations, { [`${WEBHOOK}/portal.dev/exception`]: 'monitoring/agent' }, 'the audit annotation reached the API server');

    // Another namespace's exception, another rule's, an expired one: denied.
    const verdicts = new Map<string, string>([['node-agent-1', 'skip']]);
    for (const name of ['stray-1', 'wrong-rule-pod', 'old-agent-1']) {
      const r = await apply(pods.get(name)!);
      assert.equal(r.code, 1, `${name}: ${r.stdout}`);
      assert.match(r.stderr, /denied the request: no-privileged/);
      verdicts.set(name, 'fail');
    }

    // portal test on the same files gives the same verdicts (skip = admitted, fail = denied).
    const offline = await runPortal(['test', '-p', join(FIXTURES, 'policies'), '-p', join(FIXTURES, 'exceptions'), '-o', 'json', join(FIXTURES, 'resources', 'pods.yaml')]);
    const rows = JSON.parse(offline.stdout) as { rule: string; name: string; result: string; exception?: string }[];
    for (const [name, expected] of verdicts) assert.equal(rows.find((r) => r.rule === 'no-privileged' && r.name === name)?.result, expected, `portal test on ${name}`);

    // The report: skip naming the exception, for the rule and for the VAP.
    await until('the report of node-agent-1', 30_000, async () => (await result(kc, 'node-agent-1', 'no-privileged'))?.result === 'skip');
    assert.deepEqual(await result(kc, 'node-agent-1', 'no-privileged'), { result: 'skip', exception: 'monitoring/agent' });
    await until('the VAP result of node-agent-1', 30_000, async () => (await result(kc, 'node-agent-1', 'vap-no-privileged'))?.result === 'skip');
    assert.deepEqual(await result(kc, 'node-agent-1', 'vap-no-privileged'), { result: 'skip', exception: 'monitoring/agent' });
    const got = await kubectl(kc, ['get', 'pod', 'node-agent-1', '-n', 'monitoring', '-o', 'json']);
    assert.equal((JSON.parse(got.stdout) as { metadata: { labels?: Record<string, string> } }).metadata.labels?.[LABEL], undefined, 'no audit action on an exempted Pod');

    // kubectl get portalexceptions: rules, expiry, exempted count, Ready.
    await until('status of monitoring/agent', 30_000, async () => {
      const r = await kubectl(kc, ['get', 'portalexceptions', '-n', 'monitoring']);
      return /agent\s+\["no-privileged","vap-no-privileged"\]\s+2099-01-01T00:00:00Z\s+1\s+True/.test(r.stdout) ? r : undefined;
    });
    const table = await kubectl(kc, ['get', 'portalexceptions', '-n', 'monitoring']);
    assert.match(table.stdout, /^NAME\s+RULES\s+EXPIRES\s+EXEMPTED\s+READY\s+AGE/m);
    assert.match(table.stdout, /expired\s+\["no-privileged"\]\s+2020-01-01T00:00:00Z\s+\d*\s*False/);

    // Expiry within seconds: an exception that ends 20 s from now.
    const expiresAt = new Date(Date.now() + 20_000);
    const soon = `apiVersion: portal.dev/v1alpha1\nkind: PortalException\nmetadata:\n  name: soon\n  namespace: monitoring\nspec:\n  rules: [no-privileged]\n  match:\n    kinds: [{ apiGroups: [""], kinds: [Pod] }]\n    names: [soon-*]\n  expiresAt: "${expiresAt.toISOString()}"\n  reason: incident fix, until the patch lands\n`;
    assert.equal((await apply(soon)).code, 0);
    await until('soon-1 admitted', 15_000, async () => ((await apply(privilegedPod('soon-1'))).code === 0 ? true : undefined));
    await until('soon-1 reported skip', 15_000, async () => (await result(kc, 'soon-1', 'no-privileged'))?.exception === 'monitoring/soon');
    assert.ok(Date.now() < expiresAt.getTime(), 'set up before the expiry (else this proves nothing)');
    await until('the expiry', 25_000, () => Date.now() >= expiresAt.getTime() + 100);
    const after = await apply(privilegedPod('soon-2'));
    assert.equal(after.code, 1, 'the next admission is judged without the expired exception');
    await until('the report of soon-1 flips', 15_000, async () => (await result(kc, 'soon-1', 'no-privileged'))?.result === 'fail');
    assert.ok(Date.now() - expiresAt.getTime() < 15_000, 'within seconds of expiresAt');
    await until('soon-1 labelled', 15_000, async () => {
      const p = JSON.parse((await kubectl(kc, ['get', 'pod', 'soon-1', '-n', 'monitoring', '-o', 'json'])).stdout) as { metadata: { labels?: Record<string, string> } };
      return p.metadata.labels?.[LABEL] === 'true';
    });
    await until('status: soon expired', 15_000, async () => /soon\s+\["no-privileged"\]\s+\S+\s+0\s+False/.test((await kubectl(kc, ['get', 'portalexceptions', '-n', 'monitoring'])).stdout));
    const labels = (await sideGet<{ verb: string; resource: string; name: string; user: string }[]>(side, '/_portal/audit')).filter(
      (e) => e.resource === 'pods' && e.name === 'soon-1' && e.verb === 'patch' && e.user.startsWith('system:serviceaccount:portal-system:'),
    );
    assert.equal(labels.length, 1, 'the action ran once');
    const events = await kubectl(kc, ['get', 'events', '-n', 'monitoring', '--field-selector', 'involvedObject.name=soon', '-o', 'json']);
    const reasons = (JSON.parse(events.stdout) as { items: { reason: string }[] }).items.map((e) => e.reason).sort();
    assert.deepEqual(reasons, ['Exempting', 'ExemptionEnded']);

    await dev.stop();
  });
});
