/**
 * The pass check of a composition (composition.ts's rule path): one
 * generated function per composition that runs its matchConditions and
 * validations in order, each from its own call site, and answers true when
 * every one gives true within its limit. The general loop calls every
 * expression of every composition through one call site, megamorphic
 * across the rules; here each site sees one function, which V8 may inline.
 *
 * The accounting is the general loop's (composition.ts's `test`): each
 * expression's limit is min(PER_CALL_COST_LIMIT, remaining budget), and a
 * true within it debits the budget with what it used. On anything else the
 * check answers false and the caller restores the budget and runs the
 * general loop from the start, so every outcome, message and cost reported
 * is the general path's (CEL is deterministic; values shared by the
 * request's compositions are charged as computed either way).
 *
 * Injection: the source holds indexes and numbers only; the expressions'
 * functions are passed by reference.
 *
 * Pure: no I/O.
 */
import type { Budget } from './engine.ts';
import type { Exec } from './codegen.ts';
import type { Meter } from './meter.ts';

/** True when every expression gave true within its limit (the budget debited as the general loop does). */
export type CompositionCheck = (context: Record<string, unknown>, meter: Meter, budget: Budget) => boolean;

/** The check of these expressions (the matchConditions, then the validations), in order. */
export function compositionCheck(conditions: readonly Exec[], perCallLimit: number): CompositionCheck {
  const steps = conditions.map(
    (_, i) => `m.used = 0; m.limit = B.remaining < PER ? B.remaining : PER;
try { r = C${i}(ctx, m); } catch (e) { return false; }
if (r !== true || m.used > m.limit) return false;
B.remaining -= m.used;`,
  );
  const source = [
    '"use strict";',
    ...conditions.map((_, i) => `const C${i} = CX[${i}];`),
    'return function compositionCheck(ctx, m, B) {',
    'let r;',
    ...steps,
    'return true;',
    '};',
  ].join('\n');
  // Indexes and numbers only (see the module comment).
  const make = new Function('CX', 'PER', source) as (cx: readonly Exec[], per: number) => CompositionCheck;
  return make(conditions, perCallLimit);
}
