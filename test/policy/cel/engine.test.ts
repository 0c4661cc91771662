/**
 * The CEL engine (src/policy/cel): Kubernetes' variables, optional types,
 * escaping, compile errors with positions, `authorizer` refused, RE2 regexes
 * and the cost limits that turn hostile expressions into errors.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  compile,
  compileComposition,
  evaluate,
  evaluateComposition,
  newBudget,
  PER_CALL_COST_LIMIT,
  type Activation,
  type EvalResult,
  type Program,
} from '../../../src/policy/cel/index.ts';

const pod = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'web', namespace: 'team-a', labels: { app: 'web' }, annotations: { 'example.com/owner': 'me' } },
  spec: {
    containers: [
      { name: 'app', image: 'nginx:1.27', ports: [{ containerPort: 80 }], securityContext: { privileged: true, runAsUser: 1000 } },
      { name: 'side', image: 'busybox' },
    ],
  },
};

function program(expr: string, resultType: 'bool' | 'string' | 'any' = 'any', variables: string[] = []): Program {
  const p = compile(expr, { resultType, variables });
  if (!p.ok) assert.fail(`${expr}: ${p.message} at ${JSON.stringify(p.position)}`);
  return p;
}

function run(expr: string, activation: Activation = { object: pod }): EvalResult {
  return evaluate(program(expr), activation);
}

function value(expr: string, activation: Activation = { object: pod }): unknown {
  const r = run(expr, activation);
  if (!r.ok) assert.fail(`${expr}: ${r.kind}: ${r.message}`);
  return r.value;
}

describe('CEL engine: Kubernetes variables and values', () => {
  it('reads object, oldObject, request, params and namespaceObject; absent ones are null', () => {
    const a: Activation = {
      object: pod,
      oldObject: null,
      request: { operation: 'CREATE', userInfo: { username: 'alice' } },
      params: { max: 3 },
      namespaceObject: { metadata: { name: 'team-a', labels: { env: 'prod' } } },
    };
    assert.equal(value("object.metadata.name + '/' + request.userInfo.username", a), 'web/alice');
    assert.equal(value('oldObject == null', a), true);
    assert.equal(value('params.max > 2', a), true);
    assert.equal(value("namespaceObject.metadata.labels.env == 'prod'", a), true);
    assert.equal(value('params == null && namespaceObject == null', { object: pod }), true);
  });

  it('types integral JSON numbers as int, as the API server does', () => {
    assert.equal(value('object.spec.containers[0].ports[0].containerPort + 1'), 81n);
    assert.equal(value('object.spec.containers[0].securityContext.runAsUser >= 1000'), true);
  });

  it('supports optional types: ?., [?…], orValue, hasValue, optional.of/none, value, or', () => {
    assert.equal(value('object.spec.containers.all(c, !c.?securityContext.?privileged.orValue(false))'), false);
    assert.deepEqual(value('object.spec.?initContainers.orValue([])'), []);
    assert.equal(value("object.metadata.?labels[?'app'].hasValue()"), true);
    assert.equal(value("object.metadata.labels[?'nope'].hasValue()"), false);
    assert.equal(value('optional.of(1).value()'), 1n);
    assert.equal(value('optional.none().or(optional.of(2)).value()'), 2n);
    assert.equal(value("optional.ofNonZeroValue('').hasValue() || optional.ofNonZeroValue([]).hasValue() || optional.ofNonZeroValue(0).hasValue()"), false);
    assert.equal(value('optional.ofNonZeroValue(object.spec.containers).hasValue()'), true);
  });

  it('unescapes property names (__dash__, __dot__, __slash__, __underscores__, keywords)', () => {
    const obj = { spec: { 'x-y': 1, 'a.b': 2, 'c/d': 3, e__f: 4, namespace: 5 } };
    assert.equal(value('object.spec.x__dash__y + object.spec.a__dot__b + object.spec.c__slash__d', { object: obj }), 6n);
    assert.equal(value('object.spec.e__underscores__f', { object: obj }), 4n);
    assert.equal(value('object.spec.__namespace__', { object: obj }), 5n);
    assert.equal(value('has(object.spec.x__dash__y)', { object: obj }), true);
  });
});

describe('CEL engine: compile errors', () => {
  const cases: [string, RegExp, number][] = [
    ['object.spec.containers.all(c, c.name ==)', /Unexpected/, 39],
    ['nope.x', /Unknown variable: nope/, 0],
    ["1 + 'a'", /no such overload/, 0],
    ['object.x &&\n  variables.missing', /undefined variable "variables.missing"/, 14],
    ["authorizer.group('').resource('pods').check('get').allowed()", /`authorizer` is not supported/, 0],
  ];
  for (const [expr, re, offset] of cases) {
    it(`refuses ${JSON.stringify(expr)} with its position`, () => {
      const p = compile(expr);
      assert.equal(p.ok, false);
      if (p.ok) return;
      assert.match(p.message, re);
      assert.equal(p.position.offset, offset);
      assert.ok(p.position.line >= 1 && p.position.column >= 1);
    });
  }

  it('gives line and column for multi-line expressions', () => {
    const p = compile('object.spec.containers.all(c,\n  c.name ==\n)');
    assert.equal(p.ok, false);
    if (p.ok) return;
    assert.equal(p.position.line, 3);
    assert.equal(p.position.column, 1);
  });

  it('refuses an expression of the wrong result type', () => {
    const p = compile('object.metadata.name.size()', { resultType: 'bool' });
    assert.equal(p.ok, false);
    if (!p.ok) assert.match(p.message, /must evaluate to bool, but it evaluates to int/);
  });

  it('refuses authorizer anywhere in the expression, even inside a macro', () => {
    const p = compile("object.spec.containers.all(c, authorizer.path('/x').check('get').allowed())");
    assert.equal(p.ok, false);
    if (!p.ok) assert.equal(p.position.offset, 30);
  });
});

describe('CEL engine: regexes are RE2', () => {
  it('matches, find and findAll', () => {
    assert.equal(value("object.metadata.name.matches('^w.b$') && matches('abc', 'b')"), true);
    assert.equal(value("'nginx:1.27'.find('[0-9.]+$')"), '1.27');
    assert.deepEqual(value("'a1b22c333'.findAll('[0-9]+')"), ['1', '22', '333']);
    assert.deepEqual(value("'a1b22c333'.findAll('[0-9]+', 2)"), ['1', '22']);
  });

  it('a pattern that backtracks exponentially in JS runs in linear time', () => {
    // 5000 a's against (a+)+$ with a JS RegExp would not finish in our lifetime.
    const s = 'a'.repeat(5000) + '!';
    assert.equal(value("object.s.matches('^(a+)+$')", { object: { s } }), false);
  });

  it('refuses RE2-invalid syntax (backreferences): a compile error for a constant pattern, an evaluation error otherwise', () => {
    const c = compile("'aa'.matches('(a)\\\\1')");
    assert.equal(c.ok, false);
    if (!c.ok) {
      assert.match(c.message, /regular expression \/\(a\)\\1\/ is not valid/);
      assert.equal(c.position.offset, 13, 'the position of the pattern');
    }
    const r = run('object.s.matches(object.p)', { object: { s: 'aa', p: '(a)\\1' } });
    assert.equal(r.ok, false);
    if (!r.ok) assert.match(r.message, /is not valid/);
  });
});

describe('CEL engine: cost limits', () => {
  it('a nested comprehension over a big list is a cost error, not a stall', () => {
    const big = Array.from({ length: 2000 }, (_, i) => i);
    const r = run('object.l.all(x, object.l.all(y, x + y >= 0))', { object: { l: big } });
    assert.equal(r.ok, false);
    if (!r.ok) {
      assert.equal(r.kind, 'cost');
      assert.match(r.message, /per-expression cost limit \(1000000 units\)/);
    }
  });

  it('two-variable comprehensions are metered too', () => {
    const big = Array.from({ length: 2000 }, (_, i) => i);
    const r = run('object.l.all(i, x, object.l.all(j, y, x + y >= 0))', { object: { l: big } });
    assert.equal(r.ok, false);
    if (!r.ok) assert.equal(r.kind, 'cost');
  });

  it('charges for string size: a huge string scanned in a loop exceeds the limit', () => {
    const s = 'x'.repeat(1_000_000);
    const l = Array.from({ length: 100 }, (_, i) => i);
    const r = run("object.l.all(i, !object.s.contains('y'))", { object: { s, l } });
    assert.equal(r.ok, false);
    if (!r.ok) assert.equal(r.kind, 'cost');
  });

  it('an error absorbed by || does not hide a cost overrun', () => {
    const big = Array.from({ length: 2000 }, (_, i) => i);
    const r = run('object.l.all(x, object.l.all(y, x + y >= 0)) || true', { object: { l: big } });
    assert.equal(r.ok, false);
    if (!r.ok) assert.equal(r.kind, 'cost');
  });

  it('the per-request budget is shared across evaluations', () => {
    const l = Array.from({ length: 100 }, (_, i) => i);
    const p = program('object.l.all(x, object.l.all(y, x + y >= 0))');
    const budget = newBudget(100_000);
    const first = evaluate(p, { object: { l } }, budget);
    assert.equal(first.ok, true);
    let r: EvalResult = first;
    for (let i = 0; i < 10 && r.ok; i++) r = evaluate(p, { object: { l } }, budget);
    assert.equal(r.ok, false);
    if (!r.ok) {
      assert.equal(r.kind, 'cost');
      assert.match(r.message, /request's CEL cost budget/);
    }
    assert.ok(first.ok && first.cost > 10_000 && first.cost < PER_CALL_COST_LIMIT);
  });

  it('a realistic Pod check costs little', () => {
    const r = run('object.spec.containers.all(c, !c.?securityContext.?privileged.orValue(false))');
    assert.ok(r.cost > 0 && r.cost < 100, `cost ${r.cost}`);
  });
});

describe('CEL engine: compositions (matchConditions, variables, validations)', () => {
  const spec = {
    matchConditions: [{ name: 'not-system', expression: "!object.metadata.name.startsWith('system-')" }],
    variables: [
      { name: 'containers', expression: 'object.spec.containers + object.spec.?initContainers.orValue([])' },
      { name: 'privileged', expression: 'variables.containers.filter(c, c.?securityContext.?privileged.orValue(false))' },
    ],
    validations: [
      {
        expression: 'size(variables.privileged) == 0',
        message: 'Privileged containers are not allowed.',
        messageExpression: "'privileged containers: ' + variables.privileged.map(c, c.name).join(', ')",
        reason: 'Forbidden',
      },
      { expression: 'variables.containers.size() < 5' },
      { expression: 'variables.containers.size() > 5' },
    ],
  };

  it('evaluates variables lazily and once, and builds messages like the API server', () => {
    const c = compileComposition(spec);
    assert.ok(c.ok);
    if (!c.ok) return;
    const out = evaluateComposition(c, { object: pod });
    assert.equal(out.matched, true);
    if (out.matched !== true) return;
    assert.deepEqual(out.validations, [
      { index: 0, result: 'fail', message: 'privileged containers: app', reason: 'Forbidden' },
      { index: 1, result: 'pass' },
      { index: 2, result: 'fail', message: 'failed expression: variables.containers.size() > 5', reason: 'Invalid' },
    ]);
  });

  it('a false matchCondition means not matched', () => {
    const c = compileComposition(spec);
    assert.ok(c.ok);
    if (!c.ok) return;
    const out = evaluateComposition(c, { object: { ...pod, metadata: { name: 'system-x' } } });
    assert.deepEqual(out.matched, false);
  });

  it('a variable may only read earlier variables', () => {
    const c = compileComposition({
      variables: [
        { name: 'a', expression: 'variables.b' },
        { name: 'b', expression: '1' },
      ],
      validations: [{ expression: 'variables.a == 1' }],
    });
    assert.equal(c.ok, false);
    if (!c.ok) {
      assert.equal(c.errors[0]?.field, 'variables[0].expression');
      assert.match(c.errors[0]?.message ?? '', /undefined variable "variables.b"/);
    }
  });

  it('an erroring variable is an error of the validation that reads it', () => {
    const c = compileComposition({
      variables: [{ name: 'x', expression: 'object.spec.nope.size()' }],
      validations: [{ expression: 'variables.x > 0' }, { expression: 'true' }],
    });
    assert.ok(c.ok);
    if (!c.ok) return;
    const out = evaluateComposition(c, { object: pod });
    assert.equal(out.matched, true);
    if (out.matched !== true) return;
    assert.equal(out.validations[0]?.result, 'error');
    assert.equal(out.validations[1]?.result, 'pass');
  });

  it('the variables object holds only the declared names, is computed per evaluation, and a second read costs nothing', () => {
    const c = compileComposition({
      variables: [
        { name: 'names', expression: 'object.spec.containers.map(c, c.name)' },
        { name: 'n', expression: 'size(variables.names)' },
      ],
      validations: [
        { expression: "variables.all(k, k in ['names', 'n']) && size(variables) == 2 && 'n' in variables && !('toString' in variables)" },
        { expression: 'variables.n == 2' },
        { expression: 'variables.n == 2 && variables.n == 2' },
      ],
    });
    assert.ok(c.ok);
    if (!c.ok) return;
    const two = evaluateComposition(c, { object: pod });
    const one = evaluateComposition(c, { object: { ...pod, spec: { containers: [{ name: 'x' }] } } });
    assert.ok(two.matched === true && one.matched === true);
    if (two.matched !== true || one.matched !== true) return;
    assert.deepEqual(two.validations.map((v) => v.result), ['pass', 'pass', 'pass']);
    // Another evaluation does not see the first one's values.
    assert.deepEqual(one.validations.map((v) => v.result), ['pass', 'fail', 'fail']);
    // A second validation reading `variables.n` does not pay for computing it
    // again: its cost is the same whatever the variable's expression costs.
    const delta = (expression: string): number => {
      const k = compileComposition({ variables: [{ name: 'n', expression }], validations: [{ expression: 'variables.n == 2' }, { expression: 'variables.n == 2 && variables.n == 2' }] });
      assert.ok(k.ok);
      if (!k.ok) return NaN;
      return evaluateComposition(k, { object: pod }).cost - evaluateComposition({ ...k, validations: k.validations.slice(0, 1) }, { object: pod }).cost;
    };
    assert.equal(delta('object.spec.containers.map(c, c.name + c.name).size()'), delta('2'));
  });

  it('compositions sharing a request see the same values and pay the same cost as alone', () => {
    const make = (first: string, validation: string) => {
      const c = compileComposition({
        variables: [
          { name: 'names', expression: 'object.spec.containers.map(c, c.name)' },
          { name: 'first', expression: first },
          { name: 'next', expression: 'variables.first + 1' },
          { name: 'bad', expression: 'object.spec.nope.size()' },
        ],
        validations: [{ expression: validation }],
      });
      assert.ok(c.ok);
      if (!c.ok) throw new Error('unreachable');
      return c;
    };
    const a = make('1', "variables.names == ['app', 'side'] && variables.next == 2");
    const b = make('2', "variables.names.size() == 2 && variables.next == 3");
    const bad = make('1', 'variables.bad > 0');
    const alone = [a, b, bad, bad].map((c) => evaluateComposition(c, { object: pod }));
    const activation = { object: pod };
    const budget = newBudget();
    const together = [a, b, bad, bad].map((c) => evaluateComposition(c, activation, budget));
    assert.deepEqual(together, alone);
    assert.deepEqual(together.map((o) => o.matched === true && o.validations[0]?.result), ['pass', 'pass', 'error', 'error']);
    // Under a budget too small for the second computation, it is a cost error as it would be alone.
    const small = newBudget(together[0]!.cost + 3);
    const squeezed = [a, a].map((c) => evaluateComposition(c, activation, small));
    assert.equal(squeezed[0]?.matched === true && squeezed[0].validations[0]?.result, 'pass');
    const second = squeezed[1]?.matched === true ? squeezed[1].validations[0] : undefined;
    const aloneSqueezed = evaluateComposition(a, { object: pod }, newBudget(3));
    const aloneFirst = aloneSqueezed.matched === true ? aloneSqueezed.validations[0] : undefined;
    assert.equal(second?.result === 'error' && second.kind, 'cost');
    assert.equal(aloneFirst?.result === 'error' && aloneFirst.kind, 'cost');
  });

  it('reports every compile error with its field', () => {
    const c = compileComposition({ validations: [{ expression: 'object.' }, { expression: 'true', messageExpression: '1' }] });
    assert.equal(c.ok, false);
    if (!c.ok) assert.deepEqual(c.errors.map((e) => e.field), ['validations[0].expression', 'validations[1].messageExpression']);
  });
});
