// Renders charts/portal with the real Helm binary and checks the invariants an
// operator relies on (issue 6): security context, RBAC, webhook exclusions,
// probes, env, certificates, PDB, anti-affinity, optional pieces (RBAC: rbac.test.ts).
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { test } from 'node:test';
import { chartDir, find, helm, NAMESPACE, RELEASE, render, withValuesFile, type Manifest } from './helm.ts';

interface Container {
  name: string;
  args: string[];
  env: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  ports: { name: string; containerPort: number }[];
  readinessProbe: { httpGet: { path: string; port: string } };
  livenessProbe: { httpGet: { path: string; port: string } };
  securityContext: Record<string, unknown>;
  resources: Record<string, unknown>;
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean; subPath?: string }[];
  lifecycle: { preStop: { sleep: { seconds: number } } };
}
interface PodSpec {
  containers: Container[];
  securityContext: Record<string, unknown>;
  volumes: { name: string; secret?: { secretName: string }; emptyDir?: unknown }[];
  affinity: { podAntiAffinity: Record<string, unknown> };
  topologySpreadConstraints?: unknown[];
  terminationGracePeriodSeconds: number;
  priorityClassName?: string;
  serviceAccountName: string;
}

const podSpec = (ms: Manifest[]): PodSpec => (find(ms, 'Deployment')['spec'] as { template: { spec: PodSpec } }).template.spec;
const container = (ms: Manifest[]): Container => podSpec(ms).containers[0]!;

void test('default render: the objects an install needs, in the release namespace', async () => {
  const ms = await render();
  const kinds = ms.map((m) => `${m.kind}/${m.metadata.name}`).sort();
  assert.deepEqual(kinds, [
    'ClusterRole/portal',
    'ClusterRoleBinding/portal',
    'CustomResourceDefinition/clusterreports.openreports.io',
    'CustomResourceDefinition/reports.openreports.io',
    'Deployment/portal',
    'NetworkPolicy/portal',
    'PodDisruptionBudget/portal',
    'Role/portal',
    'RoleBinding/portal',
    'Secret/portal-tls',
    'Service/portal',
    'ServiceAccount/portal',
    'ValidatingWebhookConfiguration/portal',
  ]);
  for (const m of ms) {
    const clusterScoped = ['ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'ValidatingWebhookConfiguration'];
    if (!clusterScoped.includes(m.kind)) assert.equal(m.metadata.namespace, NAMESPACE, `${m.kind} namespace`);
  }
});

void test('deployment: 2 replicas, downward-API env, probes, args, graceful termination', async () => {
  const ms = await render();
  const deploy = find(ms, 'Deployment');
  assert.equal((deploy['spec'] as { replicas: number }).replicas, 2);
  const c = container(ms);
  assert.equal(c.args[0], 'serve');
  for (const flag of ['--webhook-port=9443', '--probes-port=8080', '--tls-cert-file=/etc/portal/tls/tls.crt', '--tls-key-file=/etc/portal/tls/tls.key', '--lease-name=portal-leader', '--lease-duration=15s', '--renew-deadline=10s', '--retry-period=2s', '--shutdown-grace-period=20s']) {
    assert.ok(c.args.includes(flag), `args contain ${flag}: ${c.args.join(' ')}`);
  }
  const env = Object.fromEntries(c.env.map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath ?? e.value]));
  assert.equal(env['POD_NAME'], 'metadata.name');
  assert.equal(env['POD_NAMESPACE'], 'metadata.namespace');
  assert.deepEqual(c.readinessProbe.httpGet, { path: '/readyz', port: 'probes' });
  assert.deepEqual(c.livenessProbe.httpGet, { path: '/livez', port: 'probes' });
  assert.deepEqual(c.ports.map((p) => [p.name, p.containerPort]), [['webhook', 9443], ['probes', 8080]]);
  const spec = podSpec(ms);
  // The kubelet must not kill a replica before it has slept (endpoints drain)
  // and shut down gracefully (Lease released).
  assert.ok(spec.terminationGracePeriodSeconds >= c.lifecycle.preStop.sleep.seconds + 20);
  assert.ok(c.resources['requests'] && c.resources['limits']);
  assert.equal(spec.priorityClassName, undefined);
  assert.equal(spec.serviceAccountName, 'portal');
});

// The V8 heap as NODE_OPTIONS caps it (old generation + a young generation of 3 semi-spaces) stays inside
// the container's memory limit; without the semi-space cap V8 sized the young generation from the old cap
// (64 MiB semi-spaces at 384), past a 512Mi limit (docs/benchmarks.md, "Session 12").
void test('deployment: NODE_OPTIONS caps the old and the young generation inside the memory limit', async () => {
  const heapFlags = (ms: Manifest[]): string | undefined => container(ms).env.find((e) => e.name === 'NODE_OPTIONS')?.value;
  for (const [limit, mib] of [[undefined, 512], ['1Gi', 1024], ['300Mi', 300]] as const) {
    const flags = heapFlags(await render(limit === undefined ? undefined : { resources: { limits: { memory: limit } } }));
    const old = Number(/--max-old-space-size=(\d+)/.exec(flags ?? '')?.[1]);
    const semi = Number(/--max-semi-space-size=(\d+)/.exec(flags ?? '')?.[1]);
    assert.equal(old, Math.floor((mib * 3) / 4), `old generation at 75% of ${mib} MiB: ${flags}`);
    assert.equal(semi, 16, `semi-space cap: ${flags}`);
    assert.ok(old + 3 * semi < mib, `V8 heap ${old} + 3 x ${semi} MiB fits in ${mib} MiB`);
  }
  // No limit: no cap either (V8 sizes the heap from the node's memory).
  assert.equal(heapFlags(await render({ resources: { limits: null } })), undefined);
});

void test('deployment: restricted security context and a writable /tmp only', async () => {
  const ms = await render();
  const spec = podSpec(ms);
  const c = container(ms);
  assert.equal(spec.securityContext['runAsNonRoot'], true);
  assert.deepEqual(spec.securityContext['seccompProfile'], { type: 'RuntimeDefault' });
  assert.equal(c.securityContext['allowPrivilegeEscalation'], false);
  assert.equal(c.securityContext['readOnlyRootFilesystem'], true);
  assert.equal(c.securityContext['runAsNonRoot'], true);
  assert.notEqual(c.securityContext['runAsUser'], 0);
  assert.deepEqual(c.securityContext['capabilities'], { drop: ['ALL'] });
  assert.deepEqual(c.securityContext['seccompProfile'], { type: 'RuntimeDefault' });
  const mounts = Object.fromEntries(c.volumeMounts.map((m) => [m.name, m]));
  assert.equal(mounts['tmp']?.mountPath, '/tmp');
  assert.equal(mounts['tls']?.mountPath, '/etc/portal/tls');
  // subPath mounts are never refreshed by the kubelet: certificate rotation needs a directory mount.
  assert.equal(mounts['tls']?.subPath, undefined);
  const volumes = Object.fromEntries(spec.volumes.map((v) => [v.name, v]));
  assert.equal(volumes['tls']?.secret?.secretName, 'portal-tls');
  assert.ok(volumes['tmp']?.emptyDir);
});

void test('webhook: fail closed, no side effects, short timeout, self-lockout exclusions', async () => {
  const ms = await render({ webhook: { excludedNamespaces: ['monitoring'] } });
  const [hook, ...rest] = find(ms, 'ValidatingWebhookConfiguration')['webhooks'] as {
    failurePolicy: string;
    sideEffects: string;
    timeoutSeconds: number;
    admissionReviewVersions: string[];
    namespaceSelector: { matchExpressions: { key: string; operator: string; values: string[] }[] };
    rules: { apiGroups: string[]; resources: string[]; operations: string[] }[];
    clientConfig: { service: { name: string; namespace: string; port: number; path: string }; caBundle: string };
  }[];
  // The only other webhook is the one for Portal's own kinds (adr/0011), failurePolicy Ignore.
  assert.deepEqual(rest.map((h) => [h.failurePolicy, h.clientConfig.service.path]), [['Ignore', '/validate-portal-kinds']]);
  assert.ok(hook);
  assert.equal(hook.failurePolicy, 'Fail');
  assert.equal(hook.sideEffects, 'None');
  assert.deepEqual(hook.admissionReviewVersions, ['v1']);
  assert.ok(hook.timeoutSeconds >= 1 && hook.timeoutSeconds <= 10);
  assert.deepEqual(hook.namespaceSelector.matchExpressions, [
    { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', 'kube-public', 'kube-node-lease', NAMESPACE, 'monitoring'] },
  ]);
  const resources = hook.rules.flatMap((r) => r.resources);
  for (const kind of ['pods', 'deployments', 'statefulsets', 'daemonsets', 'replicasets', 'replicationcontrollers', 'jobs', 'cronjobs']) {
    assert.ok(resources.includes(kind), `webhook matches ${kind}`);
  }
  for (const never of ['leases', 'events', 'nodes', 'tokenreviews', 'subjectaccessreviews', 'portalrules', 'portalclusterrules', 'portalexceptions', '*']) {
    assert.ok(!resources.includes(never), `webhook never matches ${never}`);
  }
  assert.ok(!hook.rules.some((r) => r.apiGroups.includes('*') || r.apiGroups.includes('portal.dev')));
  assert.deepEqual(hook.clientConfig.service, { name: 'portal', namespace: NAMESPACE, port: 443, path: '/validate' });
  // The server exempts the same extra namespace (defence in depth).
  assert.ok(container(ms).args.includes('--exempt-namespace=monitoring'));
});

void test('certificates: caBundle is the CA that signed the serving certificate for the Service DNS name', async () => {
  const ms = await render();
  const data = find(ms, 'Secret', 'portal-tls')['data'] as Record<string, string>;
  const b64 = (s: string | undefined): string => Buffer.from(s ?? '', 'base64').toString('utf8');
  const ca = new X509Certificate(b64(data['ca.crt']));
  const cert = new X509Certificate(b64(data['tls.crt']));
  assert.ok(cert.verify(ca.publicKey), 'serving certificate signed by the CA');
  assert.ok(cert.checkHost(`portal.${NAMESPACE}.svc`), 'valid for the name kube-apiserver calls');
  assert.ok(b64(data['tls.key']).includes('PRIVATE KEY'));
  const hooks = find(ms, 'ValidatingWebhookConfiguration')['webhooks'] as { clientConfig: { caBundle: string } }[];
  assert.equal(hooks[0]!.clientConfig.caBundle, data['ca.crt']);
});

void test('cert-manager mode: Issuer + Certificate into the mounted Secret, cainjector annotation, no Helm CA', async () => {
  const ms = await render({ certificates: { mode: 'certManager' } });
  assert.ok(!ms.some((m) => m.kind === 'Secret'), 'cert-manager writes the Secret');
  const cert = find(ms, 'Certificate') as Manifest & { spec: { secretName: string; dnsNames: string[]; issuerRef: { name: string; kind: string } } };
  assert.equal(cert.spec.secretName, 'portal-tls');
  assert.ok(cert.spec.dnsNames.includes(`portal.${NAMESPACE}.svc`));
  assert.deepEqual(cert.spec.issuerRef, { name: 'portal-selfsigned', kind: 'Issuer', group: 'cert-manager.io' });
  find(ms, 'Issuer', 'portal-selfsigned');
  const vwc = find(ms, 'ValidatingWebhookConfiguration');
  assert.equal(vwc.metadata.annotations?.['cert-manager.io/inject-ca-from'], `${NAMESPACE}/portal`);

  const own = await render({ certificates: { mode: 'certManager', certManager: { issuerRef: { name: 'corp-ca', kind: 'ClusterIssuer' } } } });
  assert.ok(!own.some((m) => m.kind === 'Issuer'));
  assert.deepEqual((find(own, 'Certificate') as Manifest & { spec: { issuerRef: unknown } }).spec.issuerRef, { name: 'corp-ca', kind: 'ClusterIssuer', group: 'cert-manager.io' });
});

void test('anti-affinity: preferred without a cluster (auto), required when forced, and spread constraints', async () => {
  const auto = podSpec(await render());
  assert.ok(auto.affinity.podAntiAffinity['preferredDuringSchedulingIgnoredDuringExecution']);
  assert.equal(auto.affinity.podAntiAffinity['requiredDuringSchedulingIgnoredDuringExecution'], undefined);
  assert.equal(auto.topologySpreadConstraints?.length, 1);

  const ms = await render({ replicaCount: 3, affinity: { podAntiAffinity: { mode: 'required' } }, priorityClassName: 'system-cluster-critical' });
  const spec = podSpec(ms);
  const required = spec.affinity.podAntiAffinity['requiredDuringSchedulingIgnoredDuringExecution'] as { topologyKey: string; labelSelector: unknown }[];
  assert.equal(required[0]?.topologyKey, 'kubernetes.io/hostname');
  assert.deepEqual(required[0]?.labelSelector, { matchLabels: { 'app.kubernetes.io/name': 'portal', 'app.kubernetes.io/instance': 'portal' } });
  assert.equal((find(ms, 'Deployment')['spec'] as { replicas: number }).replicas, 3);
  assert.equal(spec.priorityClassName, 'system-cluster-critical');

  const noSpread = podSpec(await render({ topologySpreadConstraints: { enabled: false } }));
  assert.equal(noSpread.topologySpreadConstraints, undefined);
});

void test('PDB minAvailable 1 by default, configurable, can be disabled', async () => {
  const pdb = find(await render(), 'PodDisruptionBudget') as Manifest & { spec: { minAvailable: number; selector: unknown } };
  assert.equal(pdb.spec.minAvailable, 1);
  assert.deepEqual(pdb.spec.selector, { matchLabels: { 'app.kubernetes.io/name': 'portal', 'app.kubernetes.io/instance': 'portal' } });
  const two = find(await render({ replicaCount: 3, podDisruptionBudget: { minAvailable: 2 } }), 'PodDisruptionBudget') as Manifest & { spec: { minAvailable: number } };
  assert.equal(two.spec.minAvailable, 2);
  assert.ok(!(await render({ podDisruptionBudget: { enabled: false } })).some((m) => m.kind === 'PodDisruptionBudget'));
});

void test('report CRDs: those of reports.api, installed and kept on uninstall by default, skipped when disabled', async () => {
  type Crd = Manifest & { spec: { scope: string; names: { shortNames?: string[] }; versions: { name: string; subresources?: unknown; additionalPrinterColumns: { name: string; priority?: number }[] }[] } };
  const crds = (await render()).filter((m) => m.kind === 'CustomResourceDefinition') as Crd[];
  assert.deepEqual(crds.map((c) => c.metadata.name).sort(), ['clusterreports.openreports.io', 'reports.openreports.io'], 'OpenReports by default (adr/0012)');
  for (const crd of crds) assert.equal(crd.metadata.annotations?.['helm.sh/resource-policy'], 'keep');
  const reps = crds.find((c) => c.metadata.name === 'reports.openreports.io')!;
  assert.equal(reps.spec.scope, 'Namespaced');
  assert.deepEqual(reps.spec.names.shortNames, ['reps']);
  assert.equal(reps.spec.versions[0]?.name, 'v1alpha1');
  assert.equal(reps.spec.versions[0]?.subresources, undefined, 'no status subresource');
  assert.deepEqual(reps.spec.versions[0]?.additionalPrinterColumns.map((c) => `${c.name}${c.priority ? `:${c.priority}` : ''}`), ['Kind:1', 'Name:1', 'Pass', 'Fail', 'Warn', 'Error', 'Skip', 'Age']);
  assert.equal(crds.find((c) => c.metadata.name === 'clusterreports.openreports.io')?.spec.scope, 'Cluster');

  const wg = (await render({ reports: { api: 'wgpolicyk8s' } })).filter((m) => m.kind === 'CustomResourceDefinition') as Crd[];
  assert.deepEqual(wg.map((c) => c.metadata.name).sort(), ['clusterpolicyreports.wgpolicyk8s.io', 'policyreports.wgpolicyk8s.io']);
  const polr = wg.find((c) => c.metadata.name === 'policyreports.wgpolicyk8s.io')!;
  assert.equal(polr.spec.scope, 'Namespaced');
  assert.deepEqual(polr.spec.names.shortNames, ['polr']);
  assert.equal(polr.spec.versions[0]?.name, 'v1alpha2');
  assert.deepEqual(polr.spec.versions[0]?.additionalPrinterColumns.map((c) => c.name), ['Kind', 'Name', 'Pass', 'Fail', 'Warn', 'Error', 'Skip', 'Age']);
  assert.ok(!(await render({ policyReportCRDs: { install: false } })).some((m) => m.kind === 'CustomResourceDefinition'));
});

void test('reports values reach portal serve; the schema refuses what the server would', async () => {
  const args = (ms: Manifest[]) => container(ms).args.filter((a) => a.startsWith('--report-'));
  assert.deepEqual(args(await render()), ['--report-api=openreports', '--report-granularity=namespace', '--report-flush=10s', '--report-qps=10', '--report-max-results=100', '--report-status-filter=fail,warn,error']);
  assert.deepEqual(
    args(await render({ reports: { api: 'wgpolicyk8s', granularity: 'resource', flushInterval: '30s', qps: 2.5, maxResults: 10, statusFilter: ['fail'] } })),
    ['--report-api=wgpolicyk8s', '--report-granularity=resource', '--report-flush=30s', '--report-qps=2.5', '--report-max-results=10', '--report-status-filter=fail'],
  );
  for (const [values, expected] of [
    [{ reports: { api: 'kyverno' } }, /\/reports\/api/],
    [{ reports: { granularity: 'pod' } }, /\/reports\/granularity/],
    [{ reports: { statusFilter: ['failed'] } }, /\/reports\/statusFilter/],
    [{ reports: { maxResults: 5000 } }, /\/reports\/maxResults/],
  ] as const) {
    const r = await withValuesFile(values, (file) => helm(['template', RELEASE, chartDir, '--namespace', NAMESPACE, '-f', file]));
    assert.notEqual(r.code, 0, JSON.stringify(values));
    assert.match(r.stderr, expected);
  }
});

void test('webhook port hardening (issue 16): connection cap, per-peer limit, readiness error age, optional client CA', async () => {
  const defaults = container(await render());
  for (const flag of ['--webhook-max-connections=512', '--readiness-error-max-age=60s']) assert.ok(defaults.args.includes(flag), `default args contain ${flag}`);
  // Per peer: the server's own default (half the cap) unless set; no client CA unless asked.
  assert.ok(!defaults.args.some((a) => a.startsWith('--webhook-max-connections-per-peer') || a.startsWith('--client-ca-file')), defaults.args.join(' '));

  for (const [clientCA, volume] of [
    [{ secretName: 'apiserver-client-ca' }, { secret: { secretName: 'apiserver-client-ca' } }],
    [{ configMapName: 'apiserver-client-ca', key: 'bundle.pem' }, { configMap: { name: 'apiserver-client-ca' } }],
  ] as const) {
    const ms = await render({ webhook: { maxConnections: 600, maxConnectionsPerPeer: 300, clientCA }, readinessErrorMaxAge: '2m' });
    const c = container(ms);
    const key = 'key' in clientCA ? clientCA.key : 'ca.crt';
    for (const flag of ['--webhook-max-connections=600', '--webhook-max-connections-per-peer=300', '--readiness-error-max-age=2m', `--client-ca-file=/etc/portal/client-ca/${key}`]) {
      assert.ok(c.args.includes(flag), `args contain ${flag}: ${c.args.join(' ')}`);
    }
    const mount = c.volumeMounts.find((m) => m.name === 'client-ca');
    // A directory mount, so a rotated bundle reaches the file the server watches.
    assert.deepEqual(mount, { name: 'client-ca', mountPath: '/etc/portal/client-ca', readOnly: true });
    const v = podSpec(ms).volumes.find((x) => x.name === 'client-ca') as Record<string, unknown> | undefined;
    assert.deepEqual(v, { name: 'client-ca', ...volume });
  }
  await assert.rejects(render({ webhook: { clientCA: { secretName: 'a', configMapName: 'b' } } }), /give one of bundle, secretName or configMapName/);
  await assert.rejects(render({ webhook: { clientCA: { bundle: 'PEM', secretName: 'b' } } }), /give one of bundle, secretName or configMapName/);
  await assert.rejects(render({ webhook: { maxConnectionsPerPeer: 600 } }), /maxConnectionsPerPeer \(600\) must not be greater than webhook\.maxConnections \(512\)/);
});

void test('issue 31: the webhook timeout bounds requests (--webhook-timeout), and the client CA can be given inline', async () => {
  assert.ok(container(await render()).args.includes('--webhook-timeout=5s'));
  assert.ok(container(await render({ webhook: { timeoutSeconds: 12 } })).args.includes('--webhook-timeout=12s'));
  const pem = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
  const ms = await render({ webhook: { clientCA: { bundle: pem } } });
  const cm = find(ms, 'ConfigMap', 'portal-client-ca');
  assert.deepEqual(cm['data'], { 'ca.crt': pem });
  assert.ok(container(ms).args.includes('--client-ca-file=/etc/portal/client-ca/ca.crt'));
  assert.deepEqual(podSpec(ms).volumes.find((x) => x.name === 'client-ca'), { name: 'client-ca', configMap: { name: 'portal-client-ca' } });
  assert.equal((await render()).filter((m) => m.kind === 'ConfigMap' && (m.metadata as { name: string }).name === 'portal-client-ca').length, 0, 'no ConfigMap without a bundle');
});

void test('values schema rejects unknown keys and wrong types with a message', async () => {
  for (const [values, expected] of [
    [{ replicaCount: 'two' }, /replicaCount.*got string, want integer/],
    [{ replicaCuont: 2 }, /additional properties 'replicaCuont' not allowed/],
    [{ webhook: { timeoutSeconds: 60 } }, /timeoutSeconds/],
    [{ webhook: { failurePolicy: 'Sometimes' } }, /failurePolicy/],
    [{ affinity: { podAntiAffinity: { mode: 'always' } } }, /mode/],
    [{ image: { tag: 'x', registry: 'y' } }, /additional properties 'registry' not allowed/],
    [{ readinessErrorMaxAge: 'a minute' }, /readinessErrorMaxAge/],
    [{ webhook: { maxConnections: 0 } }, /maxConnections/],
    [{ webhook: { clientCA: { secret: 'x' } } }, /additional properties 'secret' not allowed/],
    [{ networkPolicy: { webhook: { controlPlaneCIDRs: ['api.example.com'] } } }, /controlPlaneCIDRs/],
  ] as const) {
    const r = await withValuesFile(values, (file) => helm(['template', 'portal', chartDir, '--values', file]));
    assert.notEqual(r.code, 0, `rejects ${JSON.stringify(values)}`);
    assert.match(r.stderr, expected);
  }
});

void test('templates refuse settings that would break shutdown', async () => {
  await assert.rejects(render({ terminationGracePeriodSeconds: 10 }), /terminationGracePeriodSeconds \(10\) must be at least/);
});

void test('helm lint passes, strict, with default and alternative values', async () => {
  const lint = await helm(['lint', '--strict', chartDir]);
  assert.equal(lint.code, 0, lint.stdout + lint.stderr);
  const alt = await withValuesFile({ certificates: { mode: 'certManager' }, replicaCount: 3, policyReportCRDs: { install: false } }, (file) =>
    helm(['lint', '--strict', chartDir, '--values', file]),
  );
  assert.equal(alt.code, 0, alt.stdout + alt.stderr);
});
