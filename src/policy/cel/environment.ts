/**
 * The two cel-js environments of Portal's CEL, built once when the module
 * loads and never changed afterwards (architecture test: the one sanctioned
 * module-level object of src/policy/cel that cel-js itself mutates while it
 * is configured):
 * - `env`: Kubernetes' CEL (the activation variables, all `dyn`, optional
 *   types, the Kubernetes libraries); every expression is parsed and
 *   checked in it (engine.ts);
 * - `delegateEnv`: the same with the operands of a delegated operation
 *   declared as `dyn` variables `__a0`…: the runtime (runtime.ts) hands an
 *   operation it has no fast path for to cel-js as `__a0 + __a1`.
 *
 * Pure: no I/O.
 */
import { Environment, type ParseResult } from '@marcbachmann/cel-js';
import { registerLibraries } from './lib/index.ts';

/** The variables an expression may name (plus `authorizer`, which Portal refuses). */
export const ACTIVATION_VARIABLES = ['object', 'oldObject', 'request', 'params', 'namespaceObject', 'variables'] as const;
export type ActivationVariable = (typeof ACTIVATION_VARIABLES)[number];

/** The most operands a delegated operation has (cel-js's maxCallArguments, plus a receiver). */
export const MAX_OPERANDS = 34;
/** The names the operands of a delegated operation have (dyn variables of the delegate environment). */
export const operandName = (i: number): string => `__a${i}`;

function build(): Environment {
  const e = new Environment({
    unlistedVariablesAreDyn: false,
    enableOptionalTypes: true,
    // Kubernetes' CEL accepts mixed literals such as [1, 'a'] as list(dyn).
    homogeneousAggregateLiterals: false,
    limits: { maxAstNodes: 10_000, maxDepth: 100, maxListElements: 1_000, maxMapEntries: 1_000, maxCallArguments: 32 },
  });
  // All dyn: a typed declaration makes cel-js check the value's type on every
  // read, which for `variables` (a map of lazily computed values) meant a deep
  // type walk of every variable at each reference.
  for (const v of ACTIVATION_VARIABLES) e.registerVariable(v, 'dyn');
  registerLibraries(e);
  return e;
}

/** Portal's CEL environment. */
export const env: Environment = build();

const delegateEnv: Environment = (() => {
  const e = env.clone();
  for (let i = 0; i < MAX_OPERANDS; i++) e.registerVariable(operandName(i), 'dyn');
  return e;
})();

/** Parses and checks a delegated operation (`__a0 + __a1`); throws when cel-js refuses it. */
export function parseDelegate(source: string): ParseResult {
  const p = delegateEnv.parse(source);
  const checked = p.check();
  if (!checked.valid) throw checked.error ?? new Error(`cannot delegate ${source}`);
  return p;
}
