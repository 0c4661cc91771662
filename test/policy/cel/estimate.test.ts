/**
 * The estimated worst-case cost of an expression (src/policy/cel/estimate.ts),
 * shown in /debug/vars: it ranks expressions by the work they can do, with
 * every input list, map or string assumed to hold 1,000 entries.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compile, PER_CALL_COST_LIMIT } from '../../../src/policy/cel/index.ts';
import { ASSUMED_INPUT_SIZE } from '../../../src/policy/cel/estimate.ts';

function estimate(expr: string): number {
  const p = compile(expr, { resultType: 'any' });
  if (!p.ok) assert.fail(`${expr}: ${p.message}`);
  return p.estimatedCost;
}

describe('estimated worst-case cost', () => {
  it('grows with the loops over the input, not with the text', () => {
    const constant = estimate('1 + 2 == 3');
    const field = estimate('object.spec.hostNetwork == false');
    const loop = estimate('object.spec.containers.all(c, c.name != "")');
    const nested = estimate('object.spec.containers.all(c, object.spec.containers.all(d, c.name != d.name))');
    assert.ok(constant < 10, `constant ${constant}`);
    assert.ok(field < 1000, `field ${field}`);
    assert.ok(loop >= ASSUMED_INPUT_SIZE && loop < PER_CALL_COST_LIMIT, `loop ${loop}`);
    assert.ok(nested > PER_CALL_COST_LIMIT, `nested ${nested}: two nested loops over 1,000 entries exceed the limit`);
  });

  it('charges quadratic library calls by the product of their inputs', () => {
    const sets = estimate("sets.contains(object.a.split(','), object.b.split(','))");
    assert.ok(sets >= ASSUMED_INPUT_SIZE * ASSUMED_INPUT_SIZE, `sets ${sets}`);
  });

  it('saturates instead of overflowing', () => {
    const deep = estimate(`${Array.from({ length: 12 }, (_, i) => `object.l.all(x${i}, `).join('')}true${')'.repeat(12)}`);
    assert.ok(Number.isFinite(deep) && deep <= 1e15, `deep ${deep}`);
  });
});
