/**
 * Admission benchmark (issue 2, part 6): one `portal serve` replica with the
 * shipped rules vs. the ceiling (a bare Node HTTPS server that only parses
 * the review and echoes an allow), same machine, same run, same ~3 KB Pod
 * review, keep-alive, 32 connections.
 *
 * Goals: portal req/s >= 0.8 × ceiling req/s (closed loop); p99 at a fixed
 * 1,000 req/s within 2 ms of the ceiling's p99 (open loop); zero errors.
 *
 * Run: node --import tsx bench/admission.ts [--seconds 5]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { writeSelfSigned } from '../src/admission/certs.ts';
import { closedLoop, openLoop, type LoadResult, type Target } from './load.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const secondsArg = process.argv.indexOf('--seconds');
const SECONDS = secondsArg > 0 ? Number(process.argv[secondsArg + 1]) : 5;
const CONNECTIONS = 32;
const RATE = 1000;

/** A realistic Pod that passes the baseline rules (so every rule is evaluated), ~3 KB as a review. */
function podReview(): Buffer {
  const container = (name: string, image: string) => ({
    name,
    image,
    imagePullPolicy: 'IfNotPresent',
    args: ['--port=8080', '--log-level=info', '--metrics-addr=:9090'],
    ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }, { name: 'metrics', containerPort: 9090, protocol: 'TCP' }],
    env: [
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'LOG_FORMAT', value: 'json' },
    ],
    resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '500m', memory: '256Mi' } },
    readinessProbe: { httpGet: { path: '/readyz', port: 8080 }, periodSeconds: 5 },
    livenessProbe: { httpGet: { path: '/livez', port: 8080 }, periodSeconds: 10 },
    securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } },
    volumeMounts: [{ name: 'config', mountPath: '/etc/app', readOnly: true }, { name: 'tmp', mountPath: '/tmp' }],
  });
  const review = {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: '705ab4f5-6393-11e8-b7cc-42010a800002',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      requestResource: { group: '', version: 'v1', resource: 'pods' },
      name: 'checkout-7d4b9c6f5-x2k8p',
      namespace: 'shop',
      operation: 'CREATE',
      userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller', uid: 'a1b2c3', groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'] },
      object: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: 'checkout-7d4b9c6f5-x2k8p',
          generateName: 'checkout-7d4b9c6f5-',
          namespace: 'shop',
          labels: { app: 'checkout', team: 'payments', 'pod-template-hash': '7d4b9c6f5', 'app.kubernetes.io/version': '2.14.1' },
          annotations: { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9090' },
          ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'checkout-7d4b9c6f5', uid: 'f0e1d2c3-b4a5-6789-0123-456789abcdef', controller: true, blockOwnerDeletion: true }],
        },
        spec: {
          serviceAccountName: 'checkout',
          securityContext: { runAsNonRoot: true, runAsUser: 10001, fsGroup: 10001, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [container('checkout', 'registry.example.com/shop/checkout:2.14.1'), container('envoy', 'registry.example.com/mesh/envoy:1.31.2')],
          volumes: [{ name: 'config', configMap: { name: 'checkout-config' } }, { name: 'tmp', emptyDir: {} }],
          nodeSelector: { 'kubernetes.io/os': 'linux' },
          tolerations: [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }],
        },
      },
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
    },
  };
  return Buffer.from(JSON.stringify(review));
}

const children: ChildProcess[] = [];

function startProcess(args: string[], ready: (line: string) => number | undefined): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`did not start: ${args.join(' ')}`)), 20_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code}: ${args.join(' ')}`));
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const port = ready(line);
      if (port !== undefined) {
        clearTimeout(timer);
        resolve({ child, port });
      }
    });
  });
}

const round = (n: number): number => Math.round(n * 1000) / 1000;

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'portal-bench-'));
  try {
    const files = await writeSelfSigned(dir);
    const ca = await readFile(files.caFile);
    const body = podReview();

    const ceiling = await startProcess(['--import', 'tsx', join(root, 'bench', 'ceiling-server.ts'), files.certFile, files.keyFile], (l) =>
      l.startsWith('listening ') ? Number(l.slice(10)) : undefined,
    );
    const portal = await startProcess(
      [join(root, 'bin', 'portal.js'), 'serve', '--policies', join(root, 'policies'), '--tls-cert-file', files.certFile, '--tls-key-file', files.keyFile, '--webhook-port', '0', '--probes-port', '0', '--bind-address', '127.0.0.1', '--log-level', 'info'],
      (l) => {
        const rec = JSON.parse(l) as { msg?: string; url?: string };
        return rec.msg === 'webhook listening' ? Number(new URL(rec.url ?? '').port) : undefined;
      },
    );

    const uid = '"uid":"705ab4f5-6393-11e8-b7cc-42010a800002"';
    const check = (b: string): boolean => b.includes(uid) && b.includes('"allowed":true');
    const targets: Record<string, Target> = {
      ceiling: { port: ceiling.port, ca, body, check },
      portal: { port: portal.port, ca, body, check },
    };

    // Warm-up: JIT, TLS sessions, ajv code paths.
    for (const t of Object.values(targets)) await closedLoop(t, CONNECTIONS, 1500);

    const results: Record<string, { closed: LoadResult; open: LoadResult }> = {};
    for (const [name, t] of Object.entries(targets)) {
      results[name] = { closed: await closedLoop(t, CONNECTIONS, SECONDS * 1000), open: await openLoop(t, CONNECTIONS, RATE, SECONDS * 1000) };
    }
    const c = results.ceiling!;
    const p = results.portal!;
    const throughputRatio = round(p.closed.rps / c.closed.rps);
    const p99DeltaMs = round(p.open.p99ms - c.open.p99ms);
    const errors = c.closed.errors + c.open.errors + p.closed.errors + p.open.errors;
    const report = {
      benchmark: 'admission',
      reviewBytes: body.length,
      connections: CONNECTIONS,
      seconds: SECONDS,
      openLoopRate: RATE,
      node: process.version,
      results,
      ratios: { throughput: throughputRatio, p99DeltaMsAt1000rps: p99DeltaMs },
      goals: {
        throughputAtLeast80PercentOfCeiling: throughputRatio >= 0.8,
        p99Within2msOfCeilingAt1000rps: p99DeltaMs <= 2,
        zeroErrors: errors === 0,
      },
    };
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
