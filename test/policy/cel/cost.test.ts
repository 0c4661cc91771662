/**
 * The CEL cost model (src/policy/cel/cost.ts, charges.ts): each library
 * function and size-dependent operator charges, on top of its 1 unit as a
 * node, cel-go's figure for its inputs (derived here by hand from cel-go's
 * `interpreter/runtimecost.go`, ext/sets.go and Kubernetes'
 * `library/cost.go`), and Portal's documented deviations where the
 * JavaScript implementation does more work than Go's. Charged before the
 * call runs, identically by the compiled closures and the interpreter.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compile, evaluate, PER_CALL_COST_LIMIT, type EvalResult, type Program } from '../../../src/policy/cel/index.ts';
import { interpreted } from '../../../src/policy/cel/engine.ts';
import { aggregateElements, aggregateTraversal, costOf, regexSize, traversal } from '../../../src/policy/cel/cost.ts';
import { compileLinear, MAX_PROGRAM_SIZE, MAX_TEST_COST } from '../../../src/policy/re2.ts';

function program(expr: string): Program {
  const p = compile(expr, { resultType: 'any' });
  if (!p.ok) assert.fail(`${expr}: ${p.message}`);
  return p;
}

/** Evaluates with the compiled closures and the interpreter; both must agree on value and cost. */
function run(expr: string, object: unknown): EvalResult {
  const p = program(expr);
  const compiled = evaluate(p, { object });
  const viaInterpreter = evaluate(interpreted(p), { object });
  assert.deepEqual(
    compiled.ok ? { cost: compiled.cost } : { cost: compiled.cost, kind: compiled.kind },
    viaInterpreter.ok ? { cost: viaInterpreter.cost } : { cost: viaInterpreter.cost, kind: viaInterpreter.kind },
    `${expr}: compiled and interpreted costs differ`,
  );
  return compiled;
}

function cost(expr: string, object: unknown): number {
  const r = run(expr, object);
  if (!r.ok) assert.fail(`${expr}: ${r.message}`);
  return r.cost;
}

/**
 * What one call or operator charges: the cost of `[CALL]` minus the cost of
 * `[ARG, …]` (its operands evaluated alone), minus the call's own 1 unit.
 * (A root node is not charged, so both sides are wrapped in a list.)
 */
function charge(call: string, operands: string[], object: unknown): number {
  return cost(`[${call}]`, object) - cost(`[${operands.join(', ')}]`, object) - 1;
}

const s1000 = 'a'.repeat(1000);
const ints = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

describe('cost.ts: cel-go figures as pure functions', () => {
  it('traversal is ceil(0.1 n), 0 for nothing', () => {
    assert.deepEqual([traversal(0), traversal(1), traversal(10), traversal(11), traversal(1000)], [0, 1, 1, 2, 100]);
  });

  it('cel-go runtimecost.go figures', () => {
    // "hello world".contains("world"): ceil(1.1) × ceil(0.5) = 2 × 1
    assert.equal(costOf.contains(11, 5), 2);
    // startsWith / endsWith: the traversal of the argument
    assert.equal(costOf.startsWith(25), 3);
    // matches: ceil(0.1 × (1 + |s|)) × ceil(0.25 × |re|); an empty string still pays for the regex
    assert.equal(costOf.regex(3, 2), 1);
    assert.equal(costOf.regex(0, 40), 10);
    assert.equal(costOf.regex(1000, 8), 101 * 2);
    // string comparison and concatenation
    assert.equal(costOf.compareStrings(1000, 30), 3);
    assert.equal(costOf.concat(1000, 500), 150);
    // in on a list: its size
    assert.equal(costOf.inList(1000), 1000);
  });

  it('Kubernetes library/cost.go and ext/sets.go figures', () => {
    assert.equal(costOf.sets(30_000, 30_000), 900_000_000);
    assert.equal(costOf.split(1000), 200);
    assert.equal(costOf.join(1000), 200);
    assert.equal(costOf.stringTraversal(1000), 100);
    assert.equal(costOf.ipIsCanonical(39), 8);
    // replace: 2 × 0.1 × |s| when the result cannot be longer than s
    assert.equal(costOf.replace(1000, 1, 1), 200);
    assert.equal(costOf.replace(1000, 3, 1, 5), 200);
  });

  it('replace charges the longest result it can build (deviation)', () => {
    // 1000 replacements of one character by two: the result may be 2000 long
    assert.equal(costOf.replace(1000, 1, 2), traversal(1000 + 2000));
    // an empty `from` matches 1001 times
    assert.equal(costOf.replace(1000, 0, 10), traversal(1000 + 1000 + 1001 * 10));
    // a limit bounds it
    assert.equal(costOf.replace(1000, 1, 11, 10), traversal(1000 + 1100));
    assert.equal(costOf.replace(131_072, 0, 10_000), traversal(131_072 + 131_072 + 131_073 * 10_000));
  });

  it('regex size is the larger of the pattern and its program', () => {
    assert.equal(regexSize(10), 10);
    assert.equal(regexSize(10, 1500), 1500);
  });

  it('aggregate measures count nested elements and stop at their cap', () => {
    assert.equal(aggregateTraversal([1, 2, 3]), 3);
    assert.equal(aggregateTraversal({ a: ints(100) }), 101);
    assert.equal(aggregateTraversal('x'.repeat(95)), 10);
    assert.equal(aggregateElements(['x'.repeat(95), 'y']), 2);
    assert.equal(aggregateTraversal([]), 1);
    assert.ok(aggregateTraversal(ints(1_000_000), 10) > 10);
    // deep values are walked without recursion
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    assert.equal(aggregateTraversal(deep), 1);
  });
});

describe('charges: what each function and operator charges before it runs', () => {
  const o = {
    s: s1000,
    t: 'a'.repeat(50),
    half: 'a'.repeat(500),
    csv: Array.from({ length: 100 }, () => 'b'.repeat(9)).join(','),
    words: Array.from({ length: 100 }, () => 'c'.repeat(10)),
    l: ints(1000),
    l2: ints(1000),
    m: Object.fromEntries(ints(1000).map((i) => [`k${i}`, i])),
    ma: { a: ints(1000) },
    mb: { a: ints(1000) },
    a: 'a',
    bb: 'bb',
    n: 5,
    url: `https://example.com/${'p'.repeat(80)}`,
  };
  const cases: { name: string; call: string; operands: string[]; expected: number; note?: string }[] = [
    { name: 'contains', call: 'object.s.contains(object.t)', operands: ['object.s', 'object.t'], expected: 100 * 5 },
    { name: 'startsWith', call: 'object.s.startsWith(object.t)', operands: ['object.s', 'object.t'], expected: 5 },
    { name: 'endsWith', call: 'object.s.endsWith(object.t)', operands: ['object.s', 'object.t'], expected: 5 },
    { name: 'lowerAscii', call: 'object.s.lowerAscii()', operands: ['object.s'], expected: 100 },
    { name: 'upperAscii', call: 'object.s.upperAscii()', operands: ['object.s'], expected: 100 },
    { name: 'trim', call: 'object.s.trim()', operands: ['object.s'], expected: 100 },
    { name: 'indexOf (string)', call: 'object.s.indexOf(object.t)', operands: ['object.s', 'object.t'], expected: 100 },
    { name: 'indexOf (list)', call: 'object.l.indexOf(object.n)', operands: ['object.l', 'object.n'], expected: 1000 },
    { name: 'replace (same length)', call: "object.s.replace(object.a, 'b')", operands: ['object.s', 'object.a', "'b'"], expected: 200 },
    { name: 'replace (longer result)', call: 'object.s.replace(object.a, object.bb)', operands: ['object.s', 'object.a', 'object.bb'], expected: 300, note: 'deviation' },
    { name: 'split', call: "object.csv.split(',')", operands: ['object.csv', "','"], expected: traversal(2 * 999) },
    { name: 'join', call: "object.words.join(',')", operands: ['object.words', "','"], expected: traversal(2 * 1099) },
    { name: 'matches', call: "object.s.matches('^[a-z]+$')", operands: ['object.s', "'^[a-z]+$'"], expected: 101 * 2 },
    { name: 'find', call: "object.s.find('^[b-z]+$')", operands: ['object.s', "'^[b-z]+$'"], expected: 101 * 2 },
    { name: 'findAll (no match)', call: "object.s.findAll('^[b-z]+$')", operands: ['object.s', "'^[b-z]+$'"], expected: 101 * 2 },
    { name: 'sets.contains', call: 'sets.contains(object.l, object.l2)', operands: ['object.l', 'object.l2'], expected: 1_000_000 - 1, note: 'over the limit: see below' },
    { name: '== strings', call: 'object.s == object.half', operands: ['object.s', 'object.half'], expected: 50 },
    { name: '== lists', call: 'object.l == object.l2', operands: ['object.l', 'object.l2'], expected: 1000 },
    { name: '== maps of lists', call: 'object.ma == object.mb', operands: ['object.ma', 'object.mb'], expected: 1001, note: 'deviation: nested elements count' },
    { name: 'in list', call: 'object.n in object.l', operands: ['object.n', 'object.l'], expected: 1000 },
    { name: 'in map', call: "'k1' in object.m", operands: ["'k1'", 'object.m'], expected: 0 },
    { name: '+ strings', call: 'object.s + object.half', operands: ['object.s', 'object.half'], expected: 150 },
    { name: '+ lists', call: 'object.l + object.l2', operands: ['object.l', 'object.l2'], expected: 200, note: 'deviation' },
    { name: 'size(string)', call: 'size(object.s)', operands: ['object.s'], expected: 100, note: 'deviation' },
    { name: 'size(list)', call: 'size(object.l)', operands: ['object.l'], expected: 0 },
    { name: 'size(map)', call: 'object.m.size()', operands: ['object.m'], expected: 100, note: 'deviation' },
    { name: 'isSorted', call: 'object.l.isSorted()', operands: ['object.l'], expected: 1000 },
    { name: 'sum', call: 'object.l.sum()', operands: ['object.l'], expected: 1000 },
    { name: 'max', call: 'object.l.max()', operands: ['object.l'], expected: 1000 },
    { name: 'url', call: 'url(object.url)', operands: ['object.url'], expected: traversal(o.url.length) },
    { name: 'format', call: "'%s'.format([object.s])", operands: ["'%s'", '[object.s]'], expected: 1 + 100, note: 'deviation: arguments' },
  ];
  for (const c of cases.filter((x) => x.name !== 'sets.contains')) {
    it(`${c.name}${c.note ? ` (${c.note})` : ''}`, () => {
      assert.equal(charge(c.call, c.operands, o), c.expected);
    });
  }

  it('sets.contains, sets.equivalent, sets.intersects: the product of the sizes', () => {
    const small = { a: ints(30), b: ints(40) };
    for (const f of ['contains', 'equivalent', 'intersects']) {
      assert.equal(charge(`sets.${f}(object.a, object.b)`, ['object.a', 'object.b'], small), 1200, f);
    }
  });

  it('a comprehension over a map pays for listing its keys, then per iteration', () => {
    const m = { m: Object.fromEntries(ints(1000).map((i) => [`k${i}`, i])) };
    // exists stops at the first element: 100 units of key listing, whatever the loop does.
    const exists = cost('[object.m.exists(k, true)]', m) - cost('[object.m]', m);
    assert.ok(exists >= 100 && exists < 110, `exists over 1000 keys costs ${exists}`);
    const twoVar = cost('[object.m.exists(k, v, true)]', m) - cost('[object.m]', m);
    assert.ok(twoVar >= 100 && twoVar < 110, `exists(k, v) over 1000 keys costs ${twoVar}`);
  });

  it('a program larger than its pattern pays for its size', () => {
    const pattern = '[a-z]{300}';
    const size = compileLinear(pattern, { ecmaEscapes: false }).programSize;
    assert.ok(size > pattern.length);
    assert.equal(charge(`object.s.matches('${pattern}')`, ['object.s', `'${pattern}'`], o), costOf.regex(1000, size));
  });

  it('findAll pays for each search after the first (each may scan the rest again)', () => {
    const o2 = { s: 'ab'.repeat(50) };
    const first = costOf.regex(100, regexSize(1));
    const all = charge("object.s.findAll('a')", ['object.s', "'a'"], o2);
    assert.ok(all > first, `${all} > ${first}`);
    let expected = first;
    for (let from = 1; from < 100; from += 2) expected += costOf.regex(100 - from, 1);
    assert.equal(all, expected);
  });
});

describe('charged before the work', () => {
  it('sets.contains on two 30,000-element lists is a cost error at the limit, without comparing', () => {
    const csv = Array.from({ length: 30_000 }, (_, i) => `x${i}`).join(',');
    const r = run("sets.contains(object.csv.split(','), object.csv.split(','))", { csv });
    assert.equal(r.ok, false);
    if (!r.ok) {
      assert.equal(r.kind, 'cost');
      assert.match(r.message, /per-expression cost limit \(1000000 units\)/);
      assert.equal(r.cost, PER_CALL_COST_LIMIT + 1);
    }
  });

  it('replace with an empty pattern on a long string is refused before building a gigabyte', () => {
    const r = run("object.s.replace('', object.to).size() > 0", { s: 'a'.repeat(131_072), to: 'b'.repeat(10_000) });
    assert.equal(r.ok, false);
    if (!r.ok) assert.equal(r.kind, 'cost');
  });

  it('a regex over the program-size limit: a compile error when constant, a runtime error otherwise', () => {
    const pattern = '[a-z]{1000}[a-z]{1000}[a-z]{1000}';
    const c = compile(`object.s.matches('${pattern}')`);
    assert.equal(c.ok, false);
    if (!c.ok) assert.match(c.message, new RegExp(`more than the ${MAX_PROGRAM_SIZE} allowed`));
    for (const f of ['find', 'findAll']) assert.equal(compile(`object.s.${f}('${pattern}') != ''`).ok, false, f);
    const r = run('object.s.matches(object.p)', { s: 'abc', p: pattern });
    assert.equal(r.ok, false);
    if (!r.ok) {
      assert.equal(r.kind, 'runtime');
      assert.match(r.message, new RegExp(`more than the ${MAX_PROGRAM_SIZE} allowed`));
    }
  });

  it('a regex call over the matching budget (instructions × characters) is stopped by the cost limit first', () => {
    // The CEL figure, 0.1 × 0.25 × characters × instructions, reaches 1,000,000 units
    // (40 M instruction × character units) before re2.ts's 2^27-unit matching budget.
    const pattern = '[ab]{900}[ab]{900}';
    const size = compileLinear(pattern, { ecmaEscapes: false }).programSize;
    const s = 'ab'.repeat(40_000);
    assert.ok(size * s.length > MAX_TEST_COST, 'over the matching budget');
    const r = run(`object.s.matches('${pattern}')`, { s });
    assert.equal(r.ok, false);
    if (!r.ok) {
      assert.equal(r.kind, 'cost');
      assert.match(r.message, /per-expression cost limit \(1000000 units\)/);
    }
  });
});
