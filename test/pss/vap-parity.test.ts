/**
 * policies/pod-security-vap against policies/pod-security: the same controls
 * by name, every VAP valid as the API server checks it (expressions compiled),
 * and the same verdict from both libraries on every fixture in
 * test/fixtures/pss (fail for a Deny control, warn for a Warn one, pass).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { policyCompileProblems } from '../../src/sources/vap-files.ts';
import { evaluate, RuleSet } from '../../src/policy/index.ts';
import {
  formatFieldError,
  guessResource,
  validateBinding,
  validatePolicy,
  VapSet,
  vapVerdicts,
  type ValidatingAdmissionPolicy,
  type ValidatingAdmissionPolicyBinding,
} from '../../src/policy/vap/index.ts';
import { auditInput, FIXTURES, loadFixtures, loadRuleFiles, POLICIES } from './fixtures.ts';

const VAP_DIR = join(POLICIES, 'pod-security-vap');
const schemaRules = loadRuleFiles(join(POLICIES, 'pod-security'));
const vapFiles = readdirSync(VAP_DIR)
  .filter((f) => f.endsWith('.yaml'))
  .sort()
  .map((f) => ({ file: f, docs: parseAllDocuments(readFileSync(join(VAP_DIR, f), 'utf8')).map((d) => d.toJS() as Record<string, unknown>) }));

const vaps = new VapSet();
const policies = new Map<string, ValidatingAdmissionPolicy>();
for (const { docs } of vapFiles) {
  for (const d of docs) {
    if (d['kind'] === 'ValidatingAdmissionPolicy') {
      const p = d as unknown as ValidatingAdmissionPolicy;
      policies.set(p.metadata.name, p);
      vaps.upsertPolicy(p);
    } else vaps.upsertBinding(d as unknown as ValidatingAdmissionPolicyBinding);
  }
}
const schemaSet = new RuleSet();
for (const r of schemaRules) schemaSet.upsert(r.object);

void describe('pod-security-vap library', () => {
  void it('has one policy and one binding per JSON Schema control, with the same names', () => {
    assert.deepEqual(vapFiles.map((f) => f.file.replace(/\.yaml$/, '')).sort(), schemaRules.map((r) => r.object.metadata.name).sort());
    for (const { file, docs } of vapFiles) {
      assert.deepEqual(docs.map((d) => d['kind']), ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'], file);
    }
  });

  for (const { file, docs } of vapFiles) {
    void it(`${file}: valid as the API server checks it, expressions compile, binding action follows the enforcement`, () => {
      const [p, b] = docs;
      const vp = validatePolicy(p);
      assert.ok(vp.ok, vp.ok ? '' : vp.errors.map(formatFieldError).join('\n'));
      assert.deepEqual(policyCompileProblems(vp.value), []);
      const vb = validateBinding(b);
      assert.ok(vb.ok, vb.ok ? '' : vb.errors.map(formatFieldError).join('\n'));
      const name = vp.value.metadata.name;
      assert.equal(vb.value.spec.policyName, name);
      const rule = schemaRules.find((r) => r.object.metadata.name === name)?.object;
      assert.deepEqual(vb.value.spec.validationActions, [rule?.spec.enforcement === 'Deny' ? 'Deny' : 'Warn']);
    });
  }
});

void describe('same verdicts as policies/pod-security on every fixture', () => {
  for (const fx of loadFixtures(join(FIXTURES, 'pss'))) {
    const label = `${fx.group}/${fx.file.split('/').pop() ?? ''}`;
    void it(label, () => {
      const input = auditInput(fx.object);
      const expected = Object.fromEntries(evaluate(schemaSet, input).map((v) => [v.rule, v.result]));
      const results = vaps.evaluate(
        {
          operation: 'AUDIT',
          kind: input.kind,
          resource: { group: input.kind.group, version: input.kind.version, resource: guessResource(input.kind.kind) },
          subResource: '',
          namespace: input.namespace,
          name: input.name,
          namespaced: true,
          object: input.object,
          oldObject: null,
        },
        { namespaceObject: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: input.namespace, labels: input.namespaceLabels ?? {} } }, params: { scope: () => ({ ok: false, error: 'no params' }), find: () => ({ ok: true, objects: [] }) } },
      );
      const verdicts = vapVerdicts(results, policies);
      const actual = Object.fromEntries(verdicts.map((v) => [v.rule, v.result]));
      const messages = verdicts.filter((v) => v.result !== expected[v.rule]).map((v) => `${v.rule}: ${v.message}`);
      assert.deepEqual(actual, expected, messages.join('\n'));
    });
  }
});
