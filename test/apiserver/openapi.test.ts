/**
 * OpenAPI v2/v3 with component schemas and strict field validation, through
 * the real kubectl 1.35 and raw HTTP.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import type { ApiServer } from '../../src/devcluster/apiserver/index.ts';
import { kubectlPath } from '../support/tools.ts';
import { caller, withServer } from './helpers.ts';

const run = promisify(execFile);
const CRD_FILE = join(import.meta.dirname, '..', '..', 'charts', 'portal', 'crds', 'portal.dev_portalclusterrules.yaml');

interface Kubectl {
  dir: string;
  k: (...args: string[]) => Promise<{ stdout: string; stderr: string }>;
  /** Runs kubectl expecting failure; resolves to its stderr. */
  fails: (...args: string[]) => Promise<string>;
}

async function withKubectl(s: ApiServer, fn: (kc: Kubectl) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'portal-openapi-'));
  try {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, s.kubeConfig('kubectl-user'));
    const opts = { env: { PATH: process.env['PATH'] ?? '', HOME: dir } };
    const k = async (...args: string[]) => run(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], opts);
    const fails = async (...args: string[]): Promise<string> => {
      try {
        await k(...args);
      } catch (e) {
        return (e as { stderr: string }).stderr;
      }
      throw new Error(`kubectl ${args.join(' ')} succeeded`);
    };
    await fn({ dir, k, fails });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('kubectl explain works for built-ins and for a CRD', { timeout: 60_000 }, () => withServer({}, (s) => withKubectl(s, async ({ k }) => {
  const containers = (await k('explain', 'pods.spec.containers')).stdout;
  assert.match(containers, /KIND:\s+Pod/);
  assert.match(containers, /FIELD: containers <\[\]Container>/);
  assert.match(containers, /image\s+<string>/);
  assert.match(containers, /ports\s+<\[\]ContainerPort>/);
  const strategy = (await k('explain', 'deployment.spec.strategy')).stdout;
  assert.match(strategy, /GROUP:\s+apps/);
  assert.match(strategy, /rollingUpdate\s+<RollingUpdateDeployment>/);
  assert.match(strategy, /type\s+<string>/);
  await k('apply', '-f', CRD_FILE);
  const validate = (await k('explain', 'portalclusterrules.spec.validate')).stdout;
  assert.match(validate, /KIND:\s+PortalClusterRule/);
  assert.match(validate, /GROUP:\s+portal\.dev/);
})));

test('/openapi/v3/apis/G/V carries components.schemas with x-kubernetes-group-version-kind; /openapi/v2 JSON has definitions', { timeout: 30_000 }, () => withServer({}, async (s) => {
  const call = caller(s, s.adminToken);
  const index = await call('GET', '/openapi/v3');
  const apps = (index.body['paths'] as Record<string, { serverRelativeURL: string }>)['apis/apps/v1']!;
  const doc = await call('GET', apps.serverRelativeURL);
  const schemas = (doc.body['components'] as { schemas: Record<string, Record<string, unknown>> }).schemas;
  const dep = schemas['io.k8s.api.apps.v1.Deployment']!;
  assert.deepEqual(dep['x-kubernetes-group-version-kind'], [{ group: 'apps', version: 'v1', kind: 'Deployment' }]);
  const container = schemas['io.k8s.api.core.v1.Container']!['properties'] as Record<string, Record<string, unknown>>;
  assert.deepEqual(container['ports']!['x-kubernetes-list-map-keys'], ['containerPort', 'protocol']);
  assert.ok(schemas['io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta']);
  const v2 = await call('GET', '/openapi/v2');
  const defs = v2.body['definitions'] as Record<string, Record<string, unknown>>;
  assert.ok(defs['io.k8s.api.core.v1.Pod']);
  assert.match(JSON.stringify(defs['io.k8s.api.core.v1.Pod']), /"#\/definitions\/io\.k8s\.api\.core\.v1\.PodSpec"/);
}));

