/**
 * VAP evaluation through the real CEL engine, checked against the behaviour
 * the Kubernetes documentation of ValidatingAdmissionPolicy describes
 * (messages, reasons and codes, validationActions, params, matchConditions,
 * failurePolicy, auditAnnotations, cost).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { binding, ctx, deployment, paramsFrom, policy, run, VALIDATION_FAILURE_ANNOTATION, VapSet, verdictOf, type KubeObjectLike, type ValidatingAdmissionPolicyBinding } from './support.ts';

void describe('validations and validationActions', () => {
  const set = new VapSet();
  set.upsertPolicy(policy('demo-policy.example.com', { validations: [{ expression: 'object.spec.replicas <= 5' }] }));
  set.upsertBinding(binding('demo-binding-test.example.com', { policyName: 'demo-policy.example.com' }));

  void it('Deny: the documented message for a failed expression, reason Invalid, code 422', () => {
    const { outcome, results } = run(set, deployment(6));
    assert.deepEqual(outcome.denial, {
      policy: 'demo-policy.example.com',
      binding: 'demo-binding-test.example.com',
      message: "ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5",
      reason: 'Invalid',
      code: 422,
    });
    assert.equal(verdictOf(results[0]!).result, 'fail');
    assert.equal(run(set, deployment(5)).outcome.denial, undefined);
    assert.equal(verdictOf(run(set, deployment(5)).results[0]!).result, 'pass');
  });

  void it('message, messageExpression and reason (Forbidden 403, Unauthorized 401, RequestEntityTooLarge 413)', () => {
    for (const [reason, code] of [['Forbidden', 403], ['Unauthorized', 401], ['RequestEntityTooLarge', 413]] as const) {
      const s = new VapSet();
      s.upsertPolicy(policy('p', { validations: [{ expression: 'object.spec.replicas <= 5', message: 'static', messageExpression: "'replicas: ' + string(object.spec.replicas)", reason }] }));
      s.upsertBinding(binding('b', { policyName: 'p' }));
      const d = run(s, deployment(7)).outcome.denial;
      assert.equal(d?.message, "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: replicas: 7");
      assert.equal(d?.reason, reason);
      assert.equal(d?.code, code);
    }
  });

  void it('Warn gives the documented warning and no denial; Audit the validation_failure annotation', () => {
    const s = new VapSet();
    s.upsertPolicy(policy('p', { validations: [{ expression: 'object.spec.replicas <= 5', message: 'too many replicas' }] }));
    s.upsertBinding(binding('b', { policyName: 'p', validationActions: ['Warn', 'Audit'] }));
    const { outcome, results } = run(s, deployment(6));
    assert.equal(outcome.denial, undefined);
    assert.deepEqual(outcome.warnings, ["Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': too many replicas"]);
    assert.deepEqual(JSON.parse(outcome.auditAnnotations[VALIDATION_FAILURE_ANNOTATION] ?? 'null'), [
      { message: 'too many replicas', policy: 'p', binding: 'b', expressionIndex: 0, validationActions: ['Warn', 'Audit'] },
    ]);
    assert.equal(verdictOf(results[0]!).result, 'warn');
  });

  void it('a policy without a binding does nothing; a binding without its policy is ignored', () => {
    const s = new VapSet();
    s.upsertPolicy(policy('p', { validations: [{ expression: 'false' }] }));
    s.upsertBinding(binding('b', { policyName: 'other' }));
    assert.deepEqual(run(s, deployment(1)).results, []);
  });

  void it("the binding's matchResources narrows the policy (skip when not selected)", () => {
    const s = new VapSet();
    s.upsertPolicy(policy('p', { validations: [{ expression: 'false' }] }));
    s.upsertBinding(binding('b', { policyName: 'p', matchResources: { namespaceSelector: { matchLabels: { env: 'prod' } } } }));
    const { results, outcome } = run(s, deployment(1));
    assert.equal(outcome.denial, undefined);
    assert.equal(verdictOf(results[0]!).result, 'skip');
  });
});

void describe('matchConditions, variables, failurePolicy', () => {
  void it('a false matchCondition skips, even when another errors', () => {
    const s = new VapSet();
    s.upsertPolicy(
      policy('p', {
        matchConditions: [
          { name: 'broken', expression: 'object.spec.nope.deeper == 1' },
          { name: 'only-labelled', expression: "has(object.metadata.labels) && 'team' in object.metadata.labels" },
        ],
        validations: [{ expression: 'false' }],
      }),
    );
    s.upsertBinding(binding('b', { policyName: 'p' }));
    const { results, outcome } = run(s, deployment(1));
    assert.equal(outcome.denial, undefined);
    assert.equal(verdictOf(results[0]!).result, 'skip');
  });

  void it('a matchCondition error follows failurePolicy: Fail denies, Ignore admits (verdict error either way)', () => {
    for (const failurePolicy of ['Fail', 'Ignore'] as const) {
      const s = new VapSet();
      s.upsertPolicy(policy('p', { failurePolicy, matchConditions: [{ name: 'x', expression: 'object.spec.nope == 1' }], validations: [{ expression: 'true' }] }));
      s.upsertBinding(binding('b', { policyName: 'p' }));
      const { results, outcome } = run(s, deployment(1));
      assert.equal(verdictOf(results[0]!).result, 'error');
      if (failurePolicy === 'Fail') assert.match(outcome.denial?.message ?? '', /^ValidatingAdmissionPolicy 'p' with binding 'b' denied request: expression 'object.spec.nope == 1' resulted in error: /);
      else assert.equal(outcome.denial, undefined);
    }
  });

  void it('variables are lazy, may use earlier ones, and are shared by validations', () => {
    const s = new VapSet();
    s.upsertPolicy(
      policy('p', {
        variables: [
          { name: 'replicas', expression: 'object.spec.replicas' },
          { name: 'tooMany', expression: 'variables.replicas > 3' },
          { name: 'neverRead', expression: 'object.spec.nope.nope' },
        ],
        validations: [{ expression: '!variables.tooMany', messageExpression: "'replicas ' + string(variables.replicas) + ' > 3'" }],
      }),
    );
    s.upsertBinding(binding('b', { policyName: 'p' }));
    assert.equal(run(s, deployment(2)).outcome.denial, undefined);
    assert.equal(run(s, deployment(4)).outcome.denial?.message, "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: replicas 4 > 3");
  });

  void it('a runtime error in a validation is an error verdict; under a Warn binding it warns (as upstream)', () => {
    const s = new VapSet();
    s.upsertPolicy(policy('p', { validations: [{ expression: 'object.spec.template.spec.containers.size() > 0' }] }));
    s.upsertBinding(binding('b', { policyName: 'p', validationActions: ['Warn'] }));
    const { results, outcome } = run(s, deployment(1));
    assert.equal(verdictOf(results[0]!).result, 'error');
    assert.equal(outcome.denial, undefined);
    assert.equal(outcome.warnings.length, 1);
  });

  void it('a cost overrun is an error, never a stall, and denies under Fail', () => {
    const s = new VapSet();
    s.upsertPolicy(policy('p', { validations: [{ expression: '[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, true))))))' }] }));
    s.upsertBinding(binding('b', { policyName: 'p' }));
    const { results, outcome } = run(s, deployment(1));
    assert.equal(verdictOf(results[0]!).result, 'error');
    assert.match(outcome.denial?.message ?? '', /cost/);
  });

  void it('a policy with an expression that does not compile errors on every request it matches', () => {
    const s = new VapSet();
    const errors = s.upsertPolicy(policy('p', { validations: [{ expression: 'object.spec.replicas <' }] }));
    assert.equal(errors.length, 1);
    assert.equal(errors[0]?.field, 'spec.validations[0].expression');
    assert.match(errors[0]?.error ?? '', /^ERROR: <input>:1:\d+: /);
    s.upsertBinding(binding('b', { policyName: 'p' }));
    assert.match(run(s, deployment(1)).outcome.denial?.message ?? '', /denied request: compilation failed: ERROR: <input>:1:/);
  });

  void it('auditAnnotations are published as <policy>/<key>; null and empty are left out', () => {
    const s = new VapSet();
    s.upsertPolicy(
      policy('p', {
        auditAnnotations: [
          { key: 'high-replica-count', valueExpression: "'Deployment spec.replicas set to ' + string(object.spec.replicas)" },
          { key: 'nothing', valueExpression: 'null' },
          { key: 'blank', valueExpression: "'  '" },
        ],
      }),
    );
    s.upsertBinding(binding('b', { policyName: 'p', validationActions: ['Audit'] }));
    assert.deepEqual(run(s, deployment(5)).outcome.auditAnnotations, { 'p/high-replica-count': 'Deployment spec.replicas set to 5' });
    assert.deepEqual(run(s, deployment(2)).outcome.auditAnnotations, { 'p/high-replica-count': 'Deployment spec.replicas set to 2' });
  });
});

void describe('params', () => {
  const limit = (name: string, max: number, labels: Record<string, string> = {}): KubeObjectLike => ({
    apiVersion: 'rules.example.com/v1',
    kind: 'ReplicaLimit',
    metadata: { name, namespace: 'default', labels },
    maxReplicas: max,
  });
  const withParams = (ref: NonNullable<ValidatingAdmissionPolicyBinding['spec']['paramRef']>): VapSet => {
    const s = new VapSet();
    s.upsertPolicy(
      policy('replica-limit', {
        paramKind: { apiVersion: 'rules.example.com/v1', kind: 'ReplicaLimit' },
        validations: [{ expression: 'object.spec.replicas <= params.maxReplicas', messageExpression: "'object.spec.replicas must be no greater than ' + string(params.maxReplicas)", reason: 'Invalid' }],
      }),
    );
    s.upsertBinding(binding('replica-limit-test', { policyName: 'replica-limit', paramRef: ref }));
    return s;
  };

  void it('paramRef.name: the named param in the request namespace', () => {
    const s = withParams({ name: 'test', parameterNotFoundAction: 'Deny' });
    const c = ctx(paramsFrom([limit('test', 3)]));
    assert.equal(run(s, deployment(3), c).outcome.denial, undefined);
    assert.equal(
      run(s, deployment(4), c).outcome.denial?.message,
      "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-test' denied request: object.spec.replicas must be no greater than 3",
    );
  });

  void it('paramRef.selector: evaluated once per matching param', () => {
    const s = withParams({ selector: { matchLabels: { tier: 'a' } }, parameterNotFoundAction: 'Allow' });
    const c = ctx(paramsFrom([limit('one', 10, { tier: 'a' }), limit('two', 2, { tier: 'a' }), limit('three', 1, { tier: 'b' })]));
    const { results } = run(s, deployment(5), c);
    assert.deepEqual(results.map((r) => [r.param, verdictOf(r).result]), [['default/one', 'pass'], ['default/two', 'fail']]);
  });

  void it('no param found: Allow admits, Deny is a configuration error under failurePolicy', () => {
    const allow = withParams({ name: 'missing', parameterNotFoundAction: 'Allow' });
    assert.equal(run(allow, deployment(50)).outcome.denial, undefined);
    const deny = withParams({ name: 'missing', parameterNotFoundAction: 'Deny' });
    assert.equal(
      run(deny, deployment(1)).outcome.denial?.message,
      "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-test' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction",
    );
  });

  void it('an unknown paramKind is a configuration error', () => {
    const s = new VapSet();
    s.upsertPolicy(policy('p', { paramKind: { apiVersion: 'x.example.com/v1', kind: 'Nope' }, validations: [{ expression: 'true' }] }));
    s.upsertBinding(binding('b', { policyName: 'p', paramRef: { name: 'x', parameterNotFoundAction: 'Deny' } }));
    assert.equal(
      run(s, deployment(1)).outcome.denial?.message,
      "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed to configure binding: paramKind kind `x.example.com/v1, Kind=Nope` not known",
    );
  });
});

describe('expression cost estimates (/debug/vars)', () => {
  it('VapSet.expressionCosts gives each compiled expression its field and estimated worst-case cost', async () => {
    const { VapSet: Set_ } = await import('../../../src/policy/vap/index.ts');
    const set = new Set_();
    set.upsertPolicy({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: 'costs' },
      spec: {
        matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }] },
        variables: [{ name: 'names', expression: 'object.spec.containers.map(c, c.name)' }],
        validations: [{ expression: "variables.names.all(n, n != 'x')", messageExpression: "'bad: ' + variables.names.join(',')" }, { expression: 'nope(' }],
      },
    } as never);
    const [entry] = set.expressionCosts();
    assert.equal(entry?.policy, 'costs');
    const fields = entry?.expressions.map((e) => e.field);
    // The expression that does not compile has no estimate.
    assert.deepEqual(fields, ['spec.variables[0].expression', 'spec.validations[0].expression', 'spec.validations[0].messageExpression']);
    for (const e of entry?.expressions ?? []) {
      assert.ok(e.estimatedCost > 0 && Number.isFinite(e.estimatedCost), `${e.field}: ${e.estimatedCost}`);
      assert.equal(e.fallback, undefined);
    }
  });
});
