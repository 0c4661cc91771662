/**
 * Issue 33 item 1, hostile inputs of the type check: the work is bounded by
 * the rule and by the schema, never by what a CRD author or a rule author
 * can make it walk. A CRD schema wider or deeper than the conversion bounds
 * is cut (the rest unchecked, never refused); a rule matching `*` kinds or
 * more than MAX_CHECKED_KINDS is not checked and says so; an expression of
 * the largest size a rule may have is walked once. Assertions are on
 * results, never on time.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validateRule } from '../../src/policy/index.ts';
import { MAX_CEL_SOURCE_LENGTH } from '../../src/policy/cel-rule.ts';
import { builtinSchemas, layered } from '../../src/policy/kind-schemas/catalogue.ts';
import { CrdSchemaStore, crdKindSchemas } from '../../src/policy/kind-schemas/crd-schemas.ts';
import { MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES } from '../../src/policy/kind-schemas/schema-node.ts';
import { MAX_CHECKED_KINDS, typeCheckCondition, typeCheckRule } from '../../src/policy/type-check.ts';
import { requiredProblems } from '../../src/policy/schema-required-check.ts';
import type { RuleSpec } from '../../src/policy/types.ts';

const crd = (schema: unknown) => ({
  spec: { group: 'example.com', names: { kind: 'Widget', plural: 'widgets' }, versions: [{ name: 'v1', served: true, schema: { openAPIV3Schema: schema } }] },
});

const celSpec = (expression: string, kinds: RuleSpec['match']['kinds']): RuleSpec => ({ match: { kinds }, validate: { cel: { expressions: [{ expression }] } } });

void describe('hostile type checks', () => {
  void it('a CRD schema wider than the bound is cut: what is past the bound is not refused', () => {
    const props: Record<string, unknown> = {};
    for (let i = 0; i < MAX_SCHEMA_NODES * 2; i++) props[`f${i}`] = { type: 'string' };
    const converted = crdKindSchemas(crd({ type: 'object', properties: { spec: { type: 'object', properties: props } } }));
    assert.deepEqual(converted.truncated, ['v1']);
    const store = new CrdSchemaStore();
    store.set('widgets.example.com', crd({ type: 'object', properties: { spec: { type: 'object', properties: props } } }));
    const schemas = layered(builtinSchemas(), store);
    const kinds = [{ apiGroups: ['example.com'], kinds: ['Widget'] }];
    // f0 is inside the bound; the last field is past it (converted to `any`): neither is refused.
    const r = typeCheckRule(celSpec(`object.spec.f0 == '' && object.spec.f${MAX_SCHEMA_NODES * 2 - 1} == ''`, kinds), schemas);
    assert.equal(r.state, 'checked');
    assert.deepEqual((r as { problems: string[] }).problems, []);
  });

  void it('a CRD schema nested 100,000 deep is cut at the depth bound, without exhausting the stack', () => {
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 100_000; i++) deep = { type: 'object', properties: { a: deep } };
    const converted = crdKindSchemas(crd(deep));
    assert.deepEqual(converted.truncated, ['v1']);
    const store = new CrdSchemaStore();
    store.set('widgets.example.com', crd(deep));
    const path = `object${'.a'.repeat(MAX_SCHEMA_DEPTH + 10)}.nope == 1`;
    const r = typeCheckRule(celSpec(path, [{ apiGroups: ['example.com'], kinds: ['Widget'] }]), layered(builtinSchemas(), store));
    assert.deepEqual((r as { problems: string[] }).problems, []);
    // Near the root the schema is still followed.
    const near = typeCheckRule(celSpec('object.a.nope == 1', [{ apiGroups: ['example.com'], kinds: ['Widget'] }]), layered(builtinSchemas(), store));
    assert.deepEqual((near as { problems: string[] }).problems, ['spec.validate.cel.expressions[0].expression: a.nope: no such field in example.com/v1 Widget']);
  });

  void it('a rule matching "*" kinds is not checked, and says so', () => {
    for (const kinds of [[{ apiGroups: ['*'], kinds: ['Deployment'] }], [{ apiGroups: ['apps'], kinds: ['*'] }]]) {
      const r = typeCheckRule(celSpec('object.spec.replcas > 1', kinds), builtinSchemas());
      assert.equal(typeCheckCondition(r).status, 'Unknown');
      assert.equal(typeCheckCondition(r).reason, 'WildcardKinds');
    }
  });

  void it('a rule matching more kinds than the bound is not checked, and says so', () => {
    const many = Array.from({ length: MAX_CHECKED_KINDS + 1 }, (_, i) => `Kind${i}`);
    const r = typeCheckRule(celSpec('object.spec.replcas > 1', [{ apiGroups: ['apps'], kinds: many }]), builtinSchemas());
    assert.deepEqual(typeCheckCondition(r), { status: 'Unknown', reason: 'TooManyKinds', message: `the rule matches ${MAX_CHECKED_KINDS + 1} kinds, more than the ${MAX_CHECKED_KINDS} checked: field references are not checked` });
  });

  void it('a rule with the most CEL a rule may have is checked in one walk, each typo named once per expression', () => {
    const one = '(object.spec.replcas > 1) && ';
    const count = Math.floor((MAX_CEL_SOURCE_LENGTH - 10) / one.length / 8);
    // Eight expressions (the per-expression length bound), together near the per-rule bound.
    const expressions = Array.from({ length: 8 }, () => ({ expression: `${one.repeat(count)}true` }));
    const r = validateRule({ apiVersion: 'portal.dev/v1alpha1', kind: 'PortalClusterRule', metadata: { name: 'big' }, spec: { match: { kinds: [{ apiGroups: ['apps'], kinds: ['Deployment'] }] }, validate: { cel: { expressions } } } });
    assert.equal(r.ok, false);
    assert.equal((r as { problems: string[] }).problems.length, 8);
  });

  void it('a YAML-aliased schema (one subtree reached 2^40 ways) is walked within the node bound', () => {
    let s: Record<string, unknown> = { required: ['nope'] };
    for (let i = 0; i < 40; i++) s = { allOf: [s, s] };
    const root = { path: '', types: (builtinSchemas().schemasOf('apps', 'Deployment') ?? []).map((k) => ({ label: 'apps/v1 Deployment', type: k.root, components: k.components })) };
    assert.deepEqual(requiredProblems(s, root), [{ path: 'nope', kinds: ['apps/v1 Deployment'] }]);
  });
});
