/**
 * The generator's specialised paths (issue 19, session 6) charge and
 * decide exactly what the general ones do:
 * - `x == 'lit'`, `x != 'lit'` and `x in ['a', 'b', …]` (codegen-operators.ts)
 *   charge charges.ts's binaryCost for every kind of `x`, string or not;
 * - the rule path of a composition (checkComposition) gives undefined when
 *   everything passes and the same failures as runComposition otherwise,
 *   with a context and variable frame of its own for each evaluation;
 * - `x == true`, `x != 0` (a bool or int literal) and `a.?b.hasValue()`
 *   charge and decide as the general path and as cel-js;
 * - a pattern computed at run time is compiled once per call site (its
 *   PatternCache), with the same values, errors and cost.
 * Values against cel-js's own evaluation: compiler.test.ts; the pass check
 * of a composition: composition-check.test.ts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  checkComposition,
  compile,
  compileComposition,
  contextFor,
  celContext,
  evaluate,
  newBudget,
  runComposition,
  type Composition,
  type Program,
} from '../../../src/policy/cel/index.ts';
import { binaryCost } from '../../../src/policy/cel/charges.ts';
import { interpreted } from '../../../src/policy/cel/engine.ts';
import { cachedRe2, PATTERN_CACHE_SIZE, patternCache } from '../../../src/policy/cel/lib/regex.ts';

function program(expr: string): Program {
  const p = compile(expr, { resultType: 'any' });
  if (!p.ok) assert.fail(`${expr}: ${p.message}`);
  assert.equal(p.fallback, undefined, `${expr} is compiled`);
  return p;
}

function cost(expr: string, object: unknown): number {
  const r = evaluate(program(expr), { object });
  if (!r.ok) assert.fail(`${expr}: ${r.message}`);
  return r.cost;
}

/** What the operator charges: the cost of `[x OP lit]` minus that of `[x, lit]`, minus its own unit (as cost.test.ts). */
function charge(call: string, operands: string[], object: unknown): number {
  return cost(`[${call}]`, object) - cost(`[${operands.join(', ')}]`, object) - 1;
}

const meter = { used: 0, limit: 1_000_000 };
const VALUES: Record<string, unknown> = {
  empty: '',
  one: 'a',
  ten: 'abcdefghij',
  eleven: 'abcdefghijk',
  long: 'x'.repeat(1000),
  int: 7,
  double: 1.5,
  bool: true,
  nil: null,
  list: ['a', 'b'],
  map: { a: 1 },
};

describe('specialised comparisons charge what the general path charges', () => {
  const literals = ['', 'a', 'abcdefghij', 'abcdefghijklmnopqrstuvwxyz'];
  for (const [name, value] of Object.entries(VALUES)) {
    it(`== and != with a string literal, on ${name}`, () => {
      for (const lit of literals) {
        const l = JSON.stringify(lit);
        const general = binaryCost('==', value, lit, meter);
        assert.equal(charge(`object.x == ${l}`, ['object.x', l], { x: value }), general, `x == ${l}`);
        assert.equal(charge(`${l} != object.x`, [l, 'object.x'], { x: value }), general, `${l} != x`);
      }
    });
    it(`in a list of string literals, on ${name}`, () => {
      for (const list of [['a'], ['a', 'b', 'abcdefghijklmnop'], ['RuntimeDefault', 'Localhost', '', 'x', 'y', 'z', 'w', 'v', 'u', 't', 's', 'r']]) {
        const l = `[${list.map((x) => JSON.stringify(x)).join(', ')}]`;
        assert.equal(charge(`object.x in ${l}`, ['object.x', l], { x: value }), binaryCost('in', value, list, meter), `x in ${l}`);
      }
    });
  }

  it('decide as the general path: membership by value, other types never equal', () => {
    const r = (e: string, x: unknown): unknown => {
      const out = evaluate(program(e), { object: { x } });
      return out.ok ? out.value : `error: ${out.message}`;
    };
    assert.equal(r("object.x in ['a', 'b']", 'b'), true);
    assert.equal(r("object.x in ['a', 'b']", 'c'), false);
    assert.equal(r("object.x in ['1']", 1), false);
    assert.equal(r("object.x == 'a'", 'a'), true);
    assert.equal(r("object.x != 'a'", 1), true);
    assert.equal(r("object.x == 'abcdefghijklmnop'", 'abcdefghijklmnop'), true);
  });

  it('membership in a short list (compared inline) and a long one (a Set) agree with cel-js, hostile literals included', () => {
    // Literals that would break out of a JavaScript string if they were not embedded through JSON.stringify.
    const hostile = ['a"b', "c'd", 'e\\", process.exit(1), "', '\u2028', '`${x}`', '</script>', ''];
    const short = `[${hostile.map((x) => JSON.stringify(x)).join(', ')}]`;
    const long = `[${[...hostile, 'p', 'q', 'r'].map((x) => JSON.stringify(x)).join(', ')}]`;
    for (const list of [short, long]) {
      const p = program(`object.x in ${list}`);
      for (const x of [...hostile, 'zz', 'a', 'ab"', 1]) {
        const got = evaluate(p, { object: { x } });
        const want = evaluate(interpreted(p), { object: { x } });
        assert.deepEqual(got.ok && got.value, want.ok && want.value, `${JSON.stringify(x)} in ${list}`);
        assert.equal(got.ok && got.value, typeof x === 'string' && hostile.includes(x), `${JSON.stringify(x)} in ${list}`);
      }
    }
  });

  it('a string comparison past the limit is a cost error', () => {
    const p = program("object.x == 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'");
    const r = evaluate(p, { object: { x: 'x'.repeat(1000) } }, newBudget(), 5);
    assert.equal(r.ok, false);
    if (!r.ok) assert.equal(r.kind, 'cost');
  });
});

describe('comparisons with a bool or int literal, and `.?` chains ending in hasValue()', () => {
  /** Value or error message of the generated code, and of cel-js's own evaluation. */
  const both = (expr: string, object: unknown): [unknown, unknown] => {
    const p = program(expr);
    const r = evaluate(p, { object });
    const i = evaluate(interpreted(p), { object });
    return [r.ok ? r.value : r.message, i.ok ? i.value : i.message];
  };
  for (const [name, value] of Object.entries(VALUES)) {
    it(`== and != with true, false, 0 and 7, on ${name}`, () => {
      for (const lit of ['true', 'false', '0', '7']) {
        const general = binaryCost('==', value, lit === 'true' || lit === 'false' ? lit === 'true' : BigInt(lit), meter);
        assert.equal(charge(`object.x == ${lit}`, ['object.x', lit], { x: value }), general, `x == ${lit}`);
        assert.equal(charge(`${lit} != object.x`, [lit, 'object.x'], { x: value }), general, `${lit} != x`);
        for (const expr of [`object.x == ${lit}`, `${lit} != object.x`]) {
          const [generated, celjs] = both(expr, { x: value });
          assert.equal(generated, celjs, expr);
        }
      }
    });
  }
  it('a `.?` chain ending in hasValue() decides and charges as the general optional selection', () => {
    for (const a of [undefined, null, {}, { b: null }, { b: 1 }, { b: { c: 'x' } }, 5, 'str', [1], { b: [1] }]) {
      const object = a === undefined ? {} : { a };
      for (const chain of ['object.?a', 'object.?a.?b', 'object.?a.?b.?c']) {
        const [generated, celjs] = both(`${chain}.hasValue()`, object);
        assert.equal(generated, celjs, `${chain}.hasValue() on ${JSON.stringify(object)}`);
        // The general path: the chain as a value (Optionals), hasValue() one node more.
        if (typeof generated === 'boolean') assert.equal(cost(`[${chain}.hasValue()]`, object) - cost(`[${chain}]`, object), 1, `${chain} on ${JSON.stringify(object)}`);
      }
    }
  });
});

describe('the rule path of a composition', () => {
  const compiled = (spec: Parameters<typeof compileComposition>[0]): Composition => {
    const c = compileComposition(spec);
    if (!c.ok) assert.fail(JSON.stringify(c.errors));
    return c;
  };
  const c = compiled({
    variables: [{ name: 'names', expression: 'object.spec.containers.map(c, c.name)' }],
    validations: [{ expression: "!('bad' in variables.names)", message: 'no bad container' }, { expression: 'size(variables.names) < 3' }],
  });
  const ok = { spec: { containers: [{ name: 'a' }] } };
  const bad = { spec: { containers: [{ name: 'bad' }, { name: 'b' }, { name: 'c' }] } };
  const shared = (object: unknown, budget = newBudget()): [Record<string, unknown>, ReturnType<typeof newBudget>] => {
    const activation = { object };
    return [contextFor(activation, budget, () => celContext(activation)), budget];
  };

  it('gives undefined when every validation passes, and the failures otherwise', () => {
    assert.equal(checkComposition(c, ...shared(ok)), undefined);
    const out = checkComposition(c, ...shared(bad));
    assert.deepEqual(out?.matched === true && out.validations, [
      { index: 0, result: 'fail', message: 'no bad container', reason: 'Invalid' },
      { index: 1, result: 'fail', message: 'failed expression: size(variables.names) < 3', reason: 'Invalid' },
    ]);
    // The full path reports passes too, with the cost.
    const full = runComposition(c, ...shared(ok));
    assert.ok(full.matched === true && full.cost > 0);
    assert.deepEqual(full.matched === true && full.validations.map((v) => v.result), ['pass', 'pass']);
  });

  it('evaluations one after another see their own objects (each has its own context and frame)', () => {
    for (let i = 0; i < 3; i++) {
      assert.equal(checkComposition(c, ...shared(ok)), undefined);
      assert.notEqual(checkComposition(c, ...shared(bad)), undefined);
    }
    // Two requests interleaved, each with its own budget and shared context.
    const [a, budgetA] = shared(ok);
    const [b, budgetB] = shared(bad);
    assert.equal(checkComposition(c, a, budgetA), undefined);
    assert.notEqual(checkComposition(c, b, budgetB), undefined);
    assert.equal(checkComposition(c, a, budgetA), undefined);
  });

  it('charges the request budget as the full path does', () => {
    const [s1, b1] = shared(bad);
    const [s2, b2] = shared(bad);
    checkComposition(c, s1, b1);
    const full = runComposition(c, s2, b2);
    assert.equal(b1.remaining, b2.remaining);
    assert.equal(newBudget().remaining - b2.remaining, full.cost);
  });

  it('a variable read three times is computed and charged once, from the frame and through the getters alike', () => {
    // 200 containers: computing `names` costs far more than reading it.
    const many = { spec: { containers: Array.from({ length: 200 }, (_, i) => ({ name: `c${i}` })) } };
    const thrice = [{ expression: 'variables.names.size() == 200 && variables.names.size() == 200 && variables.names.size() == 200' }];
    const names = { name: 'names', expression: 'object.spec.containers.map(c, c.name)' };
    // Unique names: the generated code reads the frame. A name declared twice: every read goes through the `variables` object's getters.
    const bySlot = compiled({ variables: [names], validations: thrice });
    const byGetter = compiled({ variables: [names, { name: 'unused', expression: '1' }, { name: 'unused', expression: '2' }], validations: thrice });
    const once = compiled({ variables: [names], validations: [{ expression: 'variables.names.size() == 200' }] });
    const slot = runComposition(bySlot, ...shared(many));
    const getter = runComposition(byGetter, ...shared(many));
    const single = runComposition(once, ...shared(many));
    for (const out of [slot, getter, single]) assert.deepEqual(out.matched === true && out.validations.map((v) => v.result), ['pass']);
    assert.equal(getter.cost, slot.cost);
    // Computing `names` again would add its whole cost (most of `single`); two more reads (each charged the list's size), sizes and comparisons add a few dozen units.
    assert.ok(single.cost > 400, `one read costs ${single.cost}`);
    assert.ok(slot.cost - single.cost < single.cost / 4, `three reads cost ${slot.cost}, one read ${single.cost}`);
  });
});

describe('patterns computed at run time', () => {
  it('are compiled once per call site and pattern, at most PATTERN_CACHE_SIZE kept, errors not kept', () => {
    const cache = patternCache();
    const a = cachedRe2(cache, '^a+$');
    assert.equal(cachedRe2(cache, '^a+$'), a);
    for (let i = 0; i < PATTERN_CACHE_SIZE * 2; i++) cachedRe2(cache, `^x{${i}}$`);
    assert.equal(cache.size, PATTERN_CACHE_SIZE);
    assert.notEqual(cachedRe2(cache, '^a+$'), a, 'evicted, compiled again');
    assert.throws(() => cachedRe2(cache, '('));
    assert.throws(() => cachedRe2(cache, '('));
    assert.equal(cache.has('('), false);
  });

  it('give the same values, errors and cost as constant patterns', () => {
    const object = { names: ['abc', 'xyz', 'aaa'], p: '^a', bad: '(' };
    const dynamic = evaluate(program('object.names.map(n, n.matches(object.p))'), { object });
    const constant = evaluate(program("object.names.map(n, n.matches('^a'))"), { object });
    assert.ok(dynamic.ok && constant.ok);
    if (dynamic.ok && constant.ok) {
      assert.deepEqual(dynamic.value, [true, false, true]);
      assert.deepEqual(dynamic.value, constant.value);
      // Reading `object.p` costs one node more per iteration than the literal (id + select vs value): the call itself costs the same.
      assert.equal(dynamic.cost - constant.cost, object.names.length);
    }
    // Evaluated again (the call site's cache warm), the same program costs the same.
    const p = program('object.names.map(n, n.matches(object.p))');
    const first = evaluate(p, { object });
    const second = evaluate(p, { object });
    assert.ok(first.ok && second.ok && first.cost === second.cost);
    for (let i = 0; i < 2; i++) {
      const r = evaluate(program('object.names.all(n, n.matches(object.bad))'), { object });
      assert.equal(r.ok, false);
    }
  });
});
