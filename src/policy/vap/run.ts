/**
 * One (policy, binding, param) evaluation, as kube-apiserver's validator
 * runs it: matchConditions (a false one skips, even when another erred),
 * validations with their messages, auditAnnotations; every error handled
 * by the policy's failurePolicy; one cost budget for the whole evaluation.
 *
 * Pure: no I/O.
 */
import {
  RUNTIME_COST_BUDGET,
  type Activation,
  type CostBudget,
  type ExpressionEngine,
  type RunOutcome,
  type SharedValue,
  type VariableResolver,
} from './engine.ts';
import type { BindingEvaluation, CompiledExpression, CompiledPolicy } from './compiled.ts';

/** kube's limits on one message and on an audit annotation's value. */
const MAX_MESSAGE_LENGTH = 5 * 1024;
const MAX_AUDIT_VALUE_LENGTH = 10 * 1024;
export const COST_BUDGET_MESSAGE = 'validation failed due to running out of cost budget, no further validation rules will be run';

/** The base of every evaluation of one request. */
export interface RequestInput {
  object: unknown;
  oldObject: unknown;
  namespaceObject: unknown;
}

/**
 * The evaluations of one request: one activation (the engine builds its
 * context once, not per policy), reset for each (policy, binding, param)
 * evaluation: its budget, its variables (each computed on first read and
 * kept; the Evaluation is the activation's VariableResolver), and its
 * result, built only when something is to be reported: a policy that
 * admits the request returns its binding's shared pass result and
 * allocates nothing of its own.
 */
export class Evaluation<P> implements VariableResolver {
  readonly budget: CostBudget = { remaining: RUNTIME_COST_BUDGET };
  private readonly slots: (RunOutcome | undefined)[] = [];
  readonly activation: Activation;
  budgetExceeded = false;
  /** Fields of the expressions that ran out of cost. */
  costFields: string[] | undefined;
  c!: CompiledPolicy<P>;
  /** c.variableNames (or an equal array: see PlannedPolicy.names). */
  private variableNames: readonly string[] = [];
  /** Per variable index, its slot in `shared` (-1: not shared); undefined when this evaluation shares nothing. */
  private sharedIds: readonly number[] | undefined;
  private shared: (SharedValue | undefined)[] | undefined;
  private template!: BindingEvaluation;
  private out: BindingEvaluation | undefined;

  constructor(
    private readonly engine: ExpressionEngine<P>,
    base: RequestInput,
  ) {
    this.activation = {
      object: base.object,
      oldObject: base.oldObject,
      request: undefined,
      params: undefined,
      namespaceObject: base.namespaceObject,
      variables: this,
      engineState: undefined,
    };
  }

  /**
   * One (policy, binding, param) evaluation. `template` is its result when
   * nothing is reported (shared: never written); `shared` holds the
   * variable values of the policies evaluated on the same `request` object
   * with params null (`sharedIds` maps the policy's variables to it).
   */
  evaluate(
    c: CompiledPolicy<P>,
    names: readonly string[],
    request: unknown,
    params: unknown,
    template: BindingEvaluation,
    sharedIds: readonly number[] | undefined,
    shared: (SharedValue | undefined)[] | undefined,
  ): BindingEvaluation {
    const act = this.activation;
    // The engine's context holds request and params: a new one when they change.
    if (act.request !== request || act.params !== params) {
      act.request = request;
      act.params = params;
      act.engineState = undefined;
    }
    this.c = c;
    this.variableNames = names;
    this.budget.remaining = RUNTIME_COST_BUDGET;
    this.budgetExceeded = false;
    this.costFields = undefined;
    // Cleared by index (setting `length` reallocates): a policy has few variables.
    for (let i = 0; i < c.variables.length; i++) this.slots[i] = undefined;
    this.sharedIds = params === null ? sharedIds : undefined;
    this.shared = shared;
    this.template = template;
    this.out = undefined;
    // Without try/finally: evaluateRun reports errors as results, and a throw loses the whole call's results anyway.
    evaluateRun(c, this);
    const costFields = this.costFields;
    if (costFields !== undefined) {
      const out = this.result();
      for (const field of new Set<string>(costFields)) out.problems.push({ kind: 'cost', field, message: `${field}: the expression exceeded its CEL cost limit` });
    }
    return this.out ?? template;
  }

  /** The result of this evaluation, to write into (a copy of the template, made on the first write). */
  result(): BindingEvaluation {
    if (this.out === undefined) {
      const t = this.template;
      this.out = {
        policy: t.policy,
        binding: t.binding,
        param: t.param,
        actions: t.actions,
        result: t.result,
        failures: [],
        denyErrors: [],
        ignoredErrors: [],
        auditAnnotations: {},
        problems: [],
      };
    }
    return this.out;
  }

  names(): readonly string[] {
    return this.variableNames;
  }

  at(index: number): unknown {
    let hit = this.slots[index];
    if (hit === undefined) {
      hit = this.variable(index);
      this.slots[index] = hit;
    }
    if (!hit.ok) throw new Error(hit.error);
    return hit.value;
  }

  /**
   * A variable's outcome: computed, or taken from another policy of the
   * request that computed the same variable (charged the cost it took, as if
   * computed again; when the budget cannot pay it, computed again so a cost
   * error is reported as it would be).
   */
  private variable(index: number): RunOutcome {
    const e = this.c.variables[index] as CompiledExpression<P>;
    const id = this.sharedIds === undefined ? -1 : (this.sharedIds[index] ?? -1);
    if (id < 0 || this.shared === undefined) return this.exec(e);
    const known = this.shared[id];
    if (known !== undefined && !this.budgetExceeded && this.budget.remaining >= known.cost) {
      this.budget.remaining -= known.cost;
      return known.outcome;
    }
    const before = this.budget.remaining;
    const out = this.exec(e);
    if (out.ok) this.shared[id] = { outcome: out, cost: before - this.budget.remaining };
    return out;
  }

  exec(e: CompiledExpression<P>): RunOutcome {
    if (!e.compiled.ok) return { ok: false, error: `compilation failed: ${e.compiled.error}`, cost: false };
    if (this.budgetExceeded) return { ok: false, error: COST_BUDGET_MESSAGE, cost: true };
    let out: RunOutcome;
    try {
      out = this.engine.run(e.compiled.program, this.activation, this.budget);
    } catch (err) {
      // Engines report failures as outcomes; a throw (a hostile object that
      // breaks them) is still an error of this expression, never an escape.
      return { ok: false, error: `expression '${e.expression}' resulted in error: ${err instanceof Error ? err.message : String(err)}`, cost: false };
    }
    if (!out.ok) {
      if (out.cost) (this.costFields ??= []).push(e.field);
      if (out.cost && this.budget.remaining <= 0) {
        this.budgetExceeded = true;
        return { ok: false, error: COST_BUDGET_MESSAGE, cost: true };
      }
      return { ok: false, error: `expression '${e.expression}' resulted in error: ${out.error}`, cost: out.cost };
    }
    return out;
  }
}

function validationMessage<P>(run: Evaluation<P>, v: CompiledPolicy<P>['validations'][number]): string {
  if (v.messageExpression) {
    const out = run.exec(v.messageExpression);
    if (out.ok && typeof out.value === 'string') {
      const m = out.value.trim();
      // Upstream falls back to the static message for an empty, multi-line or oversized result.
      if (m !== '' && !/[\r\n]/.test(m) && m.length <= MAX_MESSAGE_LENGTH) return m;
    }
  }
  if (v.message !== undefined && v.message !== '') return v.message;
  return `failed expression: ${v.expression.expression.trim()}`;
}

/**
 * An error that denies whatever the validationActions (a configuration
 * error, a deadline, an audit annotation): the result is `error`, the
 * message in denyErrors under failurePolicy Fail, in ignoredErrors under
 * Ignore. Returns `r`.
 */
export function erred<P>(r: BindingEvaluation, c: CompiledPolicy<P>, message: string): BindingEvaluation {
  r.result = 'error';
  if (c.failurePolicy === 'Ignore') r.ignoredErrors.push(message);
  else r.denyErrors.push(message);
  return r;
}

/** An evaluation error: a failure under failurePolicy Fail, dropped (and kept in ignoredErrors) under Ignore. */
function onError<P>(c: CompiledPolicy<P>, run: Evaluation<P>, message: string, expressionIndex: number | undefined): void {
  const out = run.result();
  out.result = 'error';
  if (c.failurePolicy === 'Ignore') out.ignoredErrors.push(message);
  else out.failures.push({ message, reason: undefined, expressionIndex, error: true });
}

function evaluateRun<P>(c: CompiledPolicy<P>, run: Evaluation<P>): void {
  // matchConditions: a false one skips the policy even when another errored.
  let errors: string[] | undefined;
  for (const m of c.matchConditions) {
    const r = run.exec(m);
    if (!r.ok) (errors ??= []).push(r.error);
    else if (r.value !== true) {
      if (r.value === false) {
        const out = run.result();
        out.result = out.result === 'pass' ? 'skip' : out.result;
        out.skipReason = `matchCondition '${m.name}' is false`;
        return;
      }
      (errors ??= []).push(`matchCondition '${m.name}' did not evaluate to a bool`);
    }
  }
  if (errors !== undefined) {
    onError(c, run, errors.join(', '), undefined);
    return;
  }

  // A loop, not forEach: this runs for every policy of every request.
  for (let i = 0; i < c.validations.length; i++) {
    const v = c.validations[i] as CompiledPolicy<P>['validations'][number];
    const r = run.exec(v.expression);
    if (!r.ok) {
      onError(c, run, r.error, i);
      continue;
    }
    if (r.value === true) continue;
    if (r.value !== false) {
      onError(c, run, `expression '${v.expression.expression}' resulted in a non-bool value`, i);
      continue;
    }
    const out = run.result();
    if (out.result !== 'error') out.result = 'fail';
    out.failures.push({ message: validationMessage(run, v), reason: v.reason, expressionIndex: i, error: false });
  }

  for (const a of c.auditAnnotations) {
    const r = run.exec(a.value);
    let error: string | undefined;
    if (!r.ok) error = r.error;
    else if (r.value === null) continue;
    else if (typeof r.value !== 'string') {
      error = `valueExpression '${a.value.expression}' resulted in unsupported return type. Return type must be either string or null.`;
    } else {
      const value = r.value.trim();
      if (value === '') continue;
      if (value.length > MAX_AUDIT_VALUE_LENGTH) error = `valueExpression '${a.value.expression}' resulted in value that exceeds the maximum length of ${MAX_AUDIT_VALUE_LENGTH}`;
      else run.result().auditAnnotations[`${c.policy.metadata.name}/${a.key}`] = value;
    }
    if (error !== undefined) erred(run.result(), c, error);
  }
}

