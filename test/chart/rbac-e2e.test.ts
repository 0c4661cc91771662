/**
 * The chart's RBAC is enough, end to end: `portal dev` (one replica, which
 * leads) runs the shipped best-practices rules (label actions on Pods and
 * workloads) plus a rule with an `alert` action (the audit ledger), a
 * violating Pod and Deployment are created, and once the audit has labelled
 * them, written rule status, PolicyReports and a ledger shard, every request
 * the replica made (reads and watches included, from the API server's
 * per-user request counts) must be allowed by the ClusterRole and Role the
 * chart renders. The embedded API server does not enforce RBAC, so this
 * evaluates the rendered rules against what Portal really sends.
 */
import assert from 'node:assert/strict';
import { cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { AppsV1Api } from '@kubernetes/client-node';
import { createKubeClient } from '../../src/kube/client.ts';
import { find, render } from './helm.ts';
import { allows, rulesOf, type ResourceRequest } from './rbac.ts';
import { until as untilShared } from '../support/until.ts';
import { sideApi, sideGet } from '../support/side-api.ts';
import { withDev } from '../dev/support.ts';

/** test/support/until.ts, with a failing check counting as "not yet". */
const until = <T>(what: string, ms: number, check: () => Promise<T | undefined>): Promise<T> => untilShared(what, ms, check, { intervalMs: 100, ignoreErrors: true });

const root = fileURLToPath(new URL('../..', import.meta.url));
const INSTALL_NS = 'portal-system';
const ALERT_RULE = `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata:
  name: e2e-alert-unaudited
spec:
  enforcement: Audit
  severity: medium
  category: E2E
  match:
    kinds: [{ apiGroups: [""], kinds: [Pod] }]
  podTemplates: false
  validate:
    message: pods must carry the label audited
    schema:
      type: object
      required: [metadata]
      properties:
        metadata: { type: object, required: [labels], properties: { labels: { type: object, required: [audited] } } }
  audit:
    actions:
      - { type: alert }
`;


/**
 * `METHOD path` (as the API server counts them) to the RBAC request it is
 * authorized as; undefined for non-resource URLs (discovery, OpenAPI,
 * /version), which every authenticated user may read (system:discovery).
 */
function resourceRequest(key: string): ResourceRequest | undefined {
  const [method = '', target = ''] = key.split(' ');
  // A list or watch with a metadata.name field selector is authorized as that name (kube-apiserver's RequestInfo).
  const [path = '', query = ''] = target.split('?');
  const byName = /^fieldSelector=metadata\.name==?(.+)$/.exec(query)?.[1] ?? '';
  const seg = path.split('/').filter(Boolean).map(decodeURIComponent);
  let group: string;
  let rest: string[];
  if (seg[0] === 'api' && seg.length > 2) [group, rest] = ['', seg.slice(2)];
  else if (seg[0] === 'apis' && seg.length > 3) [group, rest] = [seg[1]!, seg.slice(3)];
  else return undefined;
  const [resource = '', name = '', sub = ''] = rest[0] === 'namespaces' && rest.length >= 3 ? rest.slice(2) : rest;
  const verb = method === 'WATCH' ? 'watch'
    : method === 'GET' ? (name ? 'get' : 'list')
      : method === 'POST' ? 'create'
        : method === 'PUT' ? 'update'
          : method === 'PATCH' ? 'patch'
            : method === 'DELETE' ? (name ? 'delete' : 'deletecollection') : method.toLowerCase();
  return { verb, group, resource: sub ? `${resource}/${sub}` : resource, name: name || ((verb === 'list' || verb === 'watch') ? byName : '') };
}

void test('every request a leading replica makes is allowed by the chart\'s RBAC', { timeout: 120_000 }, async (t) => {
  const alerts: unknown[] = [];
  const am: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.method === 'POST') alerts.push(req.url);
      res.writeHead(200, { 'content-type': 'application/json' }).end('[]');
    });
  });
  await new Promise<void>((r) => am.listen(0, '127.0.0.1', r));
  t.after(() => am.close());
  const policies = async (dir: string): Promise<string> => {
    await mkdir(join(dir, 'policies'));
    await cp(join(root, 'policies', 'best-practices'), join(dir, 'policies', 'best-practices'), { recursive: true });
    await writeFile(join(dir, 'policies', 'alert.yaml'), ALERT_RULE);
    return join(dir, 'policies');
  };
  const flags = ['--grace-period', '2s', '--lease-duration', '3s', '--renew-deadline', '2s', '--retry-period', '500ms', '--alertmanager-url', `http://127.0.0.1:${(am.address() as AddressInfo).port}`];
  await withDev({ name: 'rbac-e2e', replicas: 1, policies, flags, waitFor: 'running', readyMs: 60_000 }, async ({ state }) => {
    const kubeconfigYaml = await readFile(state.kubeconfig, 'utf8');
    const kube = createKubeClient({ kubeconfigYaml, qps: 100, burst: 100, userAgent: 'rbac-e2e' });
    const apps = kube.kubeConfig.makeApiClient(AppsV1Api);
    await until('a leader', 30_000, async () => (await kube.coordination.readNamespacedLease({ name: 'portal-leader', namespace: INSTALL_NS })).spec?.holderIdentity || undefined);

    // Violates disallow-latest-tag, require-resource-limits, require-team-label (label actions) and the alert rule.
    const podSpec = { containers: [{ name: 'c', image: 'nginx:latest' }] };
    await until('pod created', 20_000, async () => kube.core.createNamespacedPod({ namespace: 'default', body: { metadata: { name: 'unlabelled' }, spec: podSpec } }));
    await until('deployment created', 20_000, async () =>
      apps.createNamespacedDeployment({
        namespace: 'default',
        body: { metadata: { name: 'web' }, spec: { selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } }, spec: podSpec } } },
      }));

    await until('pod and deployment labelled by the audit', 30_000, async () => {
      const pod = await kube.core.readNamespacedPod({ name: 'unlabelled', namespace: 'default' });
      const deploy = await apps.readNamespacedDeployment({ name: 'web', namespace: 'default' });
      return pod.metadata?.labels?.['violation.portal.dev/require-team-label'] && deploy.metadata?.labels?.['violation.portal.dev/require-team-label'] ? true : undefined;
    });
    await until('the alert recorded in a ledger shard', 30_000, async () =>
      ((await kube.core.listNamespacedConfigMap({ namespace: INSTALL_NS })).items.some((c) => c.metadata?.name?.startsWith('portal-audit-ledger-') && Object.keys(c.data ?? {}).length > 0) ? true : undefined));
    await until('rule status written', 30_000, async () => {
      const r = (await kube.customObjects.getClusterCustomObject({ group: 'portal.dev', version: 'v1alpha1', plural: 'portalclusterrules', name: 'require-team-label' })) as { status?: { violations?: number } };
      return (r.status?.violations ?? 0) >= 2 ? true : undefined;
    });
    await until('a report', 30_000, async () =>
      (((await kube.customObjects.listNamespacedCustomObject({ group: 'openreports.io', version: 'v1alpha1', namespace: 'default', plural: 'reports' })) as { items: unknown[] }).items.length > 0 ? true : undefined));
    assert.ok(alerts.length > 0, 'the alert was sent');

    const requests = await sideGet<Record<string, Record<string, number>>>(await sideApi(state.kubeconfig), '/_portal/requests');
    const replicaUsers = Object.keys(requests).filter((u) => u.startsWith(`system:serviceaccount:${INSTALL_NS}:`));
    assert.equal(replicaUsers.length, 1, `one replica user: ${Object.keys(requests).join(', ')}`);
    const ms = await render();
    const cluster = rulesOf(find(ms, 'ClusterRole'));
    const role = rulesOf(find(ms, 'Role'));
    const denied: string[] = [];
    const checked = new Set<string>();
    for (const key of Object.keys(requests[replicaUsers[0]!]!)) {
      const [, path = ''] = key.split(' ');
      const req = resourceRequest(key);
      if (!req) continue;
      checked.add(`${req.verb} ${req.group}/${req.resource}`);
      const inInstallNs = path.includes(`/namespaces/${INSTALL_NS}/`);
      if (!allows(cluster, req) && !(inInstallNs && allows(role, req))) denied.push(key);
    }
    assert.deepEqual(denied, [], 'requests the chart\'s RBAC would deny');
    // The test saw the writes it is about (so it cannot pass vacuously).
    for (const w of ['watch admissionregistration.k8s.io/validatingwebhookconfigurations', 'patch /pods', 'patch apps/deployments', 'patch portal.dev/portalclusterrules/status', 'create openreports.io/reports', 'patch /configmaps', 'watch /configmaps', 'update coordination.k8s.io/leases']) {
      assert.ok([...checked].some((c) => c === w) || (w === 'patch /configmaps' && checked.has('create /configmaps')), `replica sent ${w}: ${[...checked].sort().join(', ')}`);
    }
  });
});
