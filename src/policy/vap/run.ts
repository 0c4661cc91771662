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
  type VariableResolver,
} from './engine.ts';
import type { BindingEvaluation, CompiledExpression, CompiledPolicy } from './compiled.ts';

/** kube's limits on one message and on an audit annotation's value. */
const MAX_MESSAGE_LENGTH = 5 * 1024;
const MAX_AUDIT_VALUE_LENGTH = 10 * 1024;
export const COST_BUDGET_MESSAGE = 'validation failed due to running out of cost budget, no further validation rules will be run';

/**
 * One (policy, binding, param) evaluation: its budget, its activation and
 * its variables, each computed on first read and kept (the Run is the
 * activation's VariableResolver: no closure per evaluation).
 */
class Run<P> implements VariableResolver {
  readonly budget: CostBudget = { remaining: RUNTIME_COST_BUDGET };
  private readonly slots: (RunOutcome | undefined)[] = [];
  readonly activation: Activation;
  budgetExceeded = false;
  /** Fields of the expressions that ran out of cost. */
  costFields: string[] | undefined;

  constructor(
    private readonly c: CompiledPolicy<P>,
    private readonly engine: ExpressionEngine<P>,
    /** Variable values shared by the policies of this request (params null only), by CompiledPolicy.variableKeys. */
    private readonly shared: Map<string, { value: unknown; cost: number }> | undefined,
    base: Omit<Activation, 'variables' | 'engineState'>,
  ) {
    this.activation = {
      object: base.object,
      oldObject: base.oldObject,
      request: base.request,
      params: base.params,
      namespaceObject: base.namespaceObject,
      variables: this,
      engineState: undefined,
    };
  }

  names(): readonly string[] {
    return this.c.variableNames;
  }

  get(name: string): unknown {
    const index = this.c.variableIndex.get(name);
    if (index === undefined) throw new Error(`no such key: ${name}`);
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
    const key = this.shared === undefined ? undefined : this.c.variableKeys[index];
    if (key === undefined) return this.exec(e);
    const known = this.shared?.get(key);
    if (known !== undefined && !this.budgetExceeded && this.budget.remaining >= known.cost) {
      this.budget.remaining -= known.cost;
      return { ok: true, value: known.value };
    }
    const before = this.budget.remaining;
    const out = this.exec(e);
    if (out.ok) this.shared?.set(key, { value: out.value, cost: before - this.budget.remaining });
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

function validationMessage<P>(run: Run<P>, v: CompiledPolicy<P>['validations'][number]): string {
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

/** One policy × binding × param: matchConditions, validations, auditAnnotations. */
export function evaluateWithParam<P>(
  c: CompiledPolicy<P>,
  engine: ExpressionEngine<P>,
  shared: Map<string, { value: unknown; cost: number }> | undefined,
  base: Omit<Activation, 'variables' | 'engineState'>,
  out: BindingEvaluation,
): void {
  const run = new Run(c, engine, base.params === null ? shared : undefined, base);
  try {
    evaluateRun(c, run, out);
  } finally {
    if (run.costFields !== undefined) {
      for (const field of new Set(run.costFields)) out.problems.push({ kind: 'cost', field, message: `${field}: the expression exceeded its CEL cost limit` });
    }
  }
}

/** An evaluation error: a failure under failurePolicy Fail, dropped (and kept in ignoredErrors) under Ignore. */
function onError(c: CompiledPolicy<unknown>, out: BindingEvaluation, message: string, expressionIndex: number | undefined): void {
  out.result = 'error';
  if (c.failurePolicy === 'Ignore') out.ignoredErrors.push(message);
  else out.failures.push({ message, reason: undefined, expressionIndex, error: true });
}

function evaluateRun<P>(c: CompiledPolicy<P>, run: Run<P>, out: BindingEvaluation): void {
  const ignore = c.failurePolicy === 'Ignore';
  // matchConditions: a false one skips the policy even when another errored.
  let errors: string[] | undefined;
  for (const m of c.matchConditions) {
    const r = run.exec(m);
    if (!r.ok) (errors ??= []).push(r.error);
    else if (r.value !== true) {
      if (r.value === false) {
        out.result = out.result === 'pass' ? 'skip' : out.result;
        out.skipReason = `matchCondition '${m.name}' is false`;
        return;
      }
      (errors ??= []).push(`matchCondition '${m.name}' did not evaluate to a bool`);
    }
  }
  if (errors !== undefined) {
    onError(c, out, errors.join(', '), undefined);
    return;
  }

  // A loop, not forEach: this runs for every policy of every request.
  for (let i = 0; i < c.validations.length; i++) {
    const v = c.validations[i] as CompiledPolicy<P>['validations'][number];
    const r = run.exec(v.expression);
    if (!r.ok) {
      onError(c, out, r.error, i);
      continue;
    }
    if (r.value === true) continue;
    if (r.value !== false) {
      onError(c, out, `expression '${v.expression.expression}' resulted in a non-bool value`, i);
      continue;
    }
    if (out.result !== 'error') out.result = 'fail';
    out.failures.push({ message: validationMessage(run, v), reason: v.reason, expressionIndex: i, error: false });
  }

  for (const a of c.auditAnnotations) {
    const r = run.exec(a.value);
    const key = `${c.policy.metadata.name}/${a.key}`;
    let error: string | undefined;
    if (!r.ok) error = r.error;
    else if (r.value === null) continue;
    else if (typeof r.value !== 'string') {
      error = `valueExpression '${a.value.expression}' resulted in unsupported return type. Return type must be either string or null.`;
    } else {
      const value = r.value.trim();
      if (value === '') continue;
      if (value.length > MAX_AUDIT_VALUE_LENGTH) error = `valueExpression '${a.value.expression}' resulted in value that exceeds the maximum length of ${MAX_AUDIT_VALUE_LENGTH}`;
      else out.auditAnnotations[key] = value;
    }
    if (error !== undefined) {
      out.result = 'error';
      if (ignore) out.ignoredErrors.push(error);
      else out.denyErrors.push(error);
    }
  }
}

