import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decide, decideAdmission, evaluate, exceptionKey, RuleSet, type EvaluationInput, type KindMatch, type Operation, type PortalRuleObject, type RuleSpec } from '../../src/policy/index.ts';
import { clusterRule, exception, namespacedRule, NO_PRIVILEGED_SCHEMA } from './support.ts';

const KINDS = [
  { group: '', kind: 'Pod' },
  { group: 'apps', kind: 'Deployment' },
  { group: 'batch', kind: 'CronJob' },
  { group: 'example.com', kind: 'Deployment' },
  { group: '', kind: 'Namespace' },
  { group: '', kind: 'ConfigMap' },
];
const OPERATIONS: (Operation | 'AUDIT')[] = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT', 'AUDIT'];
const enforcement = fc.constantFrom('Deny' as const, 'Warn' as const, 'Audit' as const);

const ruleArb = fc.record({
  name: fc.constantFrom('a', 'b', 'c', 'd'),
  namespaced: fc.boolean(),
  enforcement,
  failurePolicy: fc.constantFrom(undefined, 'Fail' as const, 'Ignore' as const),
  kinds: fc.constantFrom(['Pod'], ['*'], ['Deployment'], ['Pod', 'Namespace'], ['*', 'Pod']),
  apiGroups: fc.constantFrom([''], ['*'], ['apps']),
  subresources: fc.constantFrom(undefined, ['status'], ['*']),
  operations: fc.constantFrom(undefined, ['DELETE' as const], ['CREATE' as const, 'UPDATE' as const]),
  namespaces: fc.constantFrom(undefined, ['prod-*'], ['default']),
  namespaceSelector: fc.constantFrom(undefined, { matchLabels: { env: 'prod' } }),
  objectSelector: fc.constantFrom(undefined, { matchLabels: { app: 'web' } }),
  broken: fc.boolean(),
  // Pod Security version pinning: the schema checks only from v1.30 on.
  versioned: fc.boolean(),
  pinned: fc.constantFrom(undefined, 'latest', 'v1.29'),
  // validate.cel beside or instead of the schema, including CEL outcomes that skip or err.
  validation: fc.constantFrom('schema', 'cel', 'both', 'cel-skip', 'cel-error', 'cel-cost'),
});

const NO_PRIVILEGED_CEL = { expressions: [{ expression: 'object.spec.containers.all(c, !c.?securityContext.?privileged.orValue(false))', message: 'no privileged' }] };
const HUNDRED = `[${Array.from({ length: 100 }, (_, i) => i).join(',')}]`;
const CEL_VARIANTS: Record<string, RuleSpec['validate']> = {
  schema: { message: 'Privileged containers are not allowed.', schema: NO_PRIVILEGED_SCHEMA },
  cel: { cel: NO_PRIVILEGED_CEL },
  both: { schema: NO_PRIVILEGED_SCHEMA, cel: NO_PRIVILEGED_CEL },
  'cel-skip': { cel: { ...NO_PRIVILEGED_CEL, matchConditions: [{ name: 'labelled', expression: "object.metadata.?labels[?'app'].orValue('') == 'web'" }] } },
  'cel-error': { cel: { expressions: [{ expression: 'object.spec.nope.size() == 0' }] } },
  'cel-cost': { cel: { expressions: [{ expression: `${HUNDRED}.all(a, ${HUNDRED}.all(b, ${HUNDRED}.all(c, a + b + c >= 0)))` }] } },
};

type Generated<A> = A extends fc.Arbitrary<infer T> ? T : never;

function toRule(r: Generated<typeof ruleArb>): PortalRuleObject {
  const kind: KindMatch = { apiGroups: [...r.apiGroups], kinds: [...r.kinds], ...(r.subresources ? { subresources: [...r.subresources] } : {}) };
  const spec: Partial<RuleSpec> = {
    enforcement: r.enforcement,
    ...(r.failurePolicy ? { failurePolicy: r.failurePolicy } : {}),
    match: {
      kinds: [kind],
      ...(r.operations ? { operations: [...r.operations] } : {}),
      ...(r.namespaces ? { namespaces: [...r.namespaces] } : {}),
      ...(r.namespaceSelector ? { namespaceSelector: { matchLabels: { ...r.namespaceSelector.matchLabels } } } : {}),
      ...(r.objectSelector ? { objectSelector: { matchLabels: { ...r.objectSelector.matchLabels } } } : {}),
    },
    ...(r.pinned ? { podSecurity: { version: r.pinned } } : {}),
    // A schema that never compiles: the rule stays in force as an `error`.
    validate: r.broken
      ? { schema: { type: 'object', notAKeyword: true } }
      : r.versioned
        ? { schema: { if: { minPodSecurityVersion: 'v1.30' }, then: NO_PRIVILEGED_SCHEMA } }
        : (CEL_VARIANTS[r.validation] ?? CEL_VARIANTS['schema']!),
  };
  return r.namespaced ? namespacedRule('default', r.name, spec) : clusterRule(r.name, spec);
}

const inputArb = fc.record({
  kind: fc.constantFrom(...KINDS),
  operation: fc.constantFrom(...OPERATIONS),
  subResource: fc.constantFrom('', 'status', 'scale'),
  namespace: fc.constantFrom('', 'default', 'prod-eu'),
  privileged: fc.boolean(),
  labelled: fc.boolean(),
  namespaceLabels: fc.constantFrom(
    undefined,
    { env: 'prod' },
    {},
    { 'pod-security.kubernetes.io/enforce-version': 'v1.29' },
    { env: 'prod', 'pod-security.kubernetes.io/enforce-version': 'v1.30' },
    { 'pod-security.kubernetes.io/enforce-version': 'not-a-version' },
  ),
  hasObject: fc.boolean(),
});

function toInput(i: Generated<typeof inputArb>): EvaluationInput {
  const podSpec = { containers: [{ name: 'c', image: 'x', securityContext: { privileged: i.privileged } }] };
  const object = {
    apiVersion: 'v1',
    kind: i.kind.kind,
    metadata: { name: 'o', namespace: i.namespace, ...(i.labelled ? { labels: { app: 'web' } } : {}) },
    spec: i.kind.kind === 'Pod' ? podSpec : { template: { spec: podSpec }, jobTemplate: { spec: { template: { spec: podSpec } } } },
  };
  return {
    operation: i.operation,
    kind: { ...i.kind, version: 'v1' },
    subResource: i.subResource,
    namespace: i.namespace,
    name: 'o',
    object: i.hasObject ? object : null,
    oldObject: i.operation === 'DELETE' && i.hasObject ? object : null,
    namespaceLabels: i.namespaceLabels,
  };
}

// PortalExceptions (issue 18): every field that changes coverage, in the
// namespaces the inputs use and in the privileged one.
const NOW = Date.parse('2026-06-01T00:00:00Z');
const exceptionArb = fc.record({
  namespace: fc.constantFrom('default', 'default', 'prod-eu', 'portal-system'),
  rules: fc.constantFrom(['a', 'b', 'c', 'd', 'default/a', 'default/b', 'default/c', 'default/d'], ['a', 'b', 'c', 'd'], ['a'], ['b', 'c'], ['default/a'], ['d', 'default/b']),
  kinds: fc.constantFrom(['Pod'], ['Pod'], ['*'], ['Deployment']),
  apiGroups: fc.constantFrom([''], ['*']),
  // Each narrowing field is mostly absent, so that some exceptions cover.
  operations: fc.constantFrom(undefined, undefined, ['CREATE' as const], ['DELETE' as const]),
  names: fc.constantFrom(undefined, undefined, ['o'], ['x*']),
  namespaces: fc.constantFrom(undefined, undefined, undefined, ['prod-*']),
  namespaceSelector: fc.constantFrom(undefined, undefined, undefined, { matchLabels: { env: 'prod' } }),
  objectSelector: fc.constantFrom(undefined, undefined, undefined, { matchLabels: { app: 'web' } }),
  podTemplates: fc.constantFrom(undefined, false),
  condition: fc.constantFrom(undefined, undefined, 'true', 'false', 'object.spec.nope.size() == 0'),
  expires: fc.constantFrom(undefined, undefined, -1000, 1000, 1000),
});

function toException(e: Generated<typeof exceptionArb>, i: number) {
  return exception(e.namespace, `e${i}`, {
    rules: [...e.rules],
    match: {
      kinds: [{ apiGroups: [...e.apiGroups], kinds: [...e.kinds] }],
      ...(e.operations ? { operations: [...e.operations] } : {}),
      ...(e.names ? { names: [...e.names] } : {}),
      ...(e.namespaces ? { namespaces: [...e.namespaces] } : {}),
      ...(e.namespaceSelector ? { namespaceSelector: { matchLabels: { ...e.namespaceSelector.matchLabels } } } : {}),
      ...(e.objectSelector ? { objectSelector: { matchLabels: { ...e.objectSelector.matchLabels } } } : {}),
    },
    ...(e.podTemplates === false ? { podTemplates: false } : {}),
    ...(e.condition ? { matchConditions: [{ name: 'c', expression: e.condition }] } : {}),
    ...(e.expires !== undefined ? { expiresAt: new Date(NOW + e.expires).toISOString() } : {}),
  });
}

// Rules and requests that match more often than ruleArb's and inputArb's, so exemptions are frequent.
const matchedRuleArb: typeof ruleArb = fc.record({
  name: fc.constantFrom('a', 'b', 'c', 'd'),
  namespaced: fc.boolean(),
  enforcement,
  failurePolicy: fc.constantFrom(undefined, 'Fail' as const, 'Ignore' as const),
  kinds: fc.constantFrom(['Pod'], ['*'], ['Deployment'], ['Pod', 'Namespace']),
  apiGroups: fc.constantFrom([''], ['*'], ['apps']),
  subresources: fc.constantFrom(undefined, ['*']),
  operations: fc.constantFrom(undefined, undefined, ['DELETE' as const]),
  namespaces: fc.constantFrom(undefined, undefined, ['default']),
  namespaceSelector: fc.constantFrom(undefined, undefined, { matchLabels: { env: 'prod' } }),
  objectSelector: fc.constantFrom(undefined, undefined, { matchLabels: { app: 'web' } }),
  broken: fc.constantFrom(false, false, true),
  versioned: fc.constantFrom(false, false, true),
  pinned: fc.constantFrom(undefined, 'latest', 'v1.29'),
  validation: fc.constantFrom('schema', 'cel', 'both', 'cel-skip', 'cel-error'),
});
const matchedInputArb = fc.record({
  kind: fc.constantFrom(KINDS[0]!, KINDS[0]!, KINDS[1]!, KINDS[4]!),
  operation: fc.constantFrom<Operation | 'AUDIT'>('CREATE', 'UPDATE', 'DELETE', 'AUDIT'),
  subResource: fc.constantFrom('', '', '', 'status'),
  namespace: fc.constantFrom('', 'default', 'default', 'prod-eu'),
  privileged: fc.constantFrom(true, true, false),
  labelled: fc.boolean(),
  namespaceLabels: fc.constantFrom(undefined, { env: 'prod' }, {}),
  hasObject: fc.constantFrom(true, true, true, false),
});

void describe('decideAdmission', () => {
  void it('a replica built from snapshot() (as an evaluation worker builds it, adr/0013) judges exceptions exactly as the original', () => {
    fc.assert(
      fc.property(
        fc.array(matchedRuleArb, { minLength: 1, maxLength: 6 }),
        fc.array(exceptionArb, { minLength: 1, maxLength: 8 }),
        fc.array(matchedInputArb, { minLength: 1, maxLength: 4 }),
        fc.nat({ max: 7 }),
        (rules, exceptions, inputs, removed) => {
          const original = new RuleSet({ exceptionNamespaces: ['portal-system'] });
          for (const r of rules) original.upsert(toRule(r));
          exceptions.forEach((e, i) => original.upsertException(toException(e, i)));
          // A worker that started now (the snapshot), and one that started empty and followed every change.
          const snapshotted = new RuleSet();
          for (const c of structuredClone(original.snapshot())) snapshotted.apply(c);
          const source = new RuleSet({ exceptionNamespaces: ['portal-system'] });
          const follower = new RuleSet();
          for (const c of structuredClone(source.snapshot())) follower.apply(c);
          source.onChange((c) => follower.apply(structuredClone(c)));
          for (const r of rules) source.upsert(toRule(r));
          exceptions.forEach((e, i) => source.upsertException(toException(e, i)));
          // A deletion reaches both ways too.
          const k = removed % exceptions.length;
          const gone = exceptionKey(toException(exceptions[k]!, k));
          for (const rs of [original, snapshotted, source]) rs.removeException(gone);
          for (const i of inputs) {
            const input = { ...toInput(i), now: NOW };
            const expected = evaluate(original, input);
            assert.deepEqual(evaluate(snapshotted, input), expected);
            assert.deepEqual(evaluate(follower, input), expected);
            assert.deepEqual(decideAdmission(snapshotted, input), decideAdmission(original, input));
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  void it('gives exactly decide(evaluate(...)) with PortalExceptions loaded, exemptions included', () => {
    let exemptions = 0;
    fc.assert(
      fc.property(fc.array(matchedRuleArb, { minLength: 1, maxLength: 6 }), fc.array(exceptionArb, { minLength: 1, maxLength: 8 }), fc.array(matchedInputArb, { minLength: 1, maxLength: 4 }), (rules, exceptions, inputs) => {
        const rs = new RuleSet({ exceptionNamespaces: ['portal-system'] });
        for (const r of rules) rs.upsert(toRule(r));
        exceptions.forEach((e, i) => rs.upsertException(toException(e, i)));
        for (const i of inputs) {
          const input = { ...toInput(i), now: NOW };
          const verdicts = evaluate(rs, input);
          const d = decideAdmission(rs, input);
          assert.deepEqual(d, decide(verdicts));
          // An exempted rule is skip, and neither denies nor warns.
          for (const v of verdicts.filter((x) => x.exception !== undefined)) {
            assert.equal(v.result, 'skip');
            exemptions++;
          }
        }
      }),
      { numRuns: 500 },
    );
    assert.ok(exemptions > 10, `the generator exercises exemptions (${exemptions})`);
  });

  void it('gives exactly decide(evaluate(...)) for random rules and requests', () => {
    fc.assert(
      fc.property(fc.array(ruleArb, { maxLength: 6 }), fc.array(inputArb, { minLength: 1, maxLength: 4 }), (rules, inputs) => {
        const rs = new RuleSet();
        for (const r of rules) rs.upsert(toRule(r));
        for (const i of inputs) {
          const input = toInput(i);
          assert.deepEqual(decideAdmission(rs, input), decide(evaluate(rs, input)));
        }
      }),
      { numRuns: 300 },
    );
  });

  void it('follows rule changes (the per-kind candidate cache is dropped on a new revision)', () => {
    const rs = new RuleSet();
    const privileged = toInput({ kind: { group: '', kind: 'Pod' }, operation: 'CREATE', subResource: '', namespace: 'default', privileged: true, labelled: false, namespaceLabels: {}, hasObject: true });
    assert.equal(decideAdmission(rs, privileged).allowed, true);
    rs.upsert(clusterRule('no-priv'));
    assert.equal(decideAdmission(rs, privileged).allowed, false);
    rs.remove('PortalClusterRule/no-priv');
    assert.equal(decideAdmission(rs, privileged).allowed, true);
  });
});
