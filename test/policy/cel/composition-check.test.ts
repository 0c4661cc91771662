/**
 * The pass check of a composition (src/policy/cel/composition-check.ts)
 * changes nothing but time: the rule path (checkComposition) with it gives
 * the outcome and leaves the budget the general loop alone (no check) does,
 * whether the check passes or stops: at a false, at an error, at a non-bool,
 * in a matchCondition or a validation, at a variable read first by the
 * expression it stops at, and where the request's budget runs out (the
 * general loop then goes on from where the check stopped). Its source and
 * its steps (metered-step.ts) hold no text of a rule.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { celContext, checkComposition, compileComposition, contextFor, newBudget, type Composition, type CompositionSpec } from '../../../src/policy/cel/index.ts';
import { meteredStep } from '../../../src/policy/cel/metered-step.ts';

function compiled(spec: CompositionSpec): Composition {
  const c = compileComposition(spec);
  if (!c.ok) assert.fail(JSON.stringify(c.errors));
  return c;
}

/** The same composition with no check: the rule path runs the general loop only. */
const generalOnly = (c: Composition): Composition => ({ ...c, check: undefined });

/** The rule path's outcomes of `compositions`, one after another on one request (one budget, one context), and the budget left. */
function outcomes(compositions: Composition[], object: unknown, units = 10_000_000): [unknown[], number] {
  const budget = newBudget(units);
  const activation = { object };
  const context = contextFor(activation, budget, () => celContext(activation));
  return [compositions.map((c) => checkComposition(c, context, budget)), budget.remaining];
}

describe('the pass check of a composition (composition-check.ts)', () => {
  it('gives the general loop outcomes and budget where it passes and wherever it stops', () => {
    const items = { name: 'kept', expression: 'object.spec.items.filter(x, x > 0)' };
    const rules = [
      compiled({
        matchConditions: [
          { name: 'pod', expression: "object.kind == 'Pod'" },
          { name: 'some', expression: 'object.spec.n > 0' },
        ],
        variables: [items, { name: 'count', expression: 'size(variables.kept)' }],
        validations: [
          { expression: 'size(variables.kept) >= 0' },
          { expression: 'object.spec.n != 3', messageExpression: "'n is ' + string(object.spec.n)" },
          // The variable is first read here: where the check stops, its cost is charged to this expression.
          { expression: 'variables.count < 5', messageExpression: "'count is ' + string(variables.count)" },
          { expression: 'object.spec.n / object.spec.d > 0' },
          { expression: 'object.spec.?s.orValue(true)' },
          { expression: 'object.spec.n < 100', reason: 'Forbidden' },
        ],
      }),
      // An error in a matchCondition, then a false one: false wins.
      compiled({
        matchConditions: [
          { name: 'ratio', expression: 'object.spec.n / object.spec.d >= 0' },
          { name: 'small', expression: 'object.spec.n < 10' },
        ],
        validations: [{ expression: 'object.spec.n != 4' }],
      }),
      // A variable that fails: absorbed by `||`, then read plainly, then by a message.
      compiled({
        variables: [{ name: 'ratio', expression: 'object.spec.n / object.spec.d' }, items],
        validations: [
          { expression: 'variables.ratio > 0 || true' },
          { expression: 'size(variables.kept) < 4' },
          { expression: 'variables.ratio > 0', messageExpression: "'ratio ' + string(variables.ratio)" },
          { expression: 'object.spec.n != 11' },
        ],
      }),
    ];
    const general = rules.map(generalOnly);
    let stopped = 0;
    for (const kind of ['Pod', 'Service']) {
      for (const n of [0, 1, 3, 4, 11, 200]) {
        for (const d of [0, 1]) {
          for (const s of [undefined, 'x', false]) {
            const object = { kind, spec: { n, d, items: Array.from({ length: n % 13 }, (_, i) => i), ...(s === undefined ? {} : { s }) } };
            const fast = outcomes(rules, object);
            assert.deepEqual(fast, outcomes(general, object), JSON.stringify(object));
            stopped += fast[0].filter((o) => o !== undefined).length;
          }
        }
      }
    }
    assert.ok(stopped > 100, `the checks stopped ${stopped} times`);
  });

  it('gives the general loop outcome and budget on both sides of the budget, to the unit, wherever it runs out', () => {
    // Validations over 1000 items (about 5,000 units each), one comparison of two strings of length L (reading each costs
    // L/10, comparing L/10): with the request's budget set near their sum, it runs out at one L, in the comparison or after it.
    const all = { expression: 'object.items.all(x, x >= 0)' };
    const tune = { expression: 'object.s == object.t' };
    const specs: [string, CompositionSpec][] = [
      ['last', { variables: [{ name: 'kept', expression: 'object.items.filter(x, x >= 0)' }], validations: [all, all, all, all, { expression: 'size(variables.kept) >= 0' }, tune] }],
      ['followed by others', { validations: [all, all, tune, all, { expression: 'object.s != object.t', message: 'same' }] }],
      ['in a matchCondition', { matchConditions: [{ name: 'a', expression: all.expression }, { name: 'tune', ...tune }, { name: 'b', expression: all.expression }], validations: [all] }],
    ];
    for (const [where, spec] of specs) {
      const c = compiled(spec);
      const object = (l: number): unknown => ({ items: Array.from({ length: 1000 }, (_, i) => i), s: 'x'.repeat(l), t: 'x'.repeat(l) });
      // What L = 1700 costs, measured on a large budget: the budget runs out at an L near it.
      const [, left] = outcomes([generalOnly(c)], object(1_700), 1_000_000);
      const units = 1_000_000 - left;
      let seen = 0;
      for (let l = 1_000; l <= 2_400; l += 5) {
        const fast = outcomes([c], object(l), units);
        assert.deepEqual(fast, outcomes([generalOnly(c)], object(l), units), `${where}, L = ${l}`);
        if (JSON.stringify(fast[0]).includes('"kind":"cost"')) seen++;
      }
      assert.ok(seen > 0 && seen < 281, `${where}: the budget is crossed within the lengths tried (${seen} ran out)`);
    }
  });

  it('generates no text of a rule into its source, and its steps take names only', () => {
    const c = compiled({
      matchConditions: [{ name: '"); throw 1; ("', expression: "'*/ throw 1; /*' != ''" }],
      validations: [{ expression: "'`${x}`' != '\"); throw 1; (\"'", message: '"); throw 1; ("' }],
    });
    assert.doesNotMatch(String(c.check), /throw 1|\$\{x\}/);
    assert.equal(outcomes([c], {})[0][0], undefined);
    for (const name of ['a); throw 1; (b', 'x y', '']) {
      assert.throws(() => meteredStep({ call: name, meter: 'm', into: 'r', budget: 'rem', mustBeTrue: true, onThrow: 'return 0;', onReject: 'return 0;' }), /is not a name/);
    }
  });
});
