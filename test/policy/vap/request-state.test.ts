/**
 * What the evaluator keeps between policies and between requests (issue 19's
 * VAP speed work): match criteria judged once per request, one activation per
 * request with the variables object switched per policy, values shared by
 * policies declaring the same variable, meters reused per nesting depth, and a
 * binding's shared (frozen) result when it admits. None of it may carry one
 * policy's or one request's outcome into another's.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { binding, deployment, NAMESPACE, policy, run, VapSet, verdictOf } from './support.ts';

const NESTED_COST =
  '[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, true))))))';

void describe('per-request state of the VAP evaluator', () => {
  void it('a binding that admits gives the same frozen result on every request; a failure in between gets its own', () => {
    const s = new VapSet();
    s.upsertPolicy(policy('p', { validations: [{ expression: 'object.spec.replicas <= 5', message: 'too many' }], auditAnnotations: [{ key: 'big', valueExpression: "object.spec.replicas > 3 ? 'yes' : ''" }] }));
    s.upsertBinding(binding('b', { policyName: 'p' }));
    const first = run(s, deployment(1)).results[0];
    const failing = run(s, deployment(6));
    const annotated = run(s, deployment(4));
    const again = run(s, deployment(2)).results[0];
    assert.equal(first, again);
    assert.ok(Object.isFrozen(first) && Object.isFrozen(first?.failures));
    assert.deepEqual(first?.failures, []);
    assert.equal(failing.results[0]?.result, 'fail');
    assert.notEqual(failing.results[0], first);
    assert.equal(failing.outcome.denial?.message, "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: too many");
    assert.deepEqual(failing.outcome.auditAnnotations, { 'p/big': 'yes' });
    assert.deepEqual(annotated.outcome.auditAnnotations, { 'p/big': 'yes' });
    assert.equal(annotated.results[0]?.result, 'pass');
    assert.deepEqual(run(s, deployment(1)).outcome.auditAnnotations, {});
  });

  void it('policies with a variable of the same name see their own values; the same declaration is shared within a request only', () => {
    const s = new VapSet();
    // a and c declare `n` the same way (shared), b differently; d reads `n` through a second variable.
    s.upsertPolicy(policy('a', { variables: [{ name: 'n', expression: 'object.spec.replicas' }], validations: [{ expression: 'variables.n <= 5', message: 'a' }] }));
    s.upsertPolicy(policy('b', { variables: [{ name: 'n', expression: 'object.spec.replicas * 10' }], validations: [{ expression: 'variables.n <= 30', message: 'b' }] }));
    s.upsertPolicy(policy('c', { variables: [{ name: 'n', expression: 'object.spec.replicas' }], validations: [{ expression: 'variables.n != 4', message: 'c' }] }));
    s.upsertPolicy(
      policy('d', {
        variables: [
          { name: 'n', expression: 'object.spec.replicas' },
          { name: 'twice', expression: 'variables.n * 2' },
        ],
        validations: [{ expression: 'variables.twice < 12', message: 'd' }],
      }),
    );
    for (const name of ['a', 'b', 'c', 'd']) s.upsertBinding(binding(`${name}-binding`, { policyName: name }));
    const failed = (replicas: number): string[] => run(s, deployment(replicas)).results.filter((r) => r.result !== 'pass').map((r) => r.failures[0]?.message ?? r.result);
    assert.deepEqual(failed(2), []);
    assert.deepEqual(failed(4), ['b', 'c']);
    assert.deepEqual(failed(6), ['a', 'b', 'd']);
    assert.deepEqual(failed(3), []);
  });

  void it('a cost overrun in one policy leaves the next policy and the next request their own budget and meter', () => {
    const s = new VapSet();
    s.upsertPolicy(policy('a-costly', { variables: [{ name: 'v', expression: NESTED_COST }], validations: [{ expression: 'variables.v' }] }));
    s.upsertPolicy(policy('b-cheap', { variables: [{ name: 'v', expression: 'object.spec.replicas < 5' }], validations: [{ expression: 'variables.v', message: 'cheap' }] }));
    s.upsertBinding(binding('a', { policyName: 'a-costly' }));
    s.upsertBinding(binding('b', { policyName: 'b-cheap' }));
    for (let i = 0; i < 2; i++) {
      const { results } = run(s, deployment(1));
      assert.equal(verdictOf(results[0] as (typeof results)[number]).result, 'error');
      assert.deepEqual(
        results[0]?.problems.map((p) => p.field),
        ['spec.variables[0].expression'],
      );
      assert.equal(results[1]?.result, 'pass');
      assert.equal(run(s, deployment(7)).results[1]?.failures[0]?.message, 'cheap');
    }
  });

  void it('policies with the same match criteria share one judgement; a binding selector still selects per binding', () => {
    const s = new VapSet();
    s.upsertPolicy(policy('p1', { validations: [{ expression: 'false', message: 'p1' }] }));
    s.upsertPolicy(policy('p2', { validations: [{ expression: 'false', message: 'p2' }] }));
    s.upsertBinding(binding('b1', { policyName: 'p1', matchResources: { namespaceSelector: { matchLabels: { env: 'prod' } } } }));
    s.upsertBinding(binding('b2', { policyName: 'p2', matchResources: { namespaceSelector: { matchLabels: { env: 'test' } } } }));
    const { results } = run(s, deployment(1));
    assert.deepEqual(
      results.map((r) => [r.policy, r.result]),
      [
        ['p1', 'skip'],
        ['p2', 'fail'],
      ],
    );
    assert.equal(results[0]?.skipReason, "binding 'b1' does not select the object");
    // The namespace is judged per request: without it the selector is a configuration error.
    const missing = s.evaluate(deployment(1), { namespaceObject: null, params: { scope: () => ({ ok: false, error: 'none' }), find: () => ({ ok: true, objects: [] }) } });
    assert.deepEqual(
      missing.map((r) => [r.policy, r.result, r.denyErrors[0]]),
      [
        ['p1', 'error', 'failed to configure binding: namespaces "default" not found'],
        ['p2', 'error', 'failed to configure binding: namespaces "default" not found'],
      ],
    );
    assert.equal(run(s, deployment(1)).results[1]?.result, 'fail');
    assert.ok(NAMESPACE.metadata.labels.env === 'test');
  });
});
