/**
 * Helpers for the replica tests: spawn real `portal serve` / `portal dev`
 * processes, talk to their webhook (CA-verified HTTPS) and probes, poll
 * conditions with deadlines. Every child is killed after the test.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { request } from 'node:https';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';
import { until, untilReady } from '../support/until.ts';
import { startApiServer, type ApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import { DevApiClient } from '../../packages/devcluster/src/dev/api-client.ts';
import { readChartCrds } from '../../packages/devcluster/src/dev/manifests.ts';

export { until, untilReady };

export const root = fileURLToPath(new URL('../..', import.meta.url));
export const bin = join(root, 'bin', 'portal.js');

export interface Child {
  child: ChildProcess;
  exited: Promise<number | null>;
  /** Every stdout line so far. */
  lines: string[];
  stderr: () => string;
}

/**
 * Spawns `node bin/portal.js ...args`, through `launcher` when given (a
 * command that execs the rest, such as `taskset -c 0`); SIGKILLed after the
 * test if still running.
 */
export function spawnPortal(t: TestContext, args: string[], env: Record<string, string> = {}, launcher: readonly string[] = []): Child {
  const [cmd, ...argv] = [...launcher, process.execPath, bin, ...args] as [string, ...string[]];
  const child = spawn(cmd, argv, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const lines: string[] = [];
  let err = '';
  createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
      await exited;
    }
  });
  return { child, exited, lines, stderr: () => err };
}

export interface Serve extends Child {
  probes: string;
  webhook: string;
  caFile: string;
}

export interface StartServeOptions {
  /** Deadline for the "webhook listening" line. @default 30_000 */
  listenTimeoutMs?: number;
  /** Also wait for /readyz 200 (file mode: the evaluation workers have started). @default false */
  ready?: boolean;
  /** A command that execs portal (spawnPortal). @default none */
  launcher?: readonly string[];
}

/**
 * Starts `portal serve` on free ports with a self-signed certificate and
 * waits for "webhook listening" (and, with `ready`, for /readyz 200).
 */
export async function startServe(t: TestContext, args: string[], env: Record<string, string>, options: StartServeOptions = {}): Promise<Serve> {
  const listenTimeoutMs = options.listenTimeoutMs ?? 30_000;
  const c = spawnPortal(t, ['serve', '--webhook-port', '0', '--probes-port', '0', '--bind-address', '127.0.0.1', '--self-signed', ...args], env, options.launcher);
  const found = { probes: '', webhook: '', caFile: '' };
  await until('portal serve to listen', listenTimeoutMs, () => {
    for (const line of c.lines) {
      let rec: { msg?: string; url?: string; caFile?: string };
      try {
        rec = JSON.parse(line) as typeof rec;
      } catch {
        continue;
      }
      if (rec.caFile) found.caFile = rec.caFile;
      if (rec.msg === 'probes listening') found.probes = rec.url ?? '';
      if (rec.msg === 'webhook listening') found.webhook = rec.url ?? '';
    }
    if (c.child.exitCode !== null) throw new Error(`portal serve exited ${c.child.exitCode}: ${c.stderr()}\n${c.lines.join('\n')}`);
    return found.webhook !== '' ? true : undefined;
  });
  if (options.ready) await untilReady(found.probes, listenTimeoutMs);
  return { ...c, ...found };
}


export interface ReviewResponse {
  allowed: boolean;
  status?: { code?: number; message?: string };
  warnings?: string[];
}

/** POSTs an AdmissionReview to `url` (the /validate URL), verifying the server with `ca`. */
/** `localAddress`: the loopback address to send from (the webhook's fair turns are per remote address). */
export function review(url: string, ca: string | Buffer, body: unknown, timeoutMs = 5000, localAddress?: string): Promise<ReviewResponse> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const from = localAddress !== undefined ? { localAddress } : {};
    const req = request(url, { method: 'POST', ca, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) }, timeout: timeoutMs, ...from }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => {
        try {
          resolve((JSON.parse(text) as { response: ReviewResponse }).response);
        } catch (err) {
          reject(new Error(`bad review response ${res.statusCode}: ${text}`, { cause: err }));
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error('review timed out')));
    req.on('error', reject);
    req.end(data);
  });
}

export function readCa(file: string): Buffer {
  return readFileSync(file);
}

let uid = 0;
export function podReview(opts: { namespace?: string; privileged?: boolean } = {}): Record<string, unknown> {
  const namespace = opts.namespace ?? 'default';
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `uid-${++uid}`,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      name: 'web',
      namespace,
      operation: 'CREATE',
      userInfo: { username: 'alice' },
      object: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'web', namespace },
        spec: { containers: [{ name: 'app', image: 'nginx:1.27', securityContext: { privileged: opts.privileged ?? false } }] },
      },
      oldObject: null,
    },
  };
}

export interface LeaderVars {
  enabled: boolean;
  is_leader: boolean;
  identity: string;
  lease_holder: string;
  epoch: string | null;
  /** Seconds this replica has led in its current term (0 when not leading). */
  time_as_leader: number;
}

/** `/debug/vars` of a replica, or undefined when it does not answer. */
export async function debugVars(probes: string, timeoutMs = 1000): Promise<{ leader_election?: LeaderVars; admission?: { ready: { ready: boolean } } } | undefined> {
  try {
    const res = await fetch(`${probes}/debug/vars`, { signal: AbortSignal.timeout(timeoutMs) });
    return res.ok ? ((await res.json()) as { leader_election?: LeaderVars }) : undefined;
  } catch {
    return undefined;
  }
}

export async function readyz(probes: string): Promise<number | undefined> {
  try {
    return (await fetch(`${probes}/readyz`, { signal: AbortSignal.timeout(1000) })).status;
  } catch {
    return undefined;
  }
}

export interface ReplicaCluster {
  api: ApiServer;
  /** A temporary directory, removed after the test. */
  dir: string;
  admin: DevApiClient;
  /** Writes a kubeconfig for `user` into `dir` (mode 0600) and returns its path. */
  kubeconfig(user: string, file?: string): Promise<string>;
}

/**
 * An embedded API server as cluster-mode replicas need it: the install
 * namespace and Portal's CRDs (the chart's), with an admin client; closed
 * after the test.
 */
export async function replicaCluster(t: TestContext, prefix: string, namespace = 'portal-system'): Promise<ReplicaCluster> {
  const api = await startApiServer({ port: 0, namespaces: ['default', 'kube-system', 'kube-public', 'kube-node-lease', namespace] });
  t.after(() => api.close());
  const dir = await mkdtemp(join(tmpdir(), prefix));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const admin = new DevApiClient(api.url, api.adminToken);
  const crds = await readChartCrds(join(root, 'charts', 'portal'));
  if (crds.problems.length > 0) throw new Error(`the chart's CRDs: ${crds.problems.join('; ')}`);
  for (const crd of crds.objects) await admin.apply(crd);
  const kubeconfig = async (user: string, file = 'kubeconfig'): Promise<string> => {
    const path = join(dir, file);
    await writeFile(path, api.kubeConfig(user), { mode: 0o600 });
    return path;
  };
  return { api, dir, admin, kubeconfig };
}
