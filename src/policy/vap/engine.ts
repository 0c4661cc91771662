/**
 * The seam between the VAP semantics (this directory) and the CEL engine
 * (src/policy/cel). The VAP code only needs: compile an expression once, and
 * run it against an activation under a cost budget. `cel-adapter.ts` binds
 * this to the project's engine; nothing else here knows which CEL library
 * runs underneath.
 */

/** What an expression can refer to (VAP's variables). */
export interface CompileEnv {
  /** Names of the policy's variables declared so far (a variable sees only earlier ones). */
  variables: readonly string[];
  /** Whether the policy has a paramKind (`params` is then declared; it is always null otherwise). */
  hasParams: boolean;
  /** `messageExpression` and `valueExpression` must give a string (valueExpression: or null). */
  resultType: 'bool' | 'string' | 'string-or-null' | 'any';
}

export type CompileOutcome<P> = { ok: true; program: P } | { ok: false; error: string };

/** The values an expression sees. */
export interface Activation {
  object: unknown;
  oldObject: unknown;
  request: unknown;
  params: unknown;
  namespaceObject: unknown;
  /** Lazily evaluated, cached per evaluation: `variables.NAME`. */
  variables: VariableResolver;
  /**
   * The engine's own state for this activation (its context, built on the
   * first run); undefined until then, and reset to undefined by the caller
   * when `request` or `params` change.
   */
  engineState: unknown;
}

export interface VariableResolver {
  /**
   * The value of the variable at `index` in names() (for a name declared
   * twice, the first), computing it (and charging its cost) on first use.
   * Throws the variable's error.
   */
  at(index: number): unknown;
  /** The policy's variable names, in order (the same array for every evaluation of a policy generation). */
  names(): readonly string[];
}

export type RunOutcome = { ok: true; value: unknown } | { ok: false; error: string; cost: boolean };

/** One request's budget, shared by every expression of one (policy, binding, param) evaluation. */
export interface CostBudget {
  /** Units left for the rest of this evaluation. */
  remaining: number;
}

/** A variable's outcome shared by the policies of one request (see CompiledPolicy.variableKeys), with the cost it took. */
export interface SharedValue {
  outcome: RunOutcome;
  cost: number;
}

/**
 * True when an evaluation with these inputs admits with nothing to report.
 * `sharedIds` (per variable, its slot in `shared`, -1: not shared) and
 * `shared` are undefined when the evaluation shares no variable (params).
 */
export type PassCheck = (
  object: unknown,
  oldObject: unknown,
  request: unknown,
  params: unknown,
  namespaceObject: unknown,
  sharedIds: readonly number[] | undefined,
  shared: (SharedValue | undefined)[] | undefined,
) => boolean;

export interface ExpressionEngine<P = unknown> {
  compile(expression: string, env: CompileEnv): CompileOutcome<P>;
  /** Runs a compiled expression; charges `budget` with what it used (capped per call by the engine's per-call limit). */
  run(program: P, activation: Activation, budget: CostBudget): RunOutcome;
  /** The estimated worst-case cost of a compiled expression, and why it runs on a fallback (for /debug/vars). */
  describe?(program: P): { estimatedCost: number; fallback?: string };
  /** A policy's pass check (pass-check.ts), when the engine can make one. */
  passCheck?(spec: { variables: readonly { name: string; program: P }[]; conditions: readonly P[] }): PassCheck;
}

/** kube's celconfig.PerCallLimit: one expression evaluation. */
export const PER_CALL_COST_LIMIT = 1_000_000;
/** kube's celconfig.RuntimeCELCostBudget: all expressions of one policy evaluation. */
export const RUNTIME_COST_BUDGET = 10_000_000;
