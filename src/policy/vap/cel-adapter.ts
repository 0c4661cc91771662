/**
 * Binds the VAP evaluator to Portal's CEL engine (src/policy/cel): compile
 * with the policy's declared variables, evaluate under the per-call limit and
 * the evaluation's shared budget. Variables are handed to the engine as an
 * object whose getters evaluate lazily (once per evaluation, see
 * evaluate.ts), so an expression that never reads a variable never pays for
 * it.
 *
 * Per request this costs one context object (the caller's evaluations of a
 * request share one activation): the `variables` object of a policy is built
 * once (per list of names, kept by this engine instance) and reads the
 * running evaluation's resolver from the engine's cell, and a boolean
 * result is a shared outcome object.
 */
import { celValuesOnly, classify, compile, PER_CALL_COST_LIMIT, type Program } from '../cel/index.ts';
import type { Activation, CompileEnv, CompileOutcome, CostBudget, ExpressionEngine, PassCheck, RunOutcome, VariableResolver } from './engine.ts';
import { passCheck } from './pass-check.ts';

interface VapProgram {
  program: Program;
  resultType: CompileEnv['resultType'];
}

/** kube's compile error format: `ERROR: <input>:LINE:COL: MESSAGE`. */
function compileMessage(message: string, line: number, column: number): string {
  return `ERROR: <input>:${line}:${column}: ${message}`;
}

/**
 * Where the variables objects of one engine find the evaluation running now.
 * One cell per engine, not a property of each variables object: every
 * getter then reads the same shape (a property per object made the read
 * megamorphic across policies).
 */
interface ResolverCell {
  resolver: VariableResolver | undefined;
}

type VariablesObject = Record<string, unknown>;

function variablesObject(names: readonly string[], cell: ResolverCell): VariablesObject {
  // No prototype: CEL sees only the declared names.
  const vars = Object.create(null) as VariablesObject;
  names.forEach((name, index) => {
    // A name declared twice reads the first (as the resolver's `at` says).
    if (Object.hasOwn(vars, name)) return;
    Object.defineProperty(vars, name, {
      enumerable: true,
      get() {
        return (cell.resolver as VariableResolver).at(index);
      },
    });
  });
  // Variables hold what expressions gave (the generated code's values): read as CEL values.
  return celValuesOnly(vars);
}

/** An activation's context, and the variable names its `variables` object is for. */
interface EngineState {
  context: Record<string, unknown>;
  names: readonly string[];
}

/** A policy's pass check on the generated functions of its expressions (pass-check.ts). */
function celPassCheck(spec: { variables: readonly { name: string; program: VapProgram }[]; conditions: readonly VapProgram[] }): PassCheck {
  // Variables hold what expressions gave: read as CEL values (as variablesObject's).
  const mark = (vars: Record<string, unknown>): Record<string, unknown> => celValuesOnly(vars);
  return passCheck({
    variables: spec.variables.map((v) => ({ name: v.name, exec: v.program.program.exec })),
    conditions: spec.conditions.map((c) => c.program.exec),
    texts: [...spec.variables.map((v) => v.program.program.expression), ...spec.conditions.map((c) => c.program.expression)],
    mark,
  });
}

const TRUE: RunOutcome = Object.freeze({ ok: true, value: true });
const FALSE: RunOutcome = Object.freeze({ ok: true, value: false });

export function celEngine(): ExpressionEngine<VapProgram> {
  // One variables object per policy (its names list is the compiled
  // policy's, stable), reused by its evaluations: evaluation is synchronous
  // and a policy's evaluation never starts another of the same policy.
  const variables = new WeakMap<readonly string[], VariablesObject>();
  const cell: ResolverCell = { resolver: undefined };
  const meters: { used: number; limit: number }[] = [];
  let depth = 0;
  const variablesFor = (names: readonly string[]): VariablesObject => {
    let vars = variables.get(names);
    if (vars === undefined) variables.set(names, (vars = variablesObject(names, cell)));
    return vars;
  };
  // One context per activation (the caller's evaluations of one request
  // share it); its variables object is switched when the policy changes.
  const stateOf = (activation: Activation): EngineState => {
    let state = activation.engineState as EngineState | undefined;
    const names = activation.variables.names();
    if (state === undefined) {
      // The objects as given: the generated code reads JSON as parsed (src/policy/cel/values-marks.ts).
      const context = {
        object: activation.object ?? null,
        oldObject: activation.oldObject ?? null,
        request: activation.request ?? null,
        params: activation.params ?? null,
        namespaceObject: activation.namespaceObject ?? null,
        variables: variablesFor(names),
      };
      activation.engineState = state = { context, names };
    } else if (state.names !== names) {
      state.context['variables'] = variablesFor(names);
      state.names = names;
    }
    // The variables objects are shared by every activation of this engine: point them at this one.
    cell.resolver = activation.variables;
    return state;
  };
  return {
    compile(expression: string, env: CompileEnv): CompileOutcome<VapProgram> {
      const resultType = env.resultType === 'bool' ? 'bool' : env.resultType === 'string' ? 'string' : 'any';
      const out = compile(expression, { variables: env.variables, resultType });
      if (!out.ok) return { ok: false, error: compileMessage(out.message, out.position.line, out.position.column) };
      return { ok: true, program: { program: out, resultType: env.resultType } };
    },
    describe(p: VapProgram): { estimatedCost: number; fallback?: string } {
      return { estimatedCost: p.program.estimatedCost, ...(p.program.fallback !== undefined ? { fallback: p.program.fallback } : {}) };
    },
    passCheck: celPassCheck,
    run(p: VapProgram, activation: Activation, budget: CostBudget): RunOutcome {
      const context = stateOf(activation).context;
      // A meter per nesting depth (a variable runs inside the expression
      // that reads it), reused: nothing keeps a meter past its run.
      const meter = (meters[depth] ??= { used: 0, limit: 0 });
      meter.used = 0;
      meter.limit = Math.min(PER_CALL_COST_LIMIT, budget.remaining);
      let value: unknown;
      let failure: unknown;
      depth++;
      try {
        value = p.program.exec(context, meter);
      } catch (e) {
        failure = e ?? new Error(String(e));
      }
      depth--;
      if (failure === undefined && typeof value === 'boolean' && meter.used <= meter.limit && p.resultType === 'bool') {
        budget.remaining = Math.max(0, budget.remaining - meter.used);
        return value ? TRUE : FALSE;
      }
      // A variable's value (resultType any) stays as the generated code gave it: other expressions read it.
      const r = classify(p.program, meter, budget, PER_CALL_COST_LIMIT, value, failure, p.resultType === 'any');
      if (!r.ok) return { ok: false, error: r.message, cost: r.kind === 'cost' };
      if (p.resultType === 'string-or-null' && r.value !== null && typeof r.value !== 'string') {
        return { ok: false, error: 'the expression must evaluate to a string or null', cost: false };
      }
      return { ok: true, value: r.value };
    },
  };
}
