/**
 * What the API server rejects in a VAP or a binding (admissionregistration
 * validation), with its field error wording.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatFieldError, validateBinding, validatePolicy } from '../../../src/policy/vap/index.ts';

const policy = (spec: Record<string, unknown>, name = 'p'): Record<string, unknown> => ({
  apiVersion: 'admissionregistration.k8s.io/v1',
  kind: 'ValidatingAdmissionPolicy',
  metadata: { name },
  spec,
});
const binding = (spec: Record<string, unknown>): Record<string, unknown> => ({
  apiVersion: 'admissionregistration.k8s.io/v1',
  kind: 'ValidatingAdmissionPolicyBinding',
  metadata: { name: 'b' },
  spec,
});
const PODS = { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['pods'] }] };

function errors(r: ReturnType<typeof validatePolicy> | ReturnType<typeof validateBinding>): string[] {
  assert.equal(r.ok, false, 'expected the object to be rejected');
  return r.ok ? [] : r.errors.map(formatFieldError);
}

void describe('ValidatingAdmissionPolicyBinding validation', () => {
  void it('accepts a minimal binding', () => {
    assert.equal(validateBinding(binding({ policyName: 'p', validationActions: ['Deny'] })).ok, true);
  });

  void it('rejects Deny and Warn together, duplicates, unknown actions and an empty list', () => {
    assert.deepEqual(errors(validateBinding(binding({ policyName: 'p', validationActions: ['Deny', 'Warn'] }))), [
      'spec.validationActions: Invalid value: ["Deny","Warn"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)',
    ]);
    assert.deepEqual(errors(validateBinding(binding({ policyName: 'p', validationActions: ['Audit', 'Audit'] }))), [
      'spec.validationActions[1]: Duplicate value: "Audit"',
    ]);
    assert.deepEqual(errors(validateBinding(binding({ policyName: 'p', validationActions: ['Block'] }))), [
      'spec.validationActions[0]: Unsupported value: "Block": supported values: "Audit", "Deny", "Warn"',
    ]);
    assert.deepEqual(errors(validateBinding(binding({ policyName: 'p', validationActions: [] }))), [
      'spec.validationActions: Required value: at least one validation action is required',
    ]);
  });

  void it('requires policyName', () => {
    assert.deepEqual(errors(validateBinding(binding({ validationActions: ['Audit'] }))), ['spec.policyName: Required value']);
  });

  void it('checks paramRef: name xor selector, parameterNotFoundAction required', () => {
    assert.deepEqual(
      errors(validateBinding(binding({ policyName: 'p', validationActions: ['Deny'], paramRef: { name: 'x', selector: {}, parameterNotFoundAction: 'Deny' } }))),
      ['spec.paramRef.name: Forbidden: name and selector are mutually exclusive'],
    );
    assert.deepEqual(errors(validateBinding(binding({ policyName: 'p', validationActions: ['Deny'], paramRef: { parameterNotFoundAction: 'Allow' } }))), [
      'spec.paramRef: Required value: one of name or selector must be specified',
    ]);
    assert.deepEqual(errors(validateBinding(binding({ policyName: 'p', validationActions: ['Deny'], paramRef: { name: 'x' } }))), [
      'spec.paramRef.parameterNotFoundAction: Required value',
    ]);
  });
});

void describe('ValidatingAdmissionPolicy validation', () => {
  void it('accepts a minimal policy', () => {
    const r = validatePolicy(policy({ matchConstraints: PODS, validations: [{ expression: 'true' }] }));
    assert.equal(r.ok, true, JSON.stringify(r));
  });

  void it('requires matchConstraints.resourceRules and a validation or audit annotation', () => {
    assert.deepEqual(errors(validatePolicy(policy({ matchConstraints: {} }))), [
      'spec.matchConstraints.resourceRules: Required value',
      'spec.validations: Required value: validations or auditAnnotations must contain at least one item',
    ]);
  });

  void it('rejects a bad rule: missing lists, "*" with others, unknown operation and scope', () => {
    const m = { resourceRules: [{ apiGroups: ['*', 'apps'], apiVersions: ['v1'], operations: ['PATCH'], resources: ['*', 'pods'], scope: 'Global' }] };
    assert.deepEqual(errors(validatePolicy(policy({ matchConstraints: m, validations: [{ expression: 'true' }] }))), [
      'spec.matchConstraints.resourceRules[0].apiGroups: Invalid value: ["*","apps"]: if \'*\' is present, must not specify other API groups',
      'spec.matchConstraints.resourceRules[0].operations[0]: Unsupported value: "PATCH": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE"',
      'spec.matchConstraints.resourceRules[0].resources: Invalid value: ["*","pods"]: if \'*\' is present, must not specify other resources without subresources',
      'spec.matchConstraints.resourceRules[0].scope: Unsupported value: "Global": supported values: "*", "Cluster", "Namespaced"',
    ]);
  });

  void it('checks validations: expression required, message on one line, reason from the four', () => {
    const r = validatePolicy(policy({ matchConstraints: PODS, validations: [{ expression: '' }, { expression: 'true', message: 'a\nb', reason: 'Conflict' }] }));
    assert.deepEqual(errors(r), [
      'spec.validations[0].expression: Required value',
      'spec.validations[1].message: Invalid value: "a\\nb": message must not contain line breaks',
      'spec.validations[1].reason: Unsupported value: "Conflict": supported values: "Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized"',
    ]);
  });

  void it('checks variables and matchConditions: names, duplicates, failurePolicy, matchPolicy', () => {
    const r = validatePolicy(
      policy({
        matchConstraints: { ...PODS, matchPolicy: 'Fuzzy' },
        failurePolicy: 'Open',
        variables: [{ name: 'a-b', expression: '1' }, { name: 'x', expression: '1' }, { name: 'x', expression: '2' }],
        matchConditions: [{ name: 'ok', expression: 'true' }, { name: 'ok', expression: 'true' }],
        validations: [{ expression: 'true' }],
      }),
    );
    assert.deepEqual(errors(r), [
      'spec.matchConstraints.matchPolicy: Unsupported value: "Fuzzy": supported values: "Equivalent", "Exact"',
      'spec.failurePolicy: Unsupported value: "Open": supported values: "Fail", "Ignore"',
      'spec.matchConditions[1].name: Duplicate value: "ok"',
      'spec.variables[0].name: Invalid value: "a-b": name is not a valid CEL identifier',
      'spec.variables[2].name: Duplicate value: "x"',
    ]);
  });

  void it('reports an expression that does not compile with the compiler\'s message', () => {
    const check = (e: string): string | undefined => (e.includes('(') ? 'compilation failed: ERROR: <input>:1:2: Syntax error' : undefined);
    const r = validatePolicy(policy({ matchConstraints: PODS, validations: [{ expression: '((' }] }), check);
    assert.deepEqual(errors(r), ['spec.validations[0].expression: Invalid value: "((": compilation failed: ERROR: <input>:1:2: Syntax error']);
  });
});
