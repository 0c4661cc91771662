/**
 * Runtime cost metering for cel-js, the counterpart of cel-go's
 * `ActualCostTracker` that the API server uses.
 *
 * cel-js has no cost hook, but every node evaluation goes through one method,
 * `Evaluator.prototype.run(ast, ctx)` (operators, macros, comprehension steps,
 * optionals). We wrap that method once: while a meter is active, each node
 * evaluation costs 1 unit, plus a size charge on the value it produced —
 * ceil(0.1 × length) for strings, bytes, lists and maps — mirroring cel-go's
 * traversal cost factor (0.1 per element or character). That bounds what a
 * node that does constant work per produced value can do. It does not bound
 * work that is not proportional to a result (a `sets.contains` on two
 * 30,000-element lists returns one bool after 900 M comparisons; `==` on
 * two big maps; a regex's instructions × characters): such functions and
 * operators are charged BEFORE they run by charges.ts, with cost.ts's
 * figures (cel-go's model), so a call over the limit never starts. For those
 * nodes the result's size is part of the figure and is not charged again
 * ({@link markPrecharged}). Together, total work is bounded by a constant
 * times the metered cost: a hostile expression (nested comprehensions, huge
 * strings, quadratic library calls) is a cost error, not a stalled thread.
 *
 * The evaluator prototype is not exported by cel-js: we obtain it through a
 * macro, whose `evaluate(evaluator, …)` hook receives the instance. The
 * library version is pinned (8.0.0), and test/policy/cel/engine.test.ts fails if
 * an upgrade bypasses `run` (a loop that must exceed the budget would not).
 */
import { Environment } from '@marcbachmann/cel-js';

/** A meter for one evaluation. `limit` already accounts for the request budget. */
export interface Meter {
  used: number;
  limit: number;
}

/** Thrown through cel-js when a meter is exhausted. */
export class CostLimitExceeded extends Error {
  constructor(readonly meter: Meter) {
    super(`cost limit ${meter.limit} exceeded`);
    this.name = 'CostLimitExceeded';
  }
}

let active: Meter | undefined;

/** The meter of the evaluation running now (cel-js is synchronous). */
export function activeMeter(): Meter | undefined {
  return active;
}

/** Charge extra units to the running evaluation (library functions). */
export function charge(units: number): void {
  const m = active;
  if (m === undefined) return;
  m.used += units;
  if (m.used > m.limit) throw new CostLimitExceeded(m);
}

/** The size charge of a value: 0.1 per character or element, rounded up. */
export function sizeCost(value: unknown): number {
  if (typeof value === 'string') return value.length > 9 ? Math.ceil(value.length * 0.1) : value.length === 0 ? 0 : 1;
  if (Array.isArray(value) || value instanceof Uint8Array) return Math.ceil(value.length * 0.1);
  if (value instanceof Map || value instanceof Set) return Math.ceil(value.size * 0.1);
  return 0;
}

/**
 * Nodes whose own cost function (charges.ts, cost.ts) already accounts for
 * the size of their result: the meter does not charge it a second time.
 */
const precharged = new WeakSet<object>();

export function markPrecharged(node: object): void {
  precharged.add(node);
}

export function isPrecharged(node: object): boolean {
  return precharged.has(node);
}

/** Makes `meter` the active one; returns the previous one for exitMeter (always call it, in a finally). */
export function enterMeter(meter: Meter): Meter | undefined {
  const outer = active;
  active = meter;
  return outer;
}

export function exitMeter(outer: Meter | undefined): void {
  active = outer;
}

type Run = (this: unknown, ast: unknown, ctx: unknown) => unknown;
interface EvaluatorProto {
  run: Run;
}

let installed = false;
let capturing = false;
let captured: { evaluator: unknown; context: unknown } | undefined;

/**
 * Runs `fn` (an unmetered evaluation of an expression with at least one
 * child node) and returns the cel-js Evaluator instance and root context it
 * used: compiler.ts needs both (cel-js exports neither).
 */
export function captureEvaluator(fn: () => unknown): { evaluator: unknown; context: unknown } {
  capturing = true;
  captured = undefined;
  try {
    fn();
  } finally {
    capturing = false;
  }
  if (captured === undefined) throw new Error('cel-js internals changed: cannot capture the evaluator (Evaluator.run not called)');
  return captured;
}

/** Wraps `Evaluator.prototype.run` once. Idempotent. */
export function installMeter(): void {
  if (installed) return;
  let proto: EvaluatorProto | undefined;
  const probe = new Environment().registerFunction('__portalEvaluatorProbe(ast): bool', ({ args }: { args: unknown[] }) => ({
    firstArgument: args[0],
    typeCheck: (checker: { check: (n: unknown, c: unknown) => unknown }, macro: { firstArgument: unknown }, ctx: unknown) =>
      checker.check(macro.firstArgument, ctx),
    evaluate: (evaluator: object) => {
      proto = Object.getPrototypeOf(evaluator) as EvaluatorProto;
      return true;
    },
  }));
  probe.evaluate('__portalEvaluatorProbe(true)', {});
  if (proto === undefined || typeof proto.run !== 'function') {
    throw new Error('cel-js internals changed: cannot install the cost meter (Evaluator.run not found)');
  }
  const original = proto.run;
  proto.run = function meteredRun(ast, ctx) {
    const m = active;
    if (m === undefined) {
      if (capturing) captured = { evaluator: this, context: ctx };
      return original.call(this, ast, ctx);
    }
    if (++m.used > m.limit) throw new CostLimitExceeded(m);
    const out = original.call(this, ast, ctx);
    if ((typeof out === 'object' || typeof out === 'string') && !precharged.has(ast as object)) {
      const c = sizeCost(out);
      if (c > 0) {
        m.used += c;
        if (m.used > m.limit) throw new CostLimitExceeded(m);
      }
    }
    return out;
  };
  installed = true;
}
