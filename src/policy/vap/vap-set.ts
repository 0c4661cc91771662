/**
 * The VAPs and bindings one evaluator knows, compiled once per policy
 * generation (a policy object whose generation / resourceVersion did not
 * change is not recompiled). Shared by the embedded API server, `portal
 * test` and the audit.
 */
import { ChangeFeed, type Replicated } from '../replicated.ts';
import { celEngine } from './cel-adapter.ts';
import type { ExpressionEngine } from './engine.ts';
import { compileErrors, compilePolicy, expressionCosts, type BindingEvaluation, type CompiledPolicy, type ExpressionCost, type PolicyCompileError } from './compiled.ts';
import { evaluatePolicies, plan, type Plan, type EvaluateOptions } from './evaluate.ts';
import type { ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, VapAttributes, VapContext } from './types.ts';

function version(o: { metadata: { generation?: number; resourceVersion?: string } }): string {
  return `${o.metadata.generation ?? ''}/${o.metadata.resourceVersion ?? ''}`;
}

/** A change of a VapSet, as worker threads replay it (../replicated.ts). */
export type VapSetChange =
  | { op: 'upsertPolicy'; policy: ValidatingAdmissionPolicy }
  | { op: 'deletePolicy'; name: string }
  | { op: 'upsertBinding'; binding: ValidatingAdmissionPolicyBinding }
  | { op: 'deleteBinding'; name: string };

export class VapSet implements Replicated<VapSetChange> {
  private readonly feed = new ChangeFeed<VapSetChange>();
  private readonly policies = new Map<string, { version: string; source: ValidatingAdmissionPolicy; compiled: CompiledPolicy<unknown> }>();
  private readonly bindings = new Map<string, ValidatingAdmissionPolicyBinding>();
  private readonly engine: ExpressionEngine<unknown>;
  /** What evaluate() hands the evaluator, rebuilt only after a change. */
  private compiled: Plan<unknown> | undefined;

  constructor(engine: ExpressionEngine<unknown> = celEngine() as ExpressionEngine<unknown>) {
    this.engine = engine;
  }

  /** Adds or replaces a policy; returns its compile errors (each one an evaluation error at run time). */
  upsertPolicy(policy: ValidatingAdmissionPolicy): PolicyCompileError[] {
    const name = policy.metadata.name;
    const v = version(policy);
    const known = this.policies.get(name);
    if (known && known.source === policy) return compileErrors(known.compiled);
    if (known && v !== '/' && known.version === v) return compileErrors(known.compiled);
    const compiled = compilePolicy(policy, this.engine);
    this.policies.set(name, { version: v, source: policy, compiled });
    this.compiled = undefined;
    this.feed.emit({ op: 'upsertPolicy', policy });
    return compileErrors(compiled);
  }

  deletePolicy(name: string): void {
    if (!this.policies.delete(name)) return;
    this.compiled = undefined;
    this.feed.emit({ op: 'deletePolicy', name });
  }

  upsertBinding(binding: ValidatingAdmissionPolicyBinding): void {
    const known = this.bindings.get(binding.metadata.name);
    if (known === binding || (known && binding.metadata.resourceVersion !== undefined && known.metadata.resourceVersion === binding.metadata.resourceVersion)) return;
    this.bindings.set(binding.metadata.name, binding);
    this.compiled = undefined;
    this.feed.emit({ op: 'upsertBinding', binding });
  }

  deleteBinding(name: string): void {
    if (!this.bindings.delete(name)) return;
    this.compiled = undefined;
    this.feed.emit({ op: 'deleteBinding', name });
  }

  onChange(listener: (change: VapSetChange) => void): () => void {
    return this.feed.subscribe(listener);
  }

  snapshot(): VapSetChange[] {
    return [
      ...[...this.policies.values()].map((p): VapSetChange => ({ op: 'upsertPolicy', policy: p.source })),
      ...[...this.bindings.values()].map((binding): VapSetChange => ({ op: 'upsertBinding', binding })),
    ];
  }

  apply(change: VapSetChange): void {
    switch (change.op) {
      case 'upsertPolicy':
        this.upsertPolicy(change.policy);
        return;
      case 'deletePolicy':
        this.deletePolicy(change.name);
        return;
      case 'upsertBinding':
        this.upsertBinding(change.binding);
        return;
      case 'deleteBinding':
        this.deleteBinding(change.name);
        return;
    }
  }

  get size(): { policies: number; bindings: number } {
    return { policies: this.policies.size, bindings: this.bindings.size };
  }

  /**
   * Per policy: each expression's estimated worst-case cost and whether it
   * runs as generated JavaScript (`fallback`: why not), for /debug/vars, so
   * an operator sees the expensive policies before they run.
   */
  expressionCosts(): { policy: string; expressions: ExpressionCost[] }[] {
    return [...this.policies.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([policy, p]) => ({ policy, expressions: expressionCosts(p.compiled, this.engine) }));
  }

  policyNames(): string[] {
    return [...this.policies.keys()].sort();
  }

  evaluate(a: VapAttributes, ctx: VapContext, opts: EvaluateOptions = {}): BindingEvaluation[] {
    this.compiled ??= plan(
      [...this.policies.values()].map((p) => p.compiled),
      [...this.bindings.values()],
    );
    return evaluatePolicies(this.compiled, a, ctx, this.engine, opts);
  }
}
