import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { EXCEPTION_CRD_OPENAPI_SCHEMA, RULE_CRD_OPENAPI_SCHEMA } from '../../src/policy/index.ts';
import { CRD_FILES, crdSchema, EXCEPTION_CRD_FILE, EXCEPTION_GENERATED_FILE, GENERATED_FILE, renderExceptionGenerated, renderGenerated, renderShared, SHARED_GENERATED_FILE } from './generate-crd-schema.ts';

type Schema = Record<string, unknown>;

/** Kubernetes structural-schema rule: every node has a type, unless it preserves unknown fields. */
function untyped(node: Schema, path: string, out: string[]): string[] {
  if (node['x-kubernetes-preserve-unknown-fields'] !== true && typeof node['type'] !== 'string') out.push(path);
  for (const [k, v] of Object.entries((node['properties'] as Record<string, Schema> | undefined) ?? {})) untyped(v, `${path}.${k}`, out);
  if (node['items']) untyped(node['items'] as Schema, `${path}[]`, out);
  if (typeof node['additionalProperties'] === 'object') untyped(node['additionalProperties'] as Schema, `${path}{}`, out);
  return out;
}

void describe('CRD manifests', () => {
  void it('the embedded schema is generated from the manifests (regenerate with test/policy/generate-crd-schema.ts)', () => {
    assert.equal(readFileSync(SHARED_GENERATED_FILE, 'utf8'), renderShared());
    assert.equal(readFileSync(GENERATED_FILE, 'utf8'), renderGenerated());
    assert.deepEqual(crdSchema(CRD_FILES.PortalRule), RULE_CRD_OPENAPI_SCHEMA);
    assert.deepEqual(crdSchema(CRD_FILES.PortalClusterRule), RULE_CRD_OPENAPI_SCHEMA);
    assert.equal(readFileSync(EXCEPTION_GENERATED_FILE, 'utf8'), renderExceptionGenerated());
    assert.deepEqual(crdSchema(EXCEPTION_CRD_FILE), EXCEPTION_CRD_OPENAPI_SCHEMA);
  });
  void it('PortalException: namespaced, status subresource, printer columns (rules, expiry, count), the rule match block plus names', () => {
    const crd = parse(readFileSync(EXCEPTION_CRD_FILE, 'utf8'));
    assert.equal(crd.metadata.name, 'portalexceptions.portal.dev');
    assert.equal(crd.spec.names.kind, 'PortalException');
    assert.equal(crd.spec.scope, 'Namespaced');
    const [version] = crd.spec.versions;
    assert.equal(version.name, 'v1alpha1');
    assert.deepEqual(version.subresources, { status: {} });
    assert.deepEqual(
      version.additionalPrinterColumns.map((c: Schema) => [c['name'], c['jsonPath']]),
      [
        ['Rules', '.spec.rules'],
        ['Expires', '.spec.expiresAt'],
        ['Exempted', '.status.exempted'],
        ['Ready', '.status.conditions[?(@.type=="Ready")].status'],
        ['Age', '.metadata.creationTimestamp'],
      ],
    );
    assert.deepEqual(untyped(version.schema.openAPIV3Schema, '', []), []);
    const spec = version.schema.openAPIV3Schema.properties.spec;
    assert.deepEqual(spec.required, ['rules', 'match', 'reason']);
    // The same match block as a rule's, plus names, with its lists bounded (an exception is about a few objects).
    const ruleMatch = (crdSchema(CRD_FILES.PortalRule) as { properties: { spec: { properties: { match: { properties: Record<string, Schema> } } } } }).properties.spec.properties.match.properties;
    const match = spec.properties.match.properties as Record<string, Schema>;
    assert.deepEqual(Object.keys(match).filter((k) => k !== 'names').sort(), Object.keys(ruleMatch).sort());
    const unbounded = (x: unknown): unknown =>
      Array.isArray(x) ? x.map(unbounded) : x !== null && typeof x === 'object' ? Object.fromEntries(Object.entries(x).filter(([k]) => k !== 'maxItems' && k !== 'maxLength' && k !== 'description').map(([k, v]) => [k, unbounded(v)])) : x;
    for (const k of ['namespaceSelector', 'objectSelector', 'namespaces', 'excludedNamespaces', 'kinds']) assert.deepEqual(unbounded(match[k]), unbounded(ruleMatch[k]), k);
    for (const k of ['kinds', 'namespaces', 'excludedNamespaces', 'names']) assert.equal(match[k]?.['maxItems'], 64, `${k} is bounded`);
    assert.equal(spec.properties.expiresAt.format, 'date-time');
  });
  for (const [kind, file] of Object.entries(CRD_FILES)) {
    void it(`${kind}: names, scope, status subresource, printer columns, structural schema`, () => {
      const crd = parse(readFileSync(file, 'utf8'));
      assert.equal(crd.apiVersion, 'apiextensions.k8s.io/v1');
      assert.equal(crd.spec.group, 'portal.dev');
      assert.equal(crd.spec.names.kind, kind);
      assert.equal(crd.metadata.name, `${crd.spec.names.plural}.portal.dev`);
      assert.deepEqual(crd.spec.names.shortNames, [kind === 'PortalRule' ? 'prule' : 'pcrule']);
      assert.equal(crd.spec.scope, kind === 'PortalRule' ? 'Namespaced' : 'Cluster');
      const [version] = crd.spec.versions;
      assert.equal(version.name, 'v1alpha1');
      assert.deepEqual(version.subresources, { status: {} });
      assert.deepEqual(
        version.additionalPrinterColumns.map((c: Schema) => [c['name'], c['jsonPath']]),
        [
          ['Enforcement', '.spec.enforcement'],
          ['Ready', '.status.conditions[?(@.type=="Ready")].status'],
          ['Coverage', '.status.conditions[?(@.type=="Covered")].reason'],
          ['Violations', '.status.violations'],
          ['Age', '.metadata.creationTimestamp'],
        ],
      );
      assert.deepEqual(untyped(version.schema.openAPIV3Schema, '', []), []);
      const spec = version.schema.openAPIV3Schema.properties.spec.properties;
      assert.equal(spec.match.properties.kinds.minItems, 1);
      assert.deepEqual(spec.enforcement.enum, ['Deny', 'Warn', 'Audit']);
      assert.equal(spec.validate.properties.schema['x-kubernetes-preserve-unknown-fields'], true);
    });
  }
});
