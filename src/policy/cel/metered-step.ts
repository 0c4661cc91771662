/**
 * The source of one metered step of a generated check (vap/pass-check.ts,
 * composition-check.ts): an expression's function called on its meter,
 * with the general paths' accounting (engine.ts's classify and run,
 * composition.ts's `test`, vap/cel-adapter.ts's run):
 * - limit: the meter's limit is min(per-call limit, remaining budget);
 * - call: the function runs on the context and the meter;
 * - check: a throw, a value that is not accepted or a meter over its
 *   limit ends the step (the caller says how);
 * - debit: otherwise the budget is debited with what the meter used, never
 *   below 0 (a variable read inside the call may have debited it already).
 * The one generator of this step: the checks differ only in where their
 * budget is held and in what ends them.
 *
 * Injection: every part is an identifier or a fragment of the caller's own
 * code, never text of a policy (asserted: `call`, `meter`, `into` and
 * `budget` must be names). The generated code expects `ctx` (the context)
 * and `PER` (the per-call limit) in scope.
 *
 * Pure: no I/O.
 */

export interface MeteredStep {
  /** The expression's function. */
  call: string;
  /** The meter it runs on. */
  meter: string;
  /** Where its value goes (declared by the caller). */
  into: string;
  /** The remaining budget: read for the limit, debited after (e.g. `rem`, `B.remaining`). */
  budget: string;
  /** A condition: only `true` is accepted; otherwise any value is. */
  mustBeTrue: boolean;
  /** A term that, when true after the call, ends the step as a rejection (e.g. a failed variable read and absorbed). */
  alsoRejects?: string;
  /** Code run when the call throws (the thrown value is `e`); it must leave the step (return or throw). */
  onThrow: string;
  /** Code run when the value is not accepted or the meter went over its limit; it must leave the step. */
  onReject: string;
}

const NAME = /^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)?$/;

/** The source of the step (see the module comment). */
export function meteredStep(s: MeteredStep): string {
  for (const name of [s.call, s.meter, s.into, s.budget]) {
    if (!NAME.test(name)) throw new Error(`metered step: ${JSON.stringify(name)} is not a name`);
  }
  const { meter: m, budget: b } = s;
  const rejected = [...(s.mustBeTrue ? [`${s.into} !== true`] : []), ...(s.alsoRejects !== undefined ? [s.alsoRejects] : []), `${m}.used > ${m}.limit`].join(' || ');
  return `${m}.used = 0; ${m}.limit = ${b} < PER ? ${b} : PER;
try { ${s.into} = ${s.call}(ctx, ${m}); } catch (e) { ${s.onThrow} }
if (${rejected}) { ${s.onReject} }
${b} = ${b} > ${m}.used ? ${b} - ${m}.used : 0;`;
}
