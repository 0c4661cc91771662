/**
 * End to end: spawn `node bin/portal.js serve` for real, talk to it over
 * CA-verified HTTPS and plain HTTP, stop it with SIGTERM.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { untilReady } from '../support/until.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = join(root, 'bin', 'portal.js');

interface Running {
  child: ChildProcess;
  webhook: URL;
  probes: string;
  caFile: string;
  exited: Promise<number | null>;
  stderr: () => string;
}

const children = new Set<ChildProcess>();
after(() => {
  for (const c of children) c.kill('SIGKILL');
});

function run(args: string[]): { child: ChildProcess; exited: Promise<number | null>; stdout: () => string; stderr: () => string } {
  const child = spawn(process.execPath, [bin, 'serve', ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, POD_NAME: 'portal-test' } });
  children.add(child);
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => {
    children.delete(child);
    resolve(code);
  }));
  return { child, exited, stdout: () => out, stderr: () => err };
}

/** Starts a replica and waits (with deadlines) for its "webhook listening" log line, then for /readyz 200. */
async function start(args: string[]): Promise<Running> {
  const r = run(['--webhook-port', '0', '--probes-port', '0', '--bind-address', '127.0.0.1', ...args]);
  const lines = createInterface({ input: r.child.stdout! });
  let caFile = '';
  let probes = '';
  const webhook = await new Promise<URL>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${r.stdout()} ${r.stderr()}`)), 90_000); // generous: a loaded machine, not a start-time assertion
    void r.exited.then((code) => reject(new Error(`serve exited ${code}: ${r.stderr()}`)));
    lines.on('line', (line) => {
      const rec = JSON.parse(line) as { msg: string; url?: string; caFile?: string };
      if (rec.caFile) caFile = rec.caFile;
      if (rec.msg === 'probes listening') probes = rec.url ?? '';
      if (rec.msg === 'webhook listening') {
        clearTimeout(timer);
        resolve(new URL(rec.url ?? ''));
      }
    });
  });
  await untilReady(probes);
  return { child: r.child, webhook, probes, caFile, exited: r.exited, stderr: r.stderr };
}

function review(uid: string, privileged: boolean): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: 'apps', version: 'v1', kind: 'Deployment' },
      resource: { group: 'apps', version: 'v1', resource: 'deployments' },
      namespace: 'default',
      name: 'web',
      operation: 'CREATE',
      object: {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'web', namespace: 'default', labels: { team: 'a' } },
        spec: { template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'app', image: 'nginx:1.27', securityContext: { privileged } }] } } },
      },
    },
  });
}

function validate(s: Running, body: string): Promise<{ status: number; json: { apiVersion: string; response: { uid: string; allowed: boolean; status?: { code: number; message: string } } } }> {
  return new Promise((resolve, reject) => {
    // Verified against the generated CA, with the name the certificate was issued for.
    const req = request(
      { host: '127.0.0.1', servername: 'localhost', port: s.webhook.port, path: '/validate', method: 'POST', ca: readFileSync(s.caFile), headers: { 'content-type': 'application/json' } },
      (res) => {
        let data = '';
        res.on('data', (d: Buffer) => (data += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(data) }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('portal serve (standalone, real process)', () => {
  it('denies a privileged Deployment from the shipped rules over CA-verified HTTPS, and shuts down cleanly on SIGTERM', async () => {
    const s = await start(['--policies', 'policies', '--self-signed']);
    assert.ok(existsSync(s.caFile));
    const denied = await validate(s, review('d-1', true));
    assert.equal(denied.status, 200);
    assert.equal(denied.json.response.uid, 'd-1');
    assert.equal(denied.json.response.allowed, false);
    assert.equal(denied.json.response.status?.code, 403);
    assert.match(denied.json.response.status?.message ?? '', /disallow-privileged-containers/);
    assert.match(denied.json.response.status?.message ?? '', /spec\.template\.spec\.containers\[0\]\.securityContext\.privileged/);

    const ready = await fetch(`${s.probes}/readyz`);
    assert.equal(ready.status, 200);
    const metrics = await (await fetch(`${s.probes}/metrics`)).text();
    assert.match(metrics, /portal_admission_requests_total\{operation="CREATE",kind="Deployment",decision="deny"\} 1/);
    assert.match(metrics, /portal_rules_loaded 2\d/);

    s.child.kill('SIGTERM');
    assert.equal(await s.exited, 0, s.stderr());
    assert.equal(existsSync(s.caFile), false, 'the throw-away certificate directory is removed');
  });

  it('exits 2 listing every configuration problem before starting anything', async () => {
    const r = run(['--webhook-prot', '9443', '--lease-duration', '1s', '--log-level', 'loud']);
    assert.equal(await r.exited, 2);
    const err = r.stderr();
    assert.match(err, /unknown flag --webhook-prot \(did you mean --webhook-port\?\)/);
    assert.match(err, /--lease-duration \(1s\) must be greater than --renew-deadline \(10s\)/);
    assert.match(err, /--log-level: expected one of/);
    assert.match(err, /no serving certificate/);
    assert.match(err, /no rule source/);
    assert.equal(r.stdout(), '');
  });

  it('exits 2 naming invalid rules', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'portal-serve-rules-'));
    try {
      writeFileSync(
        join(dir, 'bad.yaml'),
        'apiVersion: portal.dev/v1alpha1\nkind: PortalClusterRule\nmetadata: {name: broken}\nspec:\n  match: {kinds: []}\n  validate: {schema: {type: object}}\n',
      );
      const r = run(['--policies', dir, '--self-signed', '--webhook-port', '0', '--probes-port', '0']);
      assert.equal(await r.exited, 2);
      assert.match(r.stderr(), /invalid rules/);
      assert.match(r.stderr(), /broken/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits 2 naming an invalid ValidatingAdmissionPolicy, and says a directory of VAPs only gives the webhook nothing to enforce', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'portal-serve-vap-'));
    try {
      const vap = (expression: string): string =>
        `apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: replicas}\nspec:\n  matchConstraints:\n    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]\n  validations: [{expression: "${expression}"}]\n`;
      writeFileSync(join(dir, 'vap.yaml'), vap('object.spec.replicas <'));
      const bad = run(['--policies', dir, '--self-signed', '--webhook-port', '0', '--probes-port', '0']);
      assert.equal(await bad.exited, 2);
      assert.match(bad.stderr(), /ValidatingAdmissionPolicy "replicas" is invalid/);
      assert.match(bad.stderr(), /spec\.validations\[0\]\.expression: .*compilation failed: ERROR: <input>:1:\d+/);
      writeFileSync(join(dir, 'vap.yaml'), vap('object.spec.replicas < 5'));
      const only = run(['--policies', dir, '--self-signed', '--webhook-port', '0', '--probes-port', '0']);
      assert.equal(await only.exited, 2);
      assert.match(only.stderr(), /only ValidatingAdmissionPolicies: the webhook enforces PortalRule \/ PortalClusterRule objects, and the API server enforces VAPs itself/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('prints --help generated from the schema and exits 0', async () => {
    const r = run(['--help']);
    assert.equal(await r.exited, 0);
    assert.match(r.stdout(), /--retry-period DUR/);
  });
});
