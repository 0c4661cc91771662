/**
 * The generated code (src/policy/cel/codegen.ts) against cel-js's public
 * evaluation of the same parsed expression: on hand-written and generated
 * expressions over generated objects, both must give the same value, or
 * both an error with the same message. Under a smaller cost limit the
 * generated code gives the same result or a `cost` error (cel-js has no
 * meter: the cost itself is tested in cost.test.ts).
 *
 * Known deviation (runtime.ts): `-x`, `x / y`, `x % y` on ints overflow with
 * an error where cel-js returns a bigint outside int64.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { compile, evaluate, newBudget, PER_CALL_COST_LIMIT, type EvalResult, type Program } from '../../../src/policy/cel/index.ts';
import { interpreted } from '../../../src/policy/cel/engine.ts';

function program(expr: string): Program | undefined {
  const p = compile(expr, { resultType: 'any' });
  return p.ok ? p : undefined;
}

/** Structural form of a result for comparison (Optionals, bigints, Maps included). */
function shape(r: EvalResult): unknown {
  if (!r.ok) return { error: r.kind, message: normalize(r.message) };
  return { value: r.value };
}

/**
 * An error message without its static types: cel-js names the type the
 * checker inferred (`dyn<int>`, `list<dyn>`), the generated code the
 * runtime type (`int`, `list`).
 */
function normalize(message: string): string {
  let out = message;
  for (let before = ''; before !== out; ) {
    before = out;
    out = out.replace(/dyn<([^<>]*)>/g, '$1').replace(/\b(list|map|optional)<[^<>]*>/g, '$1');
  }
  return out;
}

const outOfInt64 = (v: unknown): boolean => typeof v === 'bigint' && (v > 9223372036854775807n || v < -9223372036854775808n);

function same(p: Program, activation: Record<string, unknown>, limit = PER_CALL_COST_LIMIT): { compiled: EvalResult; interp: EvalResult } {
  const compiled = evaluate(p, activation, newBudget(), limit);
  const interp = evaluate(interpreted(p), activation, newBudget(), PER_CALL_COST_LIMIT);
  const where = `${p.expression} on ${JSON.stringify(activation, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))} (limit ${limit})`;
  if (!compiled.ok && compiled.kind === 'cost') {
    assert.ok(limit < PER_CALL_COST_LIMIT || !interp.ok, `${where}: a cost error under the full limit`);
    return { compiled, interp };
  }
  if (!compiled.ok && /integer overflow/.test(compiled.message) && interp.ok && outOfInt64(interp.value)) return { compiled, interp };
  assert.deepStrictEqual(shape(compiled), shape(interp), where);
  return { compiled, interp };
}

const pod = {
  metadata: { name: 'web', annotations: { 'container.apparmor.security.beta.kubernetes.io/app': 'runtime/default', x: 'y' } },
  spec: {
    hostNetwork: false,
    securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' }, sysctls: [{ name: 'kernel.shm_rmid_forced', value: '0' }] },
    containers: [
      { name: 'app', ports: [{ containerPort: 80, hostPort: 0 }], securityContext: { privileged: false, capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] } } },
      { name: 'side', securityContext: { runAsUser: 0, seLinuxOptions: { type: 'container_t', user: 'u' } } },
      { name: 'bare' },
    ],
    volumes: [{ name: 'a', emptyDir: {} }, { name: 'b', hostPath: { path: '/' } }],
  },
  n: 1.5,
  i: 3,
  s: 'abc',
  l: [1, 'a', true, null],
};

const HAND_WRITTEN = [
  // logic and CEL's commutative error absorption
  'true || 1 / 0 == 1', '1 / 0 == 1 || true', 'false && 1 / 0 == 1', '1 / 0 == 1 && false', '1 / 0 == 1 && true', 'true && 1 / 0 == 1',
  'object.s || true', 'object.s && false', 'false || object.s', 'true && object.s', 'object.s || object.i', '!object.s', '!object.spec.hostNetwork',
  'object.i > 2 ? object.s : object.n', 'object.s ? 1 : 2',
  // numbers: int, uint, double, heterogeneous comparisons
  'object.i == 3', 'object.i == 3.0', 'object.n == 1.5', 'object.i + 1', 'object.i + object.n', 'object.n * 2.0', '-object.i', '-object.s',
  '1u + 2u', 'object.i / 0', 'object.i % 2', '9223372036854775807 + object.i', 'object.i < object.n', "object.i < 'a'", 'dyn(1u) == 1',
  // strings, lists, maps, in
  "object.s + 'd'", "object.s.startsWith('a')", "object.s.contains(object.i)", "'b' in ['a', 'b']", "object.s in ['abc', 1]", '1 in object.l',
  "object.i in ['a', 'b']", "object.s in ['abc', 'b']", "object.l[1] in ['a']", "object.l in ['a']", "object.spec.containers.map(c, c.name in ['app', 'x'])", "null in ['a']",
  "'ALL' in object.spec.containers[0].securityContext.capabilities.drop", 'object.l + [1]', 'object.l + object.s', 'size(object.l)', 'object.l[1]', 'object.l[9]',
  "{'a': object.i, 'b': [object.s]}", "{'a': 1}.a", "{'a': 1}['b']", "object.metadata.annotations['x']", 'object.nope', 'object.spec.nope.deeper',
  // has() and optionals
  'has(object.spec.hostNetwork)', 'has(object.spec.nope)', 'has(object.spec.nope.deeper)', 'has(object.s.x)', 'has(object.l.x)',
  'object.?spec.?hostNetwork.orValue(true)', 'object.?nope.?x.orValue(7)', "object.spec.containers[0].?securityContext.?privileged.orValue('z')",
  'object.?s.?x', 'object.l[?1]', 'object.l[?9].orValue(0)', "object.metadata.annotations[?'x'].or(optional.of('q'))", 'optional.none().or(optional.of(1)).value()',
  'object.?nope.value()', "{'a': optional.of(1)}.?a.?b.orValue(3)", "{'a': optional.of({'b': 2})}.?a.?b.orValue(3)", "{'a': {'b': optional.none()}}.?a.?b.orValue(5)",
  'object.?l.?x.orValue(0)', "optional.of({'a': 1}).?a.orValue(0)", 'optional.none().?a.?b.orValue(4)', "object.?s.?x.?y.orValue('d')", "{1: 'a'}.?a.orValue('z')",
  "[[1], ['a'], [{'a': 1}], [[1]], []].map(l, l + l)", "[[1], ['a'], [{'a': 1}]].map(l, dyn([2.0]) + l)", 'object.l + object.l', 'object.spec.containers + object.l', 'optional.ofNonZeroValue(object.i)', 'object.?i.hasValue()', 'object.?spec.orValue(1)',
  // comprehensions, including errors inside
  'object.spec.containers.all(c, has(c.securityContext))', 'object.spec.containers.exists(c, c.name == "side")',
  'object.spec.containers.exists_one(c, c.?securityContext.?runAsUser.orValue(1) == 0)', 'object.spec.containers.map(c, c.name)',
  'object.spec.containers.filter(c, has(c.ports)).map(c, c.ports.size())', 'object.spec.containers.map(c, has(c.ports), c.name)',
  'object.l.all(x, x == 1)', 'object.l.exists(x, x > 0)', 'object.l.all(x, x > 0)', 'object.l.exists(x, x == true)', 'object.l.map(x, x + 1)',
  'object.l.exists_one(x, x > 0)', '[1, 2.5, 3, 0.5].map(x, x * 2)', '[2.5, 1].map(x, x + 1)', "[1, 'a', 2.0].map(x, x == 1)", '[1, 2.0, -1].map(x, -x)',
  "[[1], ['a'], [], [2.0]].map(l, l + [1])", "['a', 1, 1u].map(x, string(x))", 'object.l.filter(x, x > 0)', 'object.s.all(x, true)', 'object.metadata.annotations.all(k, k.size() > 0)',
  "object.metadata.annotations.all(k, !k.startsWith('container.apparmor.security.beta.kubernetes.io/') || object.metadata.annotations[k] == 'runtime/default')",
  '[1, 2, 3].all(i, v, v > i)', "{'a': 1}.transformMap(k, v, v + 1)", 'cel.bind(x, object.i, x * x)', '[[1, 2], [3]].all(a, a.all(b, b > 0))',
  'object.spec.volumes.all(v, v.all(k, k in ["name", "emptyDir"]))',
  // Kubernetes libraries (through the inline caches)
  "quantity('1Gi').isGreaterThan(quantity('1Mi'))", "object.s.matches('^a')", "object.s.matches('[')", "isURL('https://a.b/c')", "ip('10.0.0.1').family()",
  "sets.contains([1, 2], [1])", "object.s.upperAscii()", "object.s.split('b')", "'%s-%d'.format(['a', 1])", "object.s.indexOf('c')", "[3, 1].sort()",
  "object.l.isSorted()", "[1, 2].sum()", "object.s.charAt(1)", "base64.encode(b'abc')",
  // comparisons with a literal (specialised when the other operand is a string: codegen-operators.ts)
  "object.s == 'abcdefghijklmnop'", "'abcdefghijklmnop' != object.s", "object.s != ''", "object.i == 'a'", "object.l == 'a'", "object.spec == 'a'",
  "object.metadata.name in ['web', 'db']", "object.spec.containers.map(c, c.?securityContext.?seLinuxOptions.?type.orValue('') in ['', 'container_t'])",
  // field names Object.prototype has: read as own properties only (codegen.ts ownField)
  'has(object.constructor)', 'has(object.spec.toString)', 'object.?__proto__.orValue(1)', 'object.?spec.?valueOf.orValue(2)', 'object.hasOwnProperty',
  "{'constructor': 1}.constructor", "{'toString': 'x'}.?toString.orValue('y')", 'object.spec.containers.all(c, !has(c.constructor))',
];

describe('generated code evaluates as cel-js\'s public evaluate', () => {
  it('hand-written expressions: same value or error', () => {
    let compiled = 0;
    for (const e of HAND_WRITTEN) {
      const p = program(e);
      if (!p) continue;
      assert.equal(p.fallback, undefined, `${e} is compiled to JavaScript`);
      compiled++;
      same(p, { object: pod });
      // A tiny limit stops both at the same point.
      for (const limit of [0, 1, 3, 7, 20]) same(p, { object: pod }, limit);
    }
    assert.ok(compiled > HAND_WRITTEN.length * 0.9, `only ${compiled} of ${HAND_WRITTEN.length} expressions compiled`);
  });

  it('maps whose own fields are named like Object.prototype\'s', () => {
    const own = JSON.parse('{"__proto__": 1, "toString": "t", "valueOf": {"x": 2}, "hasOwnProperty": null, "name": "n"}') as Record<string, unknown>;
    const withConstructor = JSON.parse('{"constructor": "c", "name": "n"}') as Record<string, unknown>;
    const exprs = [
      'object.__proto__', 'object.toString', 'object.valueOf.x', 'object.hasOwnProperty', 'object.name', 'object.constructor', 'object.isPrototypeOf',
      'has(object.__proto__)', 'has(object.toString)', 'has(object.hasOwnProperty)', 'has(object.constructor)', 'has(object.propertyIsEnumerable)',
      "object.?toString.orValue('no')", 'object.?valueOf.?x.orValue(0)', 'object.?constructor.orValue(0)', 'object.?__defineGetter__.orValue(0)',
      "object.name == 'n'",
    ];
    for (const e of exprs) {
      const p = program(e);
      assert.ok(p, e);
      if (!p) continue;
      assert.equal(p.fallback, undefined, `${e} is compiled to JavaScript`);
      for (const object of [own, withConstructor, { spec: {} }]) same(p, { object });
    }
  });

  it('the PSS-style rules on generated objects', () => {
    const value = fc.letrec((tie) => ({
      leaf: fc.oneof(fc.integer({ min: -3, max: 3 }), fc.double({ noNaN: false }), fc.constantFrom('', 'a', 'ALL', 'RuntimeDefault', 'Unconfined'), fc.boolean(), fc.constant(null)),
      node: fc.oneof({ depthSize: 'small' }, tie('leaf'), fc.array(tie('node'), { maxLength: 3 }), fc.dictionary(fc.constantFrom('a', 'b', 'type', 'privileged', 'drop', 'add', 'hostPort', 'name'), tie('node'), { maxKeys: 3 })),
    })).node;
    const container = fc.record(
      {
        name: fc.constantFrom('a', 'b'),
        ports: fc.array(fc.record({ hostPort: fc.oneof(fc.integer({ min: 0, max: 2 }), value) }, { requiredKeys: [] }), { maxLength: 2 }),
        securityContext: fc.oneof(
          value,
          fc.record(
            {
              privileged: fc.oneof(fc.boolean(), value),
              runAsUser: fc.oneof(fc.integer({ min: 0, max: 2 }), value),
              capabilities: fc.record({ drop: fc.array(fc.constantFrom('ALL', 'KILL'), { maxLength: 2 }), add: fc.oneof(fc.array(fc.constantFrom('KILL', 'NET_BIND_SERVICE', 'SYS_ADMIN'), { maxLength: 2 }), value) }, { requiredKeys: [] }),
              seccompProfile: fc.record({ type: fc.oneof(fc.constantFrom('RuntimeDefault', 'Unconfined', 'Localhost'), value) }, { requiredKeys: [] }),
            },
            { requiredKeys: [] },
          ),
        ),
      },
      { requiredKeys: [] },
    );
    const object = fc.record(
      {
        metadata: fc.record({ annotations: fc.oneof(fc.dictionary(fc.constantFrom('x', 'container.apparmor.security.beta.kubernetes.io/a'), fc.constantFrom('runtime/default', 'localhost/p', 'unconfined')), value) }, { requiredKeys: [] }),
        spec: fc.record(
          {
            hostNetwork: fc.oneof(fc.boolean(), value),
            containers: fc.oneof(fc.array(container, { maxLength: 3 }), value),
            initContainers: fc.array(container, { maxLength: 2 }),
            securityContext: fc.oneof(fc.record({ runAsNonRoot: fc.oneof(fc.boolean(), value), runAsUser: fc.integer({ min: 0, max: 2 }) }, { requiredKeys: [] }), value),
            volumes: fc.oneof(fc.array(fc.dictionary(fc.constantFrom('name', 'hostPath', 'emptyDir', 'secret'), value, { maxKeys: 3 }), { maxLength: 2 }), value),
          },
          { requiredKeys: [] },
        ),
      },
      { requiredKeys: [] },
    );
    const ALL = '(object.spec.containers + object.spec.?initContainers.orValue([]))';
    const rules = [
      '!object.spec.?hostNetwork.orValue(false)',
      `${ALL}.all(c, !c.?securityContext.?privileged.orValue(false))`,
      `${ALL}.all(c, c.?securityContext.?capabilities.?add.orValue([]).all(a, a in ['KILL', 'NET_BIND_SERVICE']))`,
      "object.spec.?volumes.orValue([]).all(v, !has(v.hostPath))",
      `${ALL}.all(c, c.?ports.orValue([]).all(p, p.?hostPort.orValue(0) == 0))`,
      `${ALL}.all(c, c.?securityContext.?runAsNonRoot.orValue(object.spec.?securityContext.?runAsNonRoot.orValue(false)) == true)`,
      `${ALL}.all(c, 'ALL' in c.?securityContext.?capabilities.?drop.orValue([]))`,
      `${ALL}.exists(c, c.?securityContext.?runAsUser.orValue(1) == 0) || object.spec.?securityContext.?runAsUser.orValue(1) != 0`,
      `${ALL}.map(c, c.?securityContext.?seccompProfile.?type.orValue('')).filter(t, t != 'RuntimeDefault')`,
      "object.metadata.?annotations.orValue({}).all(k, !k.startsWith('container.apparmor.security.beta.kubernetes.io/') || object.metadata.annotations[k] == 'runtime/default' || object.metadata.annotations[k].startsWith('localhost/'))",
      "object.spec.?volumes.orValue([]).all(v, v.all(k, k in ['name', 'emptyDir', 'secret']))",
      `size(${ALL}) > 1 ? ${ALL}[1].name : 'none'`,
      `${ALL}.exists_one(c, has(c.securityContext.privileged))`,
    ].map((e) => {
      const p = program(e);
      if (!p) assert.fail(`${e} does not compile`);
      return p;
    });
    fc.assert(
      fc.property(object, fc.integer({ min: 0, max: 60 }), (o, limit) => {
        for (const p of rules) {
          same(p, { object: o });
          same(p, { object: o }, limit);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('generated expressions on generated values', () => {
    const atom = fc.constantFrom(
      'object.a', 'object.b', 'object.c', 'object.?a.orValue(0)', 'object.?b.orValue([])', "object.?c.orValue('')", '1', '2.5', "'a'", 'true', 'null', '[1, 2]',
      "{'a': 1}", 'object', 'has(object.a)', 'false', '0', '1u', "['a']", '[1.5]', 'has(object.a.b)', 'object.a.b', 'object.a[0]', 'object[?"b"]', 'dyn(1u)',
    );
    const expr = fc.letrec<{ e: string }>((tie) => ({
      e: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        atom,
        fc.tuple(tie('e'), fc.constantFrom('&&', '||', '==', '!=', '<', '>=', '+', '-', '*', '/', '%', 'in'), tie('e')).map(([a, op, b]) => `(${a} ${op} ${b})`),
        tie('e').map((a) => `!(${a})`),
        tie('e').map((a) => `-(${a})`),
        fc.tuple(tie('e'), tie('e'), tie('e')).map(([a, b, c]) => `(${a} ? ${b} : ${c})`),
        fc.tuple(tie('e'), fc.constantFrom('all', 'exists', 'exists_one', 'map', 'filter'), tie('e')).map(([a, m, b]) => `(${a}).${m}(x, ${b.replace(/object\.a/g, 'x')})`),
        tie('e').map((a) => `size(${a})`),
        tie('e').map((a) => `[${a}]`),
        fc.tuple(tie('e'), tie('e')).map(([a, b]) => `{'k': ${a}, 'v': ${b}}.?k.orValue(${b})`),
      ),
    })).e;
    const value = fc.letrec((tie) => ({
      v: fc.oneof(
        { depthSize: 'small' },
        fc.integer({ min: -2, max: 2 }),
        fc.constantFrom(0.5, -1.5, 1e300),
        fc.constantFrom('', 'a', 'b'),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie('v'), { maxLength: 3 }),
        fc.dictionary(fc.constantFrom('a', 'b', 'c'), tie('v'), { maxKeys: 3 }),
      ),
    })).v;
    const object = fc.dictionary(fc.constantFrom('a', 'b', 'c'), value, { maxKeys: 3 });
    let compiled = 0;
    fc.assert(
      // Several objects per program: the compiled nodes' caches see changing types.
      fc.property(expr, fc.array(object, { minLength: 1, maxLength: 4 }), fc.integer({ min: 0, max: 40 }), (e, objects, limit) => {
        const p = program(e);
        if (!p) return;
        compiled++;
        for (const o of objects) {
          same(p, { object: o });
          same(p, { object: o }, limit);
        }
      }),
      { numRuns: 1500 },
    );
    assert.ok(compiled > 300, `only ${compiled} generated expressions compiled`);
  });

  it('a hostile expression is a cost error', () => {
    const p = program('[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(a, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(b, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(c, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(d, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(e, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(f, a + b + c + d + e + f > 0))))))');
    assert.ok(p);
    const compiled = evaluate(p, {});
    assert.equal(compiled.ok, false);
    assert.equal(!compiled.ok && compiled.kind, 'cost');
  });
});
