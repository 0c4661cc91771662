// Issue 33 item 1 acceptance, as a user meets it: real kubectl 1.35 against
// one `portal dev` (the shipped policies/ applied at start).
//
// - `object.spec.replcas` in a Deny rule on Deployments is refused at apply
//   and with --dry-run=server, naming `replcas` and `Deployment`.
// - `object.metadata.?labels[?'team']` and `has(object.spec.foo)` are accepted.
// - A rule on a CRD kind is checked against that CRD's structural schema
//   once the CRD is served; before, it is admitted and its status says the
//   check was not done (TypeChecked=Unknown, SchemaUnknown).
// - An Audit rule with a typo is admitted with a warning, and its status
//   says what is wrong (TypeChecked=False, FieldNotFound).
// - A ValidatingAdmissionPolicy with a typo gets a TypeCheckWarning Event
//   (what the API server writes to its status.typeChecking).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { until } from '../support/until.ts';
import { kubectl, withDev } from './support.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

const rule = (name: string, enforcement: string, group: string, kind: string, expression: string): string => `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata:
  name: ${name}
spec:
  enforcement: ${enforcement}
  match:
    kinds: [{apiGroups: [${JSON.stringify(group)}], kinds: [${kind}]}]
  validate:
    cel:
      expressions:
        - expression: ${JSON.stringify(expression)}
`;

const WIDGET_CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
                extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
`;

interface Condition { type: string; status: string; reason: string; message: string }

async function condition(kubeconfig: string, name: string, type: string): Promise<Condition | undefined> {
  const r = await kubectl(kubeconfig, ['get', 'pcrule', name, '-o', 'json']);
  if (r.code !== 0) return undefined;
  return ((JSON.parse(r.stdout) as { status?: { conditions?: Condition[] } }).status?.conditions ?? []).find((c) => c.type === type);
}

void test('issue 33 with real kubectl: rules are type-checked against the schemas of what they match', { timeout: 300_000 }, async () => {
  await withDev({ name: 'type-check', replicas: 1, policies: join(root, 'policies') }, async (dev) => {
    const kc = dev.state.kubeconfig;

    // 1. The typo, refused at apply and at --dry-run=server, naming the field and the kind.
    const typo = rule('max-replicas-typo', 'Deny', 'apps', 'Deployment', 'object.spec.replcas <= 10');
    for (const extra of [['--dry-run=server'], []]) {
      const r = await kubectl(kc, ['apply', ...extra, '-f', '-'], typo);
      assert.equal(r.code, 1, r.stdout);
      assert.match(
        r.stderr,
        /admission webhook "validate-kinds\.portal\.dev" denied the request: PortalClusterRule "max-replicas-typo" is invalid: spec\.validate\.cel\.expressions\[0\]\.expression: spec\.replcas: no such field in apps\/v1 Deployment/,
      );
    }
    assert.equal((await kubectl(kc, ['get', 'pcrule', 'max-replicas-typo'])).code, 1, 'not created');

    // 2. Optional access and has() are accepted; so is the fixed rule.
    for (const [name, expression] of [
      ['team-label', "object.metadata.?labels[?'team'].orValue('none') != ''"],
      ['has-foo', '!has(object.spec.foo) || object.spec.replicas <= 10'],
      ['max-replicas', 'object.spec.replicas <= 10'],
    ] as const) {
      const r = await kubectl(kc, ['apply', '-f', '-'], rule(name, 'Deny', 'apps', 'Deployment', expression));
      assert.equal(r.code, 0, r.stderr);
    }
    const checked = await until('max-replicas TypeChecked=True', 60_000, async () => {
      const c = await condition(kc, 'max-replicas', 'TypeChecked');
      return c?.status === 'True' ? c : undefined;
    });
    assert.equal(checked.reason, 'Checked');
    assert.match(checked.message, /apps\/v1 Deployment/);

    // 3. A rule on a kind not served yet: admitted, the check not done, and the status says so.
    const widget = (name: string, expression: string) => rule(name, 'Deny', 'example.com', 'Widget', expression);
    const early = await kubectl(kc, ['apply', '-f', '-'], widget('widget-early', 'object.spec.sise <= 3'));
    assert.equal(early.code, 0, early.stderr);
    const unknown = await until('widget-early TypeChecked=Unknown', 60_000, async () => {
      const c = await condition(kc, 'widget-early', 'TypeChecked');
      return c?.status === 'Unknown' ? c : undefined;
    });
    assert.equal(unknown.reason, 'SchemaUnknown');
    assert.match(unknown.message, /Widget\.example\.com/);

    // 4. Once the CRD is served, a rule on its kind is checked against its structural schema.
    assert.equal((await kubectl(kc, ['apply', '-f', '-'], WIDGET_CRD)).code, 0);
    const refused = await until('a Widget rule with a typo refused', 60_000, async () => {
      const r = await kubectl(kc, ['apply', '--dry-run=server', '-f', '-'], widget('widget-size', 'object.spec.sise <= 3'));
      return r.code === 1 ? r : undefined;
    });
    assert.match(refused.stderr, /spec\.validate\.cel\.expressions\[0\]\.expression: spec\.sise: no such field in example\.com\/v1 Widget/);
    for (const expression of ['object.spec.size <= 3', 'object.spec.extra.anything == 1 || true']) {
      const r = await kubectl(kc, ['apply', '-f', '-'], widget('widget-size', expression));
      assert.equal(r.code, 0, r.stderr);
    }
    // The rule that got in before the CRD: its status now names the typo.
    const found = await until('widget-early TypeChecked=False', 120_000, async () => {
      const c = await condition(kc, 'widget-early', 'TypeChecked');
      return c?.status === 'False' ? c : undefined;
    });
    assert.equal(found.reason, 'FieldNotFound');
    assert.match(found.message, /spec\.sise: no such field in example\.com\/v1 Widget/);

    // 5. An Audit rule: admitted with a warning, and its status says what is wrong.
    const audit = await kubectl(kc, ['apply', '-f', '-'], rule('audit-typo', 'Audit', 'apps', 'Deployment', 'object.spec.replcas <= 10'));
    assert.equal(audit.code, 0, audit.stderr);
    assert.match(audit.stderr, /Warning: expressions\[0\]\.expression: spec\.replcas: no such field in apps\/v1 Deployment/);
    const auditCondition = await until('audit-typo TypeChecked=False', 60_000, async () => {
      const c = await condition(kc, 'audit-typo', 'TypeChecked');
      return c?.status === 'False' ? c : undefined;
    });
    assert.equal(auditCondition.reason, 'FieldNotFound');
    // portal dev lists it among the rules that need attention.
    await until('portal dev listing audit-typo', 30_000, () => dev.output().includes('PortalClusterRule audit-typo reads fields its kinds do not have (FieldNotFound): spec.validate.cel.expressions[0].expression: spec.replcas'));

    // 6. A ValidatingAdmissionPolicy Portal audits: its type-checking warning as a Warning Event on the policy.
    const vap = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: vap-replicas-typo}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}]
  validations:
    - expression: "object.spec.replcas <= 10"
`;
    assert.equal((await kubectl(kc, ['apply', '-f', '-'], vap)).code, 0);
    const event = await until('a TypeCheckWarning Event on vap-replicas-typo', 60_000, async () => {
      const r = await kubectl(kc, ['get', 'events', '-n', 'default', '--field-selector', 'involvedObject.name=vap-replicas-typo', '-o', 'json']);
      const items = r.code === 0 ? (JSON.parse(r.stdout) as { items: { type: string; reason: string; message: string }[] }).items : [];
      return items.find((e) => e.reason === 'TypeCheckWarning');
    });
    assert.equal(event.type, 'Warning');
    assert.equal(event.message, 'ValidatingAdmissionPolicy vap-replicas-typo, spec.validations[0].expression: spec.replcas: no such field in apps/v1 Deployment');

    assert.equal(await dev.stop(), 0, dev.output());
  });
});
