/**
 * Issue 19's weak point: an expression that runs on cel-js's evaluation
 * (a fallback: an AST shape the generator does not compile) was charged
 * nothing but what library functions charged. It is now charged every node
 * of the expression, per evaluation, before it runs, so the per-call limit
 * and the request budget bound it as they bound generated code.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compile, evaluate, newBudget, type Program } from '../../../src/policy/cel/index.ts';
import { fallbackExec } from '../../../src/policy/cel/compile.ts';

function asFallback(expression: string): Program {
  const p = compile(expression);
  assert.ok(p.ok, expression);
  if (!p.ok) throw new Error('unreachable');
  return Object.freeze({ ...p, exec: fallbackExec(p.run), fallback: 'forced by the test' });
}

describe('fallback expressions are charged per node', () => {
  it('a bigger expression costs more, in proportion to its nodes, and gives the same value', () => {
    const small = evaluate(asFallback('object.a == 1'), { object: { a: 1 } });
    const big = evaluate(asFallback('object.a == 1 && object.a == 1 && object.a == 1 && object.a == 1'), { object: { a: 1 } });
    assert.ok(small.ok && big.ok);
    assert.equal(small.ok && small.value, true);
    assert.equal(big.ok && big.value, true);
    // `object.a == 1` is 4 nodes (==, ., id, value); four of them joined by three && are 19.
    assert.equal(small.cost, 4);
    assert.equal(big.cost, 19);
  });

  it('a per-call limit below the node count is a cost error, and the request budget is debited', () => {
    const p = asFallback('object.a == 1 && object.a == 1');
    const budget = newBudget(1_000);
    const r = evaluate(p, { object: { a: 1 } }, budget, 5);
    assert.equal(r.ok, false);
    assert.equal(!r.ok && r.kind, 'cost');
    assert.ok(budget.remaining < 1_000);
  });
});
