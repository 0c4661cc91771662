/**
 * The pass check of a composition (composition.ts's rule path): one
 * generated function per composition that runs its matchConditions and
 * validations in order, each from its own call site, and tells whether
 * every one gives true within its limit. The general loop calls every
 * expression of every composition through one call site, megamorphic
 * across the rules; here each site sees one function, which V8 may inline.
 *
 * The accounting is the general loop's (composition.ts's `test`), one
 * metered step per expression (metered-step.ts): each expression's limit
 * is min(PER_CALL_COST_LIMIT, remaining budget), and a true within it
 * debits the budget with what it used. At the first expression that gives
 * anything else (false, a throw, a meter over its limit) the check stops
 * and says where, its result left in `stop` and its meter as it ran: the
 * general loop goes on from there (the expressions before it gave true,
 * their cost is debited, the variables they read are computed), so every
 * outcome, message and cost reported is the general path's.
 *
 * Injection: the source holds indexes and numbers only (and a hash of
 * the expressions' texts, source-tag.ts); the expressions'
 * functions are passed by reference.
 *
 * Pure: no I/O.
 */
import type { Budget } from './engine.ts';
import type { Exec } from './codegen.ts';
import type { Meter } from './meter.ts';
import { meteredStep } from './metered-step.ts';
import { sourceTag } from './source-tag.ts';

/** Where a check stopped: what the expression threw (`thrown`) or gave. One per composition, reused. */
export interface CheckStop {
  thrown: boolean;
  value: unknown;
}

/** PASSED when every expression gave true within its limit; else the index of the first that did not (see the module comment). */
export type CompositionCheck = (context: Record<string, unknown>, meter: Meter, budget: Budget, stop: CheckStop) => number;

/** What a check that did not stop answers. */
export const PASSED = -1;

/**
 * The check of these expressions (the matchConditions, then the validations),
 * in order. `texts`: their CEL texts (source-tag.ts).
 */
export function compositionCheck(conditions: readonly Exec[], texts: readonly string[], perCallLimit: number): CompositionCheck {
  const steps = conditions.map((_, i) =>
    meteredStep({
      call: `C${i}`,
      meter: 'm',
      into: 'r',
      budget: 'B.remaining',
      mustBeTrue: true,
      onThrow: `S.thrown = true; S.value = e; return ${i};`,
      onReject: `S.thrown = false; S.value = r; return ${i};`,
    }),
  );
  const source = [
    '"use strict";',
    sourceTag(texts),
    ...conditions.map((_, i) => `const C${i} = CX[${i}];`),
    'return function compositionCheck(ctx, m, B, S) {',
    'let r;',
    ...steps,
    `return ${PASSED};`,
    '};',
  ].join('\n');
  // Indexes and numbers only (see the module comment).
  const make = new Function('CX', 'PER', source) as (cx: readonly Exec[], per: number) => CompositionCheck;
  return make(conditions, perCallLimit);
}
