/**
 * Binds the VAP evaluator to Portal's CEL engine (src/policy/cel): compile
 * with the policy's declared variables, evaluate under the per-call limit and
 * the evaluation's shared budget. Variables are handed to the engine as an
 * object whose getters evaluate lazily (once per evaluation, see
 * evaluate.ts), so an expression that never reads a variable never pays for
 * it.
 */
import { compile, evaluate, failureMessage, toCel, type Program } from '../cel/index.ts';
import type { Activation, CompileEnv, CompileOutcome, CostBudget, ExpressionEngine, RunOutcome } from './engine.ts';

interface VapProgram {
  program: Program;
  resultType: CompileEnv['resultType'];
}

/** kube's compile error format: `ERROR: <input>:LINE:COL: MESSAGE`. */
function compileMessage(message: string, line: number, column: number): string {
  return `ERROR: <input>:${line}:${column}: ${message}`;
}

function variablesObject(activation: Activation, names: readonly string[]): Record<string, unknown> {
  const vars = Object.create(null) as Record<string, unknown>;
  for (const name of names) {
    Object.defineProperty(vars, name, { enumerable: true, get: () => activation.variables.get(name) });
  }
  return vars;
}

function celContextOf(activation: Activation): Record<string, unknown> {
  return {
    object: toCel(activation.object),
    oldObject: toCel(activation.oldObject),
    request: toCel(activation.request),
    params: toCel(activation.params),
    namespaceObject: toCel(activation.namespaceObject),
    variables: variablesObject(activation, activation.variables.names()),
  };
}

export function celEngine(): ExpressionEngine<VapProgram> {
  // The CEL context of one activation (values converted once, the lazy
  // variables object) is built once and reused by every expression of the evaluation.
  const contexts = new WeakMap<Activation, Record<string, unknown>>();
  return {
    compile(expression: string, env: CompileEnv): CompileOutcome<VapProgram> {
      const resultType = env.resultType === 'bool' ? 'bool' : env.resultType === 'string' ? 'string' : 'any';
      const out = compile(expression, { variables: env.variables, resultType });
      if (!out.ok) return { ok: false, error: compileMessage(out.message, out.position.line, out.position.column) };
      return { ok: true, program: { program: out, resultType: env.resultType } };
    },
    run(p: VapProgram, activation: Activation, budget: CostBudget): RunOutcome {
      let context = contexts.get(activation);
      if (context === undefined) {
        try {
          context = celContextOf(activation);
        } catch (e) {
          // Converting walks the objects: one nested too deeply is an error of the expression.
          return { ok: false, error: failureMessage(e), cost: false };
        }
        contexts.set(activation, context);
      }
      const r = evaluate(p.program, context, budget, undefined, true);
      if (!r.ok) return { ok: false, error: r.message, cost: r.kind === 'cost' };
      if (p.resultType === 'string-or-null' && r.value !== null && typeof r.value !== 'string') {
        return { ok: false, error: 'the expression must evaluate to a string or null', cost: false };
      }
      return { ok: true, value: r.value };
    },
  };
}
