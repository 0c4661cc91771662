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
import type { ApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
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
  const v2 = (await k('explain', 'pods.spec.containers', '--output', 'plaintext-openapiv2')).stdout;
  assert.match(v2, /RESOURCE: containers <\[\]Object>/);
  assert.match(v2, /image\t<string>/);
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


const DEPLOYMENT = (extra: string): string => `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: nginx, image: nginx${extra}}
`;

test('kubectl create with unknown fields: strict error by default, warning with --validate=warn, silent drop with --validate=false', { timeout: 60_000 }, () => withServer({}, (s) => withKubectl(s, async ({ dir, k, fails }) => {
  const file = join(dir, 'd.yaml');
  writeFileSync(file, `${DEPLOYMENT(', foo: 1')}  bar: true\n`);
  const err = await fails('create', '-f', file);
  assert.equal(err.trim(), `Error from server (BadRequest): error when creating "${file}": Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.bar", unknown field "spec.template.spec.containers[0].foo"`);
  const warned = await k('create', '-f', file, '--validate=warn');
  assert.match(warned.stderr, /Warning: unknown field "spec\.bar"/);
  assert.match(warned.stderr, /Warning: unknown field "spec\.template\.spec\.containers\[0\]\.foo"/);
  const stored = JSON.parse((await k('get', 'deployment', 'web', '-o', 'json')).stdout) as { spec: Record<string, unknown> };
  assert.equal(stored.spec['bar'], undefined);
  await k('delete', 'deployment', 'web');
  const quiet = await k('create', '-f', file, '--validate=false');
  assert.doesNotMatch(quiet.stderr, /unknown field/);
})));

test('custom resources: unknown fields against the CRD schema are a strict error', { timeout: 60_000 }, () => withServer({}, (s) => withKubectl(s, async ({ dir, k, fails }) => {
  await k('apply', '-f', CRD_FILE);
  const file = join(dir, 'r.yaml');
  writeFileSync(file, 'apiVersion: portal.dev/v1alpha1\nkind: PortalClusterRule\nmetadata: {name: r1}\nspec:\n  foo: 1\n  match: {resources: [{kinds: [Pod]}]}\n  validate: {message: m, pattern: {}}\n');
  const err = await fails('create', '-f', file);
  assert.match(err, /PortalClusterRule in version "v1alpha1" cannot be handled as a PortalClusterRule: strict decoding error: unknown field "spec\.foo"/);
})));

test('fieldValidation over raw HTTP: Strict 400, Warn warning header, Ignore silent', { timeout: 30_000 }, () => withServer({}, async (s) => {
  const call = caller(s, s.adminToken);
  const cm = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, bogus: 1 }, data: { a: 'b' }, extra: true });
  const strict = await call('POST', '/api/v1/namespaces/default/configmaps?fieldValidation=Strict', cm('a'));
  assert.equal(strict.status, 400);
  assert.equal(strict.body['message'], 'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "metadata.bogus", unknown field "extra"');
  const warn = await call('POST', '/api/v1/namespaces/default/configmaps?fieldValidation=Warn', cm('b'));
  assert.equal(warn.status, 201);
  assert.equal(warn.headers.get('warning'), '299 - "unknown field \\"metadata.bogus\\"", 299 - "unknown field \\"extra\\""');
  assert.equal(warn.body['extra'], undefined);
  const ignore = await call('POST', '/api/v1/namespaces/default/configmaps?fieldValidation=Ignore', cm('c'));
  assert.equal(ignore.status, 201);
  assert.equal(ignore.headers.get('warning'), null);
}));

test('duplicate fields in JSON and YAML bodies: Strict 400 with the decoder wording, Warn warnings, last value kept', { timeout: 30_000 }, () => withServer({}, async (s) => {
  const call = caller(s, s.adminToken);
  const json = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d1"},"data":{"a":"1","a":"2"},"data2":1}';
  const strict = await call('POST', '/api/v1/namespaces/default/configmaps?fieldValidation=Strict', json);
  assert.equal(strict.status, 400);
  assert.equal(strict.body['message'], 'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "a", unknown field "data2"');
  const warn = await call('POST', '/api/v1/namespaces/default/configmaps', json);
  assert.equal(warn.status, 201);
  assert.equal(warn.headers.get('warning'), '299 - "duplicate field \\"a\\"", 299 - "unknown field \\"data2\\""');
  assert.deepEqual(warn.body['data'], { a: '2' });
  const yaml = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y1\ndata:\n  a: "1"\n  a: "2"\n';
  const ystrict = await call('POST', '/api/v1/namespaces/default/configmaps?fieldValidation=Strict', yaml, 'application/yaml');
  assert.equal(ystrict.status, 400);
  assert.equal(ystrict.body['message'], 'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: yaml: unmarshal errors:\n  line 7: key "a" already set in map');
  const yok = await call('POST', '/api/v1/namespaces/default/configmaps?fieldValidation=Ignore', yaml, 'application/yaml');
  assert.equal(yok.status, 201);
  assert.deepEqual(yok.body['data'], { a: '2' });
}));

test('patch with an unknown field: kubectl patch (no fieldValidation, server default Warn) warns; Strict is the bare strict decoding error of the patch handler', { timeout: 60_000 }, () => withServer({}, (s) => withKubectl(s, async ({ k }) => {
  await k('create', 'configmap', 'pc', '--from-literal=a=b');
  const warned = await k('patch', 'configmap', 'pc', '--type', 'merge', '-p', '{"data":{"c":"d"},"nope":1}');
  assert.match(warned.stdout, /configmap\/pc patched/);
  assert.match(warned.stderr, /Warning: unknown field "nope"/);
  const call = caller(s, s.adminToken);
  const strict = await call('PATCH', '/api/v1/namespaces/default/configmaps/pc?fieldValidation=Strict', '{"nope":1}', 'application/merge-patch+json');
  assert.equal(strict.status, 400);
  assert.equal(strict.body['message'], 'strict decoding error: unknown field "nope"');
})));

test('OpenAPI documents follow CRD changes (the cached documents are rebuilt)', { timeout: 30_000 }, () => withServer({}, async (s) => {
  const call = caller(s, s.adminToken);
  const crd = (props: Record<string, unknown>) => ({
    apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: 'gadgets.example.com' },
    spec: { group: 'example.com', scope: 'Namespaced', names: { plural: 'gadgets', singular: 'gadget', kind: 'Gadget' },
      versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', properties: props } } } } }] },
  });
  const before = await call('GET', '/openapi/v3');
  assert.equal((before.body['paths'] as Record<string, unknown>)['apis/example.com/v1'], undefined);
  const created = await call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd({ size: { type: 'integer' } }));
  assert.equal(created.status, 201);
  const spec = async (): Promise<Record<string, unknown>> => {
    const index = await call('GET', '/openapi/v3');
    const url = (index.body['paths'] as Record<string, { serverRelativeURL: string }>)['apis/example.com/v1']!.serverRelativeURL;
    const doc = await call('GET', url);
    const gadget = (doc.body['components'] as { schemas: Record<string, { properties: { spec: { properties: Record<string, unknown> } } }> }).schemas['com.example.v1.Gadget']!;
    return gadget.properties.spec.properties;
  };
  assert.deepEqual(Object.keys(await spec()), ['size']);
  const current = await call('GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.com');
  const updated = crd({ size: { type: 'integer' }, color: { type: 'string' } });
  (updated.metadata as Record<string, unknown>)['resourceVersion'] = (current.body['metadata'] as Record<string, unknown>)['resourceVersion'];
  assert.equal((await call('PUT', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.com', updated)).status, 200);
  assert.deepEqual(Object.keys(await spec()).sort(), ['color', 'size']);
}));
