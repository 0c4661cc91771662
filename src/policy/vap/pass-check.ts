/**
 * The pass check of a policy: one generated function per compiled policy
 * that tells whether an evaluation admits the request with nothing to
 * report (every matchCondition and every validation true, no error, no
 * cost limit reached). It is what most evaluations are, and run.ts's
 * general evaluation is then not needed; on any other outcome (false, an
 * error, a cost limit) the check answers false and the general evaluation
 * runs from the start, so every reported result, message and cost is the
 * general path's. CEL is deterministic and pure, so running an expression
 * twice changes nothing but time. (A composition's check hands the general
 * loop where it stopped, composition-check.ts; this one does not: its
 * variables are locals of the generated function that run.ts's resolver
 * cannot take over, and the expression it stopped at would have to be
 * classified as the engine's `run` does, past the engine seam, since
 * running it again after the variables it read were charged and kept
 * could give another cost near the end of the budget.)
 *
 * Why generated: the general path calls every expression through one call
 * site (the engine's `run`), megamorphic across the library's expressions,
 * and finds variables through a resolver. Here each expression is called
 * from its own site (monomorphic, so V8 may inline it), and each variable
 * is a local slot of the policy's function, computed lazily once.
 *
 * The cost accounting is the general path's, step for step (run.ts's
 * Evaluation, cel-adapter.ts's run), each call one metered step
 * (src/policy/cel/metered-step.ts): each expression has the per-call limit
 * min(PER_CALL_COST_LIMIT, remaining budget); a variable runs on its own
 * meter and is charged to the evaluation's budget, not to its reader; a
 * variable shared by the policies of a request (`sharedIds`) is taken from
 * `shared` when the budget can pay its cost, and stored there when
 * computed. So the check passes exactly when the general path passes.
 *
 * Injection: the generated source holds no text of the policy (names and
 * programs are passed by reference), only indexes and numbers (and a hash
 * of the expressions' texts, cel/source-tag.ts).
 *
 * Pure: no I/O.
 */
import { meteredStep, sourceTag, type Exec } from '../cel/index.ts';
import { PER_CALL_COST_LIMIT, RUNTIME_COST_BUDGET, type PassCheck } from './engine.ts';

export type { PassCheck };

export interface PassCheckSpec {
  /** The variables in order, each name with its expression. */
  variables: readonly { name: string; exec: Exec }[];
  /** The matchConditions then the validations: each must give true. */
  conditions: readonly Exec[];
  /** The CEL texts of the variables and conditions (source-tag.ts: keeps checks of different policies apart in V8's cache). */
  texts: readonly string[];
  /** Marks the `variables` object for the engine (e.g. its values are CEL values already). */
  mark: (vars: Record<string, unknown>) => Record<string, unknown>;
}

/** Generates the pass check of a policy (see the module comment). */
export function passCheck(spec: PassCheckSpec): PassCheck {
  const nv = spec.variables.length;
  const range = (n: number, f: (i: number) => string): string => Array.from({ length: n }, (_, i) => f(i)).join('\n');
  // A name declared twice reads the first, as the general path's resolver does.
  const firsts = new Map<string, number>();
  spec.variables.forEach((v, i) => firsts.has(v.name) || firsts.set(v.name, i));
  const slots = nv > 0 ? `let ${range(nv, (i) => `v${i} = U`).split('\n').join(', ')};` : '';
  const source = [
    '"use strict";',
    sourceTag(spec.texts),
    'const U = {};',
    'const BAIL = new Error("a variable could not be evaluated");',
    'const ctx = { object: null, oldObject: null, request: null, params: null, namespaceObject: null, variables: null };',
    'const m = { used: 0, limit: 0 };',
    'let rem = 0, ids = undefined, S = undefined, bail = false;',
    slots,
    range(nv, (i) => `const V${i} = VX[${i}], m${i} = { used: 0, limit: 0 };`),
    range(spec.conditions.length, (i) => `const C${i} = CX[${i}];`),
    // A variable: the shared value when the budget can pay it, else computed
    // on its own meter (run.ts's Evaluation.variable). Once one failed, every
    // read throws at once (the reader may absorb it, `||`): no recomputing.
    range(
      nv,
      (i) => `function c${i}() {
const id = ids === undefined ? -1 : (ids[${i}] ?? -1);
if (id >= 0 && S !== undefined) {
const known = S[id];
if (known !== undefined && rem >= known.cost) { rem -= known.cost; return known.outcome.value; }
}
const before = rem;
let value;
${meteredStep({ call: `V${i}`, meter: `m${i}`, into: 'value', budget: 'rem', mustBeTrue: false, onThrow: 'bail = true; throw BAIL;', onReject: 'bail = true; throw BAIL;' })}
if (id >= 0 && S !== undefined) S[id] = { outcome: { ok: true, value }, cost: before - rem };
return value;
}
function g${i}() { if (v${i} !== U) return v${i}; if (bail) throw BAIL; return (v${i} = c${i}()); }`,
    ),
    'const vars = Object.create(null);',
    ...[...firsts].map(([, i]) => `Object.defineProperty(vars, NAMES[${i}], { enumerable: true, get: g${i} });`),
    'ctx.variables = MARK(vars);',
    'return function passCheck(object, oldObject, request, params, namespaceObject, sharedIds, shared) {',
    'ctx.object = object ?? null; ctx.oldObject = oldObject ?? null; ctx.request = request ?? null; ctx.params = params ?? null; ctx.namespaceObject = namespaceObject ?? null;',
    `rem = ${RUNTIME_COST_BUDGET}; ids = sharedIds; S = shared; bail = false;`,
    range(nv, (i) => `v${i} = U;`),
    'let r;',
    // Each condition from its own call site: true within its limit, or the general path runs.
    range(
      spec.conditions.length,
      (i) => meteredStep({ call: `C${i}`, meter: 'm', into: 'r', budget: 'rem', mustBeTrue: true, alsoRejects: 'bail', onThrow: 'return false;', onReject: 'return false;' }),
    ),
    'return true;',
    '};',
  ].join('\n');
  // The source is made of indexes and numbers only (see the module comment).
  const make = new Function('VX', 'CX', 'NAMES', 'MARK', 'PER', source) as (vx: Exec[], cx: Exec[], names: string[], mark: PassCheckSpec['mark'], per: number) => PassCheck;
  return make(
    spec.variables.map((v) => v.exec),
    [...spec.conditions],
    spec.variables.map((v) => v.name),
    spec.mark,
    PER_CALL_COST_LIMIT,
  );
}
