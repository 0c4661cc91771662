// Applies what the chart renders with the real kubectl to the embedded API
// server, then checks the webhook configuration works as installed: fail
// closed while no replica answers, exclusions honoured, and — with a real
// `portal serve` using the chart's own certificate — policy denials that
// travel through the chart's caBundle and Service reference.
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { startApiServer, type ApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import { createWebhookAdmission, type WebhookAdmission } from '../../packages/devcluster/src/webhook-admission.ts';
import { kubectlPath } from '../support/tools.ts';
import { chartDir, helm, NAMESPACE, RELEASE, type Manifest } from './helm.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let api: ApiServer;
let admission: WebhookAdmission;
let dir: string;
let kubeconfig: string;
let rendered: Manifest[];
/** Where the Service `portal.portal-system:443` is reached (a real `portal serve`, once started). */
let webhookPort = 0;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

// The embedded API server serves OpenAPI v3 but not v2, and kubectl 1.35
// falls back to v2 for client-side validation; the server validates the
// objects itself, so kubectl's own pass is turned off.
const NO_CLIENT_VALIDATION = '--validate=false';

// Asynchronous on purpose: the API server runs in this process.
function kubectl(args: string[], stdin?: string): Promise<Run> {
  const withValidation = args[0] === 'apply' ? [...args, NO_CLIENT_VALIDATION] : args;
  return new Promise((resolve) => {
    const child = execFile(kubectlPath(), ['--kubeconfig', kubeconfig, ...withValidation], { timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
    if (stdin !== undefined) child.stdin?.end(stdin);
  });
}

/** A Pod that passes every Pod Security rule unless `privileged`. */
function pod(name: string, namespace: string, privileged: boolean): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace },
    spec: {
      securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'app',
          image: 'nginx:1.27',
          securityContext: { privileged, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
        },
      ],
    },
  });
}

/**
 * Kinds the chart renders that the embedded API server does not serve. Empty:
 * every rendered object (RBAC included) is applied. A kind added to the chart
 * that the server lacks must be listed here, not silently dropped.
 */
const KNOWN_UNSERVED = new Set<string>([]);

/** `apiVersion/Kind` of every type the server's discovery lists. */
async function servedKinds(): Promise<Set<string>> {
  const r = await kubectl(['api-resources', '--no-headers']);
  assert.equal(r.code, 0, r.stderr);
  const served = new Set<string>();
  for (const line of r.stdout.trim().split('\n')) {
    const cols = line.trim().split(/\s+/);
    const kind = cols.at(-1);
    const apiVersion = cols.at(-3);
    if (kind && apiVersion) served.add(`${apiVersion}/${kind}`);
  }
  return served;
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'portal-chart-apply-'));
  admission = createWebhookAdmission({ resolveService: () => `127.0.0.1:${webhookPort}` });
  api = await startApiServer({ admission });
  kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, api.kubeConfig('admin'));
  const r = await helm(['template', RELEASE, chartDir, '--namespace', NAMESPACE, '--include-crds']);
  assert.equal(r.code, 0, r.stderr);
  await writeFile(join(dir, 'portal.yaml'), r.stdout);
  rendered = parseAllDocuments(r.stdout).map((d) => d.toJS() as Manifest).filter(Boolean);
});

after(async () => {
  admission?.close();
  await api?.close();
  await rm(dir, { recursive: true, force: true });
});

void test('kubectl apply of the rendered chart succeeds and creates every object', async () => {
  const ns = await kubectl(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } }));
  assert.equal(ns.code, 0, ns.stderr);
  // CRDs first, as Helm installs crds/ before the templates.
  const crds = rendered.filter((m) => m.kind === 'CustomResourceDefinition');
  assert.deepEqual(crds.map((m) => m.metadata.name).sort(), [
    'clusterreports.openreports.io',
    'portalclusterrules.portal.dev',
    'portalexceptions.portal.dev',
    'portalrules.portal.dev',
    'reports.openreports.io',
  ]);
  const crdFile = join(dir, 'crds.json');
  await writeFile(crdFile, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: crds }));
  const crdApply = await kubectl(['apply', '-f', crdFile]);
  assert.equal(crdApply.code, 0, crdApply.stderr);

  const served = await servedKinds();
  const rest = rendered.filter((m) => m.kind !== 'CustomResourceDefinition');
  const unserved = rest.filter((m) => !served.has(`${m.apiVersion}/${m.kind}`));
  for (const m of unserved) assert.ok(KNOWN_UNSERVED.has(`${m.apiVersion}/${m.kind}`), `${m.apiVersion}/${m.kind} is served by the embedded API server`);
  const toApply = rest.filter((m) => served.has(`${m.apiVersion}/${m.kind}`));
  const file = join(dir, 'objects.json');
  await writeFile(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: toApply }));
  const applied = await kubectl(['apply', '-f', file]);
  assert.equal(applied.code, 0, applied.stderr);
  const lines = applied.stdout.trim().split('\n');
  assert.equal(lines.length, toApply.length, applied.stdout);
  for (const line of lines) assert.match(line, / created$/);
  for (const kind of ['Deployment', 'Service', 'ServiceAccount', 'PodDisruptionBudget', 'Secret', 'ValidatingWebhookConfiguration',
    'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding']) {
    assert.ok(toApply.some((m) => m.kind === kind), `${kind} applied`);
  }

  const got = await kubectl(['get', 'validatingwebhookconfiguration', 'portal', '-o', 'json']);
  assert.equal(got.code, 0, got.stderr);
  const vwc = rendered.find((m) => m.kind === 'ValidatingWebhookConfiguration');
  assert.deepEqual((JSON.parse(got.stdout) as { webhooks: unknown }).webhooks, vwc?.['webhooks']);
  // The report CRDs (OpenReports by default) are served, Reports by short name too.
  const reps = await kubectl(['get', 'reps', '-A']);
  assert.equal(reps.code, 0, reps.stderr);
  const creps = await kubectl(['get', 'clusterreports']);
  assert.equal(creps.code, 0, creps.stderr);
});

void test('with no replica answering, matched requests are rejected and excluded ones are not', async () => {
  webhookPort = await freePort(); // nothing listens there
  const denied = await kubectl(['apply', '-f', '-'], pod('web', 'default', false));
  assert.notEqual(denied.code, 0);
  assert.match(denied.stderr, /failed calling webhook "validate\.portal\.dev"/);
  const own = await kubectl(['apply', '-f', '-'], pod('own', NAMESPACE, true));
  assert.equal(own.code, 0, `Portal's namespace is never sent to the webhook: ${own.stderr}`);
  const kubeSystem = await kubectl(['apply', '-f', '-'], pod('sys', 'kube-system', true));
  assert.equal(kubeSystem.code, 0, kubeSystem.stderr);
  const lease = await kubectl(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'l', namespace: 'default' }, spec: {} }));
  assert.equal(lease.code, 0, `Leases are never sent to the webhook: ${lease.stderr}`);
});

void test('a real portal serve with the chart\'s certificate enforces through the chart\'s webhook', async (t) => {
  const secret = rendered.find((m) => m.kind === 'Secret' && m.metadata.name === 'portal-tls') as Manifest & { data: Record<string, string> };
  const certFile = join(dir, 'tls.crt');
  const keyFile = join(dir, 'tls.key');
  await writeFile(certFile, Buffer.from(secret.data['tls.crt']!, 'base64'));
  await writeFile(keyFile, Buffer.from(secret.data['tls.key']!, 'base64'));
  webhookPort = await freePort();
  const probesPort = await freePort();
  const child: ChildProcess = spawn(
    process.execPath,
    [join(root, 'bin', 'portal.js'), 'serve', '--policies', join(root, 'policies', 'pod-security'), '--tls-cert-file', certFile, '--tls-key-file', keyFile,
      '--webhook-port', String(webhookPort), '--probes-port', String(probesPort), '--bind-address', '127.0.0.1', '--log-level', 'warn', '--pod-name', 'chart-test'],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
  });
  // Poll readiness with a deadline (the replica loads and compiles the rules first).
  const deadline = Date.now() + 20_000;
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${probesPort}/readyz`).then((r) => r.ok, () => false);
    if (ok) break;
    assert.ok(child.exitCode === null, `portal serve exited early: ${output}`);
    assert.ok(Date.now() < deadline, `portal serve not ready in time: ${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const denied = await kubectl(['apply', '-f', '-'], pod('priv', 'default', true));
  assert.notEqual(denied.code, 0);
  assert.match(denied.stderr, /admission webhook "validate\.portal\.dev" denied the request: .*disallow-privileged-containers/);
  const allowed = await kubectl(['apply', '-f', '-'], pod('web', 'default', false));
  assert.equal(allowed.code, 0, allowed.stderr);
});

void test('break glass: the webhook configuration can always be deleted, and writes work again', async () => {
  webhookPort = await freePort(); // no replica
  const del = await kubectl(['delete', 'validatingwebhookconfiguration', 'portal']);
  assert.equal(del.code, 0, del.stderr);
  const created = await kubectl(['apply', '-f', '-'], pod('after-break-glass', 'default', true));
  assert.equal(created.code, 0, created.stderr);
});
