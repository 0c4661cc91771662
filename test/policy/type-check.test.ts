/**
 * Issue 33 item 1: rules type-checked against the schemas of the kinds they
 * match — the field checker (src/policy/cel/field-check.ts), the `required`
 * check (src/policy/schema-required-check.ts), the rule-level verdict
 * (src/policy/type-check.ts) and what validateRule makes of it (refused for
 * Deny and Warn, a warning for Audit). Against the generated built-in
 * catalogue and CRDs converted from their manifests.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { validateRule } from '../../src/policy/index.ts';
import { builtinSchemas, layered } from '../../src/policy/kind-schemas/catalogue.ts';
import { CrdSchemaStore, crdKindSchemas } from '../../src/policy/kind-schemas/crd-schemas.ts';
import { typeCheckCondition, typeCheckRule, type TypeCheck } from '../../src/policy/type-check.ts';
import type { RuleSpec } from '../../src/policy/types.ts';
import { vapTypeWarnings } from '../../src/policy/vap/type-warnings.ts';
import type { ValidatingAdmissionPolicy } from '../../src/policy/vap/types.ts';

const DEPLOYMENT = [{ apiGroups: ['apps'], kinds: ['Deployment'] }];
const POD = [{ apiGroups: [''], kinds: ['Pod'] }];

function spec(expressions: string[], kinds: RuleSpec['match']['kinds'] = DEPLOYMENT, extra: Partial<RuleSpec['validate']['cel'] & object> = {}): RuleSpec {
  return { match: { kinds }, validate: { cel: { ...extra, expressions: expressions.map((expression) => ({ expression })) } } };
}

function problemsOf(check: TypeCheck): string[] {
  assert.equal(check.state, 'checked', JSON.stringify(check));
  return (check as { problems: string[] }).problems;
}

const problems = (expression: string, kinds = DEPLOYMENT): string[] => problemsOf(typeCheckRule(spec([expression], kinds), builtinSchemas()));

void describe('the field checker against built-in kinds', () => {
  void it('names the field and the kind of a typo', () => {
    assert.deepEqual(problems('object.spec.replcas <= 10'), ['spec.validate.cel.expressions[0].expression: spec.replcas: no such field in apps/v1 Deployment']);
    assert.deepEqual(problems('oldObject.spec.replcas <= 10'), ['spec.validate.cel.expressions[0].expression: spec.replcas: no such field in apps/v1 Deployment']);
    assert.deepEqual(problems("object.spec['replcas'] <= 10"), ['spec.validate.cel.expressions[0].expression: spec.replcas: no such field in apps/v1 Deployment']);
  });

  void it('accepts real fields, has(), optional access and maps', () => {
    for (const ok of [
      'object.spec.replicas <= 10',
      'has(object.spec.foo)',
      "object.metadata.?labels[?'team'].orValue('') == 'a'",
      'object.spec.?foo.orValue(1) == 1',
      "object.metadata.labels.team == 'a'",
      "object.metadata.annotations['any/key'] == 'a'",
      'object.spec.template.spec.containers.all(c, c.image != "")',
      'object.spec.template.spec.containers.all(i, c, i >= 0 && c.name != "")',
      'object.metadata.labels.all(k, k.startsWith("a"))',
      'object.spec.template.spec.containers.map(c, c.resources).size() > 0',
      // RawExtension-like fields and unknown JSON: not followed.
      'request.object.spec.whatever == 1',
      'params.anything == 1',
    ]) {
      assert.deepEqual(problems(ok), [], ok);
    }
  });

  void it('follows comprehension variables, cel.bind and the two sides of ?: and +', () => {
    assert.deepEqual(problems('object.spec.template.spec.containers.all(c, c.imagee != "")'), [
      'spec.validate.cel.expressions[0].expression: spec.template.spec.containers[*].imagee: no such field in apps/v1 Deployment',
    ]);
    assert.deepEqual(problems('cel.bind(s, object.spec, s.replcas > 1)'), ['spec.validate.cel.expressions[0].expression: spec.replcas: no such field in apps/v1 Deployment']);
    assert.deepEqual(problems('(true ? object.spec : oldObject.spec).replcas > 1'), ['spec.validate.cel.expressions[0].expression: spec.replcas: no such field in apps/v1 Deployment']);
    // A comprehension variable shadows `object`.
    assert.deepEqual(problems('[1].all(object, object.nothing == 1)'), []);
  });

  void it('follows composition variables bound to the object', () => {
    const s = spec(['variables.tmpl.spec.containres.size() > 0'], DEPLOYMENT, { variables: [{ name: 'tmpl', expression: 'object.spec.template' }] });
    assert.deepEqual(problemsOf(typeCheckRule(s, builtinSchemas())), ['spec.validate.cel.expressions[0].expression: spec.template.spec.containres: no such field in apps/v1 Deployment']);
    const inVariable = spec(['true'], DEPLOYMENT, { variables: [{ name: 'n', expression: 'object.spec.replcas' }], matchConditions: [{ name: 'm', expression: 'object.metadta.name != ""' }] });
    assert.deepEqual(problemsOf(typeCheckRule(inVariable, builtinSchemas())), [
      'spec.validate.cel.matchConditions[0].expression: metadta: no such field in apps/v1 Deployment',
      'spec.validate.cel.variables[0].expression: spec.replcas: no such field in apps/v1 Deployment',
    ]);
  });

  void it('refuses only what no matched kind can have', () => {
    const both = [{ apiGroups: ['apps'], kinds: ['Deployment', 'DaemonSet'] }];
    // DaemonSet has no replicas, Deployment does.
    assert.deepEqual(problems('object.spec.replicas > 1', both), []);
    assert.deepEqual(problems('object.spec.replcas > 1', both), ['spec.validate.cel.expressions[0].expression: spec.replcas: no such field in apps/v1 Deployment or apps/v1 DaemonSet']);
  });

  void it('checks messageExpression too', () => {
    const s: RuleSpec = { match: { kinds: POD }, validate: { cel: { expressions: [{ expression: 'true', messageExpression: 'object.spec.nodeNmae' }] } } };
    assert.deepEqual(problemsOf(typeCheckRule(s, builtinSchemas())), ['spec.validate.cel.expressions[0].messageExpression: spec.nodeNmae: no such field in v1 Pod']);
  });
});

void describe('the required check of a JSON Schema rule', () => {
  const schemaRule = (schema: Record<string, unknown>): RuleSpec => ({ match: { kinds: DEPLOYMENT }, validate: { schema } });
  void it('refuses a required property no matched kind has, along properties, items and allOf', () => {
    const s = schemaRule({
      properties: {
        spec: {
          required: ['replcas'],
          properties: { template: { properties: { spec: { properties: { containers: { items: { required: ['imagee'] } } } } } } },
        },
      },
      allOf: [{ required: ['spc'] }],
    });
    assert.deepEqual(problemsOf(typeCheckRule(s, builtinSchemas())), [
      'spec.validate.schema: required spec.replcas: no such field in apps/v1 Deployment',
      'spec.validate.schema: required spec.template.spec.containers[*].imagee: no such field in apps/v1 Deployment',
      'spec.validate.schema: required spc: no such field in apps/v1 Deployment',
    ]);
  });
  void it('leaves anyOf, oneOf, not and if alone, and maps open', () => {
    const s = schemaRule({
      anyOf: [{ required: ['nope'] }, { required: ['spec'] }],
      not: { required: ['nope'] },
      if: { required: ['nope'] },
      properties: { metadata: { properties: { labels: { required: ['team'] } } } },
    });
    assert.deepEqual(problemsOf(typeCheckRule(s, builtinSchemas())), []);
  });
});

const CRD_FILE = join(import.meta.dirname, '..', '..', 'charts', 'portal', 'crds', 'portal.dev_portalclusterrules.yaml');

void describe('custom kinds', () => {
  const crd = parseYaml(readFileSync(CRD_FILE, 'utf8')) as unknown;
  const store = new CrdSchemaStore();
  store.set('portalclusterrules.portal.dev', crd);
  const schemas = layered(builtinSchemas(), store);
  const kinds = [{ apiGroups: ['portal.dev'], kinds: ['PortalClusterRule'] }];

  void it('checks a rule on a CRD kind against the CRD structural schema', () => {
    assert.deepEqual(problemsOf(typeCheckRule(spec(['object.spec.enforcement == "Deny"', 'object.metadata.name != ""'], kinds), schemas)), []);
    assert.deepEqual(problemsOf(typeCheckRule(spec(['object.spec.enforcment == "Deny"'], kinds), schemas)), [
      'spec.validate.cel.expressions[0].expression: spec.enforcment: no such field in portal.dev/v1alpha1 PortalClusterRule',
    ]);
    // validate.schema is x-kubernetes-preserve-unknown-fields: anything below it goes.
    assert.deepEqual(problemsOf(typeCheckRule(spec(['object.spec.validate.schema.anything == 1'], kinds), schemas)), []);
  });

  void it('says the check was not done while the schema is unknown, and after the CRD is deleted', () => {
    const unknown = typeCheckRule(spec(['object.spec.nope == 1'], [{ apiGroups: ['example.com'], kinds: ['Widget'] }]), schemas);
    assert.equal(unknown.state, 'not-checked');
    assert.deepEqual(typeCheckCondition(unknown), { status: 'Unknown', reason: 'SchemaUnknown', message: 'no schema is known for Widget.example.com (not served yet?): field references were not checked' });
    const generation = store.generation;
    store.delete('portalclusterrules.portal.dev');
    assert.ok(store.generation > generation);
    assert.equal(typeCheckRule(spec(['object.spec.enforcment == "Deny"'], kinds), schemas).state, 'not-checked');
  });

  void it('a CRD never shadows a built-in kind', () => {
    const fake = { spec: { group: 'apps', names: { kind: 'Deployment', plural: 'deployments' }, versions: [{ name: 'v9', served: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', properties: { replcas: { type: 'integer' } } } } } } }] } };
    const s = new CrdSchemaStore();
    s.set('fake', fake);
    assert.equal(s.size, 0);
    assert.equal(crdKindSchemas(fake).schemas.length, 1);
  });
});

void describe('validateRule with the type check', () => {
  const rule = (enforcement: string, expression: string): Record<string, unknown> => ({
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalClusterRule',
    metadata: { name: 'max-replicas' },
    spec: { enforcement, match: { kinds: DEPLOYMENT }, validate: { cel: { expressions: [{ expression }] } } },
  });
  void it('refuses Deny and Warn rules, admits an Audit rule with the problem as a warning', () => {
    for (const enforcement of ['Deny', 'Warn']) {
      assert.deepEqual(validateRule(rule(enforcement, 'object.spec.replcas <= 10')), { ok: false, problems: ['spec.validate.cel.expressions[0].expression: spec.replcas: no such field in apps/v1 Deployment'] });
    }
    const audit = validateRule(rule('Audit', 'object.spec.replcas <= 10'));
    assert.equal(audit.ok, true);
    assert.deepEqual((audit as { warnings?: string[] }).warnings, ['spec.validate.cel.expressions[0].expression: spec.replcas: no such field in apps/v1 Deployment']);
    assert.deepEqual(validateRule(rule('Deny', 'object.spec.replicas <= 10')).ok, true);
  });
});

void describe('ValidatingAdmissionPolicy expression warnings', () => {
  const vap = (validations: { expression: string; messageExpression?: string }[], resourceRules: Record<string, unknown>[]) =>
    ({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: 'max-replicas' },
      spec: { matchConstraints: { resourceRules }, variables: [{ name: 'spec', expression: 'object.spec' }], validations },
    }) as unknown as ValidatingAdmissionPolicy;
  const deployments = [{ apiGroups: ['apps'], apiVersions: ['v1'], resources: ['deployments'], operations: ['CREATE'] }];

  void it('names the field and the kind, as status.typeChecking.expressionWarnings does', () => {
    assert.deepEqual(vapTypeWarnings(vap([{ expression: 'object.spec.replcas <= 10' }, { expression: 'variables.spec.replicas <= 10', messageExpression: 'string(variables.spec.replics)' }], deployments), builtinSchemas()), [
      { fieldRef: 'spec.validations[0].expression', warning: 'spec.replcas: no such field in apps/v1 Deployment' },
      { fieldRef: 'spec.validations[1].messageExpression', warning: 'spec.replics: no such field in apps/v1 Deployment' },
    ]);
  });

  void it('says nothing when the kinds cannot be checked: "*", subresources, unknown resources', () => {
    for (const rules of [
      [{ apiGroups: ['*'], apiVersions: ['*'], resources: ['deployments'] }],
      [{ apiGroups: ['apps'], apiVersions: ['*'], resources: ['deployments/scale'] }],
      [{ apiGroups: ['example.com'], apiVersions: ['*'], resources: ['widgets'] }],
    ]) {
      assert.deepEqual(vapTypeWarnings(vap([{ expression: 'object.spec.replcas <= 10' }], rules), builtinSchemas()), []);
    }
  });
});
