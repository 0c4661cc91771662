/**
 * Issue 16, JSON Schema bombs and deep objects: schemas that ask for
 * unbounded work per object are refused when they compile (so the rule gets
 * CompileError, and the apply-time check, which runs the same compiler,
 * refuses it), with the bound named; an object the evaluators cannot follow
 * (nested 100,000 deep) gives an `error` verdict of the rule, never a throw.
 * Assertions are on verdicts and messages, never on time.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  compileSchema,
  decideAdmission,
  evaluate,
  MAX_EXPANDED_SCHEMA,
  MAX_SCHEMA_COST,
  MAX_UNIQUE_ITEMS,
  RuleSet,
  schemaCost,
  schemaExpandedSize,
  validateRule,
  type KubeObject,
} from '../../src/policy/index.ts';
import { clusterRule, input, namespacedRule, pod } from '../policy/support.ts';
import { admissionOutcome, VapSet, verdictOf, type VapAttributes } from '../policy/vap/support.ts';

/** The bomb: 40 levels of `allOf`, each with two `$ref`s to the level below (2^40 subschemas per object). */
function allOfBomb(levels = 40): Record<string, unknown> {
  const defs: Record<string, unknown> = {};
  for (let i = 0; i < levels; i++) defs[`l${i}`] = { allOf: [{ $ref: `#/$defs/l${i + 1}` }, { $ref: `#/$defs/l${i + 1}` }] };
  defs[`l${levels}`] = { type: 'object' };
  return { $defs: defs, $ref: '#/$defs/l0' };
}

function schemaRule(name: string, schema: Record<string, unknown>): ReturnType<typeof clusterRule> {
  return clusterRule(name, { validate: { message: 'hostile', schema } });
}

describe('hostile schemas are refused at compile time, naming the bound', () => {
  it('the 40-level allOf/$ref bomb (about 3 KB)', () => {
    const bomb = allOfBomb();
    assert.ok(JSON.stringify(bomb).length < 3 * 1024, 'a 3 KB schema');
    const c = compileSchema(bomb);
    assert.equal(c.ok, false);
    if (!c.ok) assert.match(c.error, new RegExp(`expands to more than ${MAX_EXPANDED_SCHEMA} subschemas .*expanded-size bound`));

    // Apply-time validation (the webhook for Portal's own kinds) refuses the rule with the same message.
    const v = validateRule(schemaRule('bomb', bomb));
    assert.equal(v.ok, false);
    if (!v.ok) assert.ok(v.problems.some((p) => p.includes(`more than ${MAX_EXPANDED_SCHEMA} subschemas`)), v.problems.join('; '));

    // Loaded anyway (a file, a cluster that skipped the webhook): CompileError, and an error verdict that denies.
    const rs = new RuleSet();
    const state = rs.upsert(schemaRule('bomb', bomb));
    assert.equal(state.ready, false);
    assert.equal(state.reason, 'CompileError');
    assert.match(state.message, /expanded-size bound/);
    const [verdict] = evaluate(rs, input(pod()));
    assert.equal(verdict?.result, 'error');
    assert.equal(decideAdmission(rs, input(pod())).allowed, false);
  });

  it('a smaller reuse of $defs stays within the bound, and the shipped rules are far below it', () => {
    // 10 levels: 2^10 expansions, legitimate if unusual.
    assert.equal(compileSchema(allOfBomb(10)).ok, true);
    assert.ok(schemaExpandedSize(allOfBomb(10)) < MAX_EXPANDED_SCHEMA);
  });

  it("issue 31's 5 KB rule: keywords count once per element they apply to (the cost bound)", () => {
    // A $defs of allOf 100 × {minLength: 0}, referenced 150 times on spec.containers[].args.items:
    // ~15,000 keywords (under the expanded-size bound), each run on every arg.
    const many = { allOf: Array.from({ length: 150 }, () => ({ $ref: '#/$defs/d' })) };
    const bomb = (args: Record<string, unknown>, containers: Record<string, unknown> = {}): Record<string, unknown> => ({
      $defs: { d: { allOf: Array.from({ length: 100 }, () => ({ minLength: 0 })) } },
      properties: { spec: { properties: { containers: { ...containers, items: { properties: { args } } } } } },
    });
    const schema = bomb({ items: many });
    assert.ok(JSON.stringify(schema).length < 5 * 1024, 'a 5 KB schema');
    assert.ok(schemaExpandedSize(schema) < MAX_EXPANDED_SCHEMA, 'within the expanded-size bound');
    const c = compileSchema(schema);
    assert.equal(c.ok, false);
    if (!c.ok) {
      assert.match(c.error, /estimated cost is 2\.4\de\+10 keyword checks per object, more than the 1e\+9 allowed \(the cost bound\)/);
      assert.match(c.error, /15,\d{3} keywords applied to each of up to 1,572,864 values at spec\.containers\[\]\.args\[\]/);
    }
    const v = validateRule(namespacedRule('tenant-a', 'args-bomb', { enforcement: 'Audit', validate: { message: 'hostile', schema } }));
    assert.equal(v.ok, false);
    if (!v.ok) assert.ok(v.problems.some((p) => p.includes('(the cost bound)')), v.problems.join('; '));
    // The same keywords on lists the schema bounds (maxItems is checked first, and evaluation stops at the first error).
    const bounded = bomb({ maxItems: 8, items: many }, { maxItems: 4 });
    assert.ok(schemaCost(bounded).cost < MAX_SCHEMA_COST, String(schemaCost(bounded).cost));
    const rs = new RuleSet();
    assert.equal(rs.upsert(schemaRule('bounded', bounded)).ready, true);
    const withArgs = (n: number): KubeObject => ({ ...pod(), spec: { containers: [{ name: 'c', image: 'i', args: Array.from({ length: n }, (_, i) => `a${i}`) }] } });
    assert.equal(evaluate(rs, input(withArgs(8)))[0]?.result, 'pass');
    assert.deepEqual(evaluate(rs, input(withArgs(200_000)))[0]?.violations, [{ path: 'spec.containers[0].args', message: 'must NOT have more than 8 items' }]);
  });

  it('a $ref cycle that does not descend into the value never ends: refused', () => {
    for (const schema of [{ allOf: [{ $ref: '#' }] }, { $defs: { a: { anyOf: [{ $ref: '#/$defs/a' }] } }, $ref: '#/$defs/a' }]) {
      const c = compileSchema(schema);
      assert.equal(c.ok, false, JSON.stringify(schema));
      if (!c.ok) assert.match(c.error, /refers back to a schema it is part of without descending into the value/);
    }
    // A recursive type (a tree) descends: allowed.
    assert.equal(compileSchema({ type: 'object', properties: { children: { type: 'array', items: { $ref: '#' } } } }).ok, true);
  });

  it('uniqueItems without a bounded maxItems (25,000 entries took 21.7 s)', () => {
    for (const schema of [
      { properties: { spec: { properties: { l: { type: 'array', uniqueItems: true } } } } },
      { properties: { spec: { properties: { l: { type: 'array', uniqueItems: true, maxItems: 25_000 } } } } },
      { $defs: { l: { uniqueItems: true } }, properties: { l: { $ref: '#/$defs/l' } } },
    ]) {
      const c = compileSchema(schema);
      assert.equal(c.ok, false, JSON.stringify(schema));
      if (!c.ok) assert.match(c.error, new RegExp(`"uniqueItems": true needs "maxItems" of at most ${MAX_UNIQUE_ITEMS}`));
      const v = validateRule(schemaRule('unique', schema));
      assert.equal(v.ok, false);
    }
  });

  it('uniqueItems with maxItems: a 25,000-entry list fails maxItems without its pairwise comparisons, a short one is checked', () => {
    const rs = new RuleSet();
    const state = rs.upsert(schemaRule('unique', { properties: { spec: { properties: { l: { type: 'array', uniqueItems: true, maxItems: MAX_UNIQUE_ITEMS } } } } }));
    assert.equal(state.ready, true, state.message);
    const withList = (l: unknown[]): KubeObject => ({ ...pod(), spec: { ...(pod().spec as object), l } });
    const long = evaluate(rs, input(withList(Array.from({ length: 25_000 }, (_, i) => ({ a: 1, z: i })))))[0];
    assert.equal(long?.result, 'fail');
    assert.deepEqual(long?.violations, [{ path: 'spec.l', message: `must NOT have more than ${MAX_UNIQUE_ITEMS} items` }]);
    const dup = evaluate(rs, input(withList([1, 2, 1])))[0];
    assert.equal(dup?.result, 'fail');
    assert.match(dup?.message ?? '', /duplicate items/);
    assert.equal(evaluate(rs, input(withList([1, 2, 3])))[0]?.result, 'pass');
  });
});

/** An object nested `depth` levels deep (built iteratively: JSON.parse of it would be the 400 of issue 16 item 3). */
function deep(depth: number): unknown {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

function podWith(field: string, value: unknown, namespace = 'tenant'): KubeObject {
  const p = pod({ namespace });
  (p.spec as Record<string, unknown>)[field] = value;
  return p;
}

describe('deep objects: an error verdict of the rule, never an escaping throw', () => {
  const hostile = podWith('deep', deep(100_000));
  // Two distinct deep values: comparing them must walk both (CEL reads the
  // JSON as parsed, so comparing a value with itself or testing a field's
  // presence needs no walk and is simply answered).
  (hostile.spec as Record<string, unknown>)['deep2'] = deep(100_000);

  it('a recursive schema meeting a 100,000-deep object', () => {
    const rs = new RuleSet();
    // Every value of spec.deep passes `node`, so validation follows it all the way down (it stops at the first error).
    rs.upsert(schemaRule('tree', { $defs: { node: { type: ['object', 'string'], additionalProperties: { $ref: '#/$defs/node' } } }, properties: { spec: { properties: { deep: { $ref: '#/$defs/node' } } } } }));
    const [v] = evaluate(rs, input(hostile));
    assert.equal(v?.result, 'error');
    assert.match(v?.message ?? '', /rule tree could not be evaluated/);
    assert.equal(decideAdmission(rs, input(hostile)).allowed, false);
  });

  it('uniqueItems and const comparing 100,000-deep items', () => {
    const rs = new RuleSet();
    rs.upsert(schemaRule('unique', { properties: { spec: { properties: { l: { type: 'array', uniqueItems: true, maxItems: 4 } } } } }));
    const [v] = evaluate(rs, input(podWith('l', [deep(100_000), deep(100_000)])));
    assert.equal(v?.result, 'error');
  });

  it('a CEL rule reading it, in a PortalRule and a PortalClusterRule', () => {
    const rs = new RuleSet();
    rs.upsert(namespacedRule('tenant', 'tenant-rule', { validate: { message: 'm', cel: { expressions: [{ expression: 'object.spec.deep == object.spec.deep2' }] } } }));
    rs.upsert(clusterRule('cluster-rule', { validate: { message: 'm', cel: { expressions: [{ expression: '!has(object.spec.deep) || object.spec.deep != object.spec.deep2' }] } } }));
    const verdicts = evaluate(rs, input(hostile));
    assert.deepEqual(verdicts.map((v) => v.result), ['error', 'error']);
    for (const v of verdicts) assert.match(v.message, /nested too deeply to evaluate/);
    assert.equal(decideAdmission(rs, input(hostile)).allowed, false);
    // Another namespace's ordinary Pod is decided as usual.
    assert.equal(decideAdmission(rs, input(pod({ namespace: 'other' }))).allowed, true);
  });

  it('a ValidatingAdmissionPolicy reading it', () => {
    const set = new VapSet();
    set.upsertPolicy({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: 'deep' },
      spec: {
        matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }] },
        validations: [{ expression: 'object.spec.deep == object.spec.deep2' }],
      },
    });
    set.upsertBinding({ apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicyBinding', metadata: { name: 'deep' }, spec: { policyName: 'deep', validationActions: ['Deny'] } });
    const attributes: VapAttributes = {
      operation: 'CREATE',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      subResource: '',
      namespace: 'tenant',
      name: 'web',
      namespaced: true,
      object: hostile as VapAttributes['object'],
      oldObject: null,
    };
    const results = set.evaluate(attributes, { namespaceObject: null, params: { scope: () => ({ ok: false, error: 'none' }), find: () => ({ ok: true, objects: [] }) } });
    assert.equal(verdictOf(results[0]!).result, 'error');
    assert.match(verdictOf(results[0]!).message, /nested too deeply to evaluate/);
    assert.ok(admissionOutcome(results).denial !== undefined, 'denied under failurePolicy Fail');
  });
});
