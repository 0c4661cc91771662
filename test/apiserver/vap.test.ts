/**
 * The embedded API server serves ValidatingAdmissionPolicy and binding
 * objects and enforces them in its admission chain as kube-apiserver does,
 * checked with the real kubectl: the documented messages, status codes from
 * the validation's reason, warnings for Warn, params read from the store,
 * and the API server's validation of policies and bindings.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { kubectlPath } from '../support/tools.ts';
import { withServer } from './helpers.ts';

interface Out { code: number; stdout: string; stderr: string }

const DEMO = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: demo-policy.example.com}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  validations:
  - expression: object.spec.replicas <= 5
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: demo-binding-test.example.com}
spec:
  policyName: demo-policy.example.com
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {environment: test}
`;

const deployment = (name: string, ns: string, replicas: number): string => `apiVersion: apps/v1
kind: Deployment
metadata: {name: ${name}, namespace: ${ns}}
spec:
  replicas: ${replicas}
  selector: {matchLabels: {app: ${name}}}
  template:
    metadata: {labels: {app: ${name}}}
    spec: {containers: [{name: app, image: nginx}]}
`;

test('kubectl against VAPs on the embedded API server', { timeout: 90_000 }, () => withServer({}, async (s) => {
  const dir = mkdtempSync(join(tmpdir(), 'portal-vap-'));
  try {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, s.kubeConfig('kubectl-user'));
    const k = (...args: string[]): Promise<Out> =>
      new Promise((resolve) => {
        execFile(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], { env: { PATH: process.env['PATH'] ?? '', HOME: dir } }, (err, stdout, stderr) => {
          resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
        });
      });
    const file = (name: string, text: string): string => {
      const p = join(dir, name);
      writeFileSync(p, text);
      return p;
    };

    // The objects are served, listed and validated.
    // (Imperative `kubectl create namespace|configmap` send protobuf, which this server does not speak yet: manifests instead.)
    const ns = await k('create', '-f', file('ns.yaml', 'apiVersion: v1\nkind: Namespace\nmetadata: {name: test, labels: {environment: test}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: prod}\n'));
    assert.equal(ns.code, 0, ns.stderr);
    const applied = await k('apply', '-f', file('demo.yaml', DEMO));
    assert.equal(applied.code, 0, applied.stderr);
    assert.match(applied.stdout, /validatingadmissionpolicy.admissionregistration.k8s.io\/demo-policy.example.com created/);
    assert.match(applied.stdout, /validatingadmissionpolicybinding.admissionregistration.k8s.io\/demo-binding-test.example.com created/);
    assert.match((await k('get', 'validatingadmissionpolicies')).stdout, /demo-policy\.example\.com/);
    const stored = JSON.parse((await k('get', 'validatingadmissionpolicy', 'demo-policy.example.com', '-o', 'json')).stdout) as { spec: { matchConstraints: { matchPolicy: string } } };
    assert.equal(stored.spec.matchConstraints.matchPolicy, 'Equivalent', 'defaulted as the API server does');

    // Deny, with the documented wording (Invalid → 422, kubectl's "is invalid" form).
    const denied = await k('create', '-f', file('big.yaml', deployment('nginx', 'test', 6)));
    assert.notEqual(denied.code, 0);
    assert.match(
      denied.stderr,
      /The deployments "nginx" is invalid: : ValidatingAdmissionPolicy 'demo-policy\.example\.com' with binding 'demo-binding-test\.example\.com' denied request: failed expression: object\.spec\.replicas <= 5/,
    );
    assert.equal((await k('create', '-f', file('small.yaml', deployment('nginx', 'test', 5)))).code, 0);
    assert.equal((await k('create', '-f', file('other-ns.yaml', deployment('nginx', 'prod', 9)))).code, 0, 'the binding selects environment=test only');
    const patched = await k('patch', 'deployment', 'nginx', '-n', 'test', '--type', 'merge', '-p', '{"spec":{"replicas":7}}');
    assert.match(patched.stderr, /denied request: failed expression: object\.spec\.replicas <= 5/, 'a patch is an UPDATE');

    // reason: Forbidden → 403 and kubectl's Forbidden form; Warn → a warning, the object is created.
    const policies = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-latest}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: "!('tag' in object.data) || object.data.tag != 'latest'"
    message: the tag latest is not allowed
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-latest}
spec: {policyName: no-latest, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: owner-label}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
    messageExpression: "'configmap ' + object.metadata.name + ' has no owner label'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: owner-label-warn}
spec: {policyName: owner-label, validationActions: [Warn]}
`;
    assert.equal((await k('apply', '-f', file('more.yaml', policies))).code, 0);
    const cm = (name: string, data: string, ns = 'default'): string => file(`${name}.yaml`, `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}, namespace: ${ns}}\ndata: ${data}\n`);
    const forbidden = await k('create', '-f', cm('tagged', '{tag: latest}'));
    assert.notEqual(forbidden.code, 0);
    assert.match(
      forbidden.stderr,
      /Error from server \(Forbidden\): error when creating ".*tagged\.yaml": configmaps "tagged" is forbidden: ValidatingAdmissionPolicy 'no-latest' with binding 'no-latest' denied request: the tag latest is not allowed/,
    );
    const warned = await k('create', '-f', cm('plain', '{tag: v1}'));
    assert.equal(warned.code, 0, warned.stderr);
    assert.match(warned.stderr, /Warning: Validation failed for ValidatingAdmissionPolicy 'owner-label' with binding 'owner-label-warn': configmap plain has no owner label/);

    // Params from the store: a ConfigMap in the request's namespace.
    const withParams = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replica-limit}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - expression: object.spec.replicas <= int(params.data.maxReplicas)
    messageExpression: "'replicas must be no greater than ' + params.data.maxReplicas"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replica-limit-prod}
spec:
  policyName: replica-limit
  validationActions: [Deny]
  paramRef: {name: replica-limit, parameterNotFoundAction: Deny}
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: prod}}
`;
    assert.equal((await k('apply', '-f', file('params.yaml', withParams))).code, 0);
    const noParams = await k('create', '-f', file('p1.yaml', deployment('web', 'prod', 1)));
    assert.match(noParams.stderr, /denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction/);
    assert.equal((await k('create', '-f', cm('replica-limit', '{maxReplicas: "3"}', 'prod'))).code, 0);
    assert.equal((await k('create', '-f', file('p2.yaml', deployment('web', 'prod', 3)))).code, 0);
    const overLimit = await k('create', '-f', file('p3.yaml', deployment('api', 'prod', 4)));
    assert.match(overLimit.stderr, /ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-prod' denied request: replicas must be no greater than 3/);

    // What the API server rejects: Deny with Warn, an expression that does not compile.
    const bad = await k('apply', '-f', file('bad.yaml', `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: both}
spec: {policyName: demo-policy.example.com, validationActions: [Deny, Warn]}
`));
    assert.match(bad.stderr, /spec\.validationActions: Invalid value: \["Deny","Warn"\]: must not contain both Deny and Warn/);
    const broken = await k('apply', '-f', file('broken.yaml', DEMO.replace('object.spec.replicas <= 5', '"object.spec.replicas <="').replace('demo-policy.example.com}', 'broken}')));
    assert.match(broken.stderr, /spec\.validations\[0\]\.expression: Invalid value: .*compilation failed: ERROR: <input>:1:\d+/);

    // Deleting the binding lifts the policy.
    assert.equal((await k('delete', 'validatingadmissionpolicybinding', 'demo-binding-test.example.com')).code, 0);
    assert.equal((await k('create', '-f', file('big2.yaml', deployment('nginx2', 'test', 6)))).code, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}));
