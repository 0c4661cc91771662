// `portal dev` start-up and shutdown as a user meets them (issue 11 item 7):
// a busy port, HTTPS only, and no process left behind on any failure path;
// and two instances on one state directory (issue 15 item 4).
// Every case runs the real CLI in a child process and checks the process
// table (/proc) for anything started from its temporary directory.
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { request as httpRequest } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import YAML from 'yaml';
import { killMentioning, processesMentioning } from '../support/processes.ts';
import { kubectlPath } from '../support/tools.ts';
import { SLOW_CHECK, until } from '../support/until.ts';


const root = fileURLToPath(new URL('../..', import.meta.url));

interface State {
  kubeconfig: string;
  apiserver: string;
  replicas: { name: string; pid: number | null; webhook: string; probes: string }[];
}

async function readState(file: string): Promise<State | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as State;
  } catch {
    return undefined;
  }
}


interface Dev {
  child: ChildProcess;
  output: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function startDev(dir: string, args: string[]): Dev {
  let output = '';
  let stderr = '';
  const child = spawn(process.execPath, [join(root, 'bin', 'portal.js'), 'dev', '--state-dir', join(dir, 'state'), '--grace-period', '5s', ...args], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr?.on('data', (c: Buffer) => {
    output += c.toString();
    stderr += c.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return { child, output: () => output, stderr: () => stderr, exited };
}

/** Kills whatever a failed test left behind, by pid. */
function reap(dir: string, dev?: Dev): void {
  if (dev && dev.child.exitCode === null && dev.child.signalCode === null) dev.child.kill('SIGKILL');
  killMentioning(dir);
}

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'portal-dev-lifecycle-'));
  try {
    await fn(dir);
  } finally {
    reap(dir);
    await rm(dir, { recursive: true, force: true });
  }
}

async function occupy(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { server, port: (server.address() as AddressInfo).port };
}

function httpsGet(url: string, ca: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, headers: { authorization: `Bearer ${token}` } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

function plainGet(url: string): Promise<{ status: number } | { error: string }> {
  return new Promise((resolve) => {
    const req = httpRequest(url, { timeout: 5000 }, (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0 });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve({ error: (e as NodeJS.ErrnoException).code ?? e.message }));
    req.end();
  });
}

void test('portal dev on a busy port: one line, exit code 2, nothing started', { timeout: 60_000 }, async () => {
  await withDir(async (dir) => {
    const busy = await occupy();
    try {
      const dev = startDev(dir, ['--port', String(busy.port), '--policies', join(root, 'policies')]);
      const { code } = await dev.exited;
      assert.equal(code, 2, dev.output());
      assert.equal(dev.stderr(), `portal dev: port ${busy.port} on 127.0.0.1 is already in use: stop what listens there, or pass --port with another port (0 picks a free one)\n`);
      assert.equal(dev.output(), dev.stderr(), 'nothing else is printed');
      assert.equal(await readState(join(dir, 'state', 'state.json')), undefined);
      assert.deepEqual(processesMentioning(dir), []);
    } finally {
      busy.server.close();
    }
  });
});

void test('portal dev serves HTTPS only; state.json, the status line and the kubeconfig agree; SIGKILL of dev leaves no replica behind', { timeout: 120_000 }, async () => {
  await withDir(async (dir) => {
    const dev = startDev(dir, ['--replicas', '1', '--port', '0', '--policies', join(root, 'policies'), '--log-level', 'warn']);
    try {
      const stateFile = join(dir, 'state', 'state.json');
      const state = await until('state.json with a running replica', 60_000, async () => {
        const s = await readState(stateFile);
        return s && s.replicas.length === 1 && s.replicas.every((r) => r.pid !== null) ? s : undefined;
      }, SLOW_CHECK);
      assert.match(state.apiserver, /^https:\/\/127\.0\.0\.1:\d+$/);
      const kubeconfig = YAML.parse(await readFile(state.kubeconfig, 'utf8')) as {
        clusters: { cluster: { server: string; 'certificate-authority-data': string } }[];
        users: { user: { token: string } }[];
      };
      const cluster = kubeconfig.clusters[0]!.cluster;
      assert.equal(cluster.server, state.apiserver);
      const ca = Buffer.from(cluster['certificate-authority-data'], 'base64').toString();
      const version = await httpsGet(`${state.apiserver}/version`, ca, kubeconfig.users[0]!.user.token);
      assert.equal(version.status, 200);
      // The same port does not speak plain HTTP.
      const plain = await plainGet(`${state.apiserver.replace('https://', 'http://')}/version`);
      assert.ok('error' in plain || plain.status === 400, `plain HTTP was answered: ${JSON.stringify(plain)}`);
      await until('the status line', 30_000, () => (/replicas ready/.test(dev.output()) ? true : undefined), SLOW_CHECK);
      const statusLine = dev.output().split('\n').find((l) => l.includes('replicas ready'))!;
      assert.ok(statusLine.endsWith(state.apiserver), statusLine);
      assert.match(dev.output(), new RegExp(`API server ${state.apiserver.replace(/[.]/g, '\\.')}\\n`));

      const replicaPid = state.replicas[0]!.pid as number;
      assert.ok(processesMentioning(dir).includes(replicaPid));
      dev.child.kill('SIGKILL');
      await dev.exited;
      // The replica runs in its own process group (so Ctrl-C reaches only
      // dev), yet it must not outlive dev.
      await until('no process left from this portal dev', 30_000, () => (processesMentioning(dir).length === 0 ? true : undefined), SLOW_CHECK);
    } finally {
      reap(dir, dev);
    }
  });
});

void test('portal dev: a rule the API server rejects at start-up exits 1, says why, and leaves nothing running', { timeout: 60_000 }, async () => {
  await withDir(async (dir) => {
    const policies = join(dir, 'policies');
    await mkdir(policies);
    await writeFile(join(policies, 'bad.yaml'), 'apiVersion: portal.dev/v1alpha1\nkind: PortalClusterRule\nmetadata: { name: bad }\nspec: { enforcement: Sometimes }\n');
    const dev = startDev(dir, ['--port', '0', '--policies', policies]);
    try {
      const { code } = await dev.exited;
      assert.equal(code, 1, dev.output());
      assert.match(dev.stderr(), /portal dev: cannot create PortalClusterRule "bad": 422/);
      assert.equal(await readState(join(dir, 'state', 'state.json')), undefined);
      assert.deepEqual(processesMentioning(dir), []);
    } finally {
      reap(dir, dev);
    }
  });
});

function kubectl(kubeconfig: string, dir: string, ...args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], { timeout: 30_000, env: { PATH: process.env['PATH'] ?? '', HOME: dir } }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, output: stdout + stderr });
    });
  });
}

async function fingerprint(stateDir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  // Not state.json: the first instance itself rewrites it as its replicas change.
  for (const f of ['kubeconfig', 'certs/ca.crt', 'certs/tls.crt', 'certs/tls.key', 'replicas/portal-0.kubeconfig']) out[f] = await readFile(join(stateDir, f), 'utf8');
  return out;
}

void test('a second portal dev on a state directory in use is refused in one line (exit 2) and the first keeps answering kubectl; after a crash the directory is taken over (issue 15 item 4)', { timeout: 240_000 }, async () => {
  await withDir(async (dir) => {
    const stateDir = join(dir, 'state');
    const first = startDev(dir, ['--replicas', '1', '--port', '0', '--policies', join(root, 'policies'), '--log-level', 'warn']);
    let third: Dev | undefined;
    try {
      const state = await until('the first instance running', 90_000, async () => {
        const s = await readState(join(stateDir, 'state.json'));
        return s && s.replicas.every((r) => r.pid !== null) ? s : undefined;
      }, SLOW_CHECK);
      assert.equal((await kubectl(state.kubeconfig, dir, 'get', 'namespaces')).code, 0);
      const before = await fingerprint(stateDir);

      // The README's advice when 6443 is taken (--port 0), in the same checkout.
      const second = startDev(dir, ['--replicas', '1', '--port', '0', '--policies', join(root, 'policies')]);
      const { code } = await second.exited;
      assert.equal(code, 2, second.output());
      assert.equal(
        second.stderr(),
        `portal dev: the state directory ${stateDir} is in use by another portal dev (pid ${first.child.pid}); stop that one, or give this one its own: --state-dir DIR\n`,
      );
      assert.equal(second.output(), second.stderr(), 'nothing else is printed');

      // The first is untouched: same kubeconfig, certificates and state, and kubectl still reaches it.
      assert.deepEqual(await fingerprint(stateDir), before);
      assert.equal((await readState(join(stateDir, 'state.json')))?.apiserver, state.apiserver);
      const pods = await kubectl(state.kubeconfig, dir, 'get', 'namespaces', 'portal-system', '-o', 'name');
      assert.equal(pods.code, 0, pods.output);
      assert.equal(pods.output.trim(), 'namespace/portal-system');
      assert.equal(first.child.exitCode, null, 'the first instance still runs');

      // A crash of the holder leaves nothing that blocks the directory.
      first.child.kill('SIGKILL');
      await first.exited;
      await until('the crashed instance\'s replica gone', 30_000, () => (processesMentioning(dir).length === 0 ? true : undefined), SLOW_CHECK);
      third = startDev(dir, ['--replicas', '1', '--port', '0', '--policies', join(root, 'policies'), '--log-level', 'warn']);
      const started = await until('the third instance running on the same directory', 90_000, async () => {
        if (third?.child.exitCode !== null) throw new Error(`the third instance exited:\n${third?.output()}`);
        const s = await readState(join(stateDir, 'state.json'));
        return s && s.apiserver !== state.apiserver && s.replicas.every((r) => r.pid !== null) ? s : undefined;
      }, SLOW_CHECK);
      assert.equal((await kubectl(started.kubeconfig, dir, 'get', 'namespaces')).code, 0);
      third.child.kill('SIGINT');
      assert.equal((await third.exited).code, 0, third.output());
    } finally {
      reap(dir, first);
      if (third) reap(dir, third);
    }
  });
});
