/**
 * Evaluation problems of ValidatingAdmissionPolicies on the cluster (issue 12
 * item 5): an expression that does not compile in Portal's engine, an
 * evaluation error (unknown variable, type error, no such key), a missing
 * param, a cost overrun.
 *
 * Every replica notes them while it audits ({@link VapProblems.note}) and
 * counts them in `portal_vap_evaluation_errors_total{policy,reason}`; the
 * Warning Events on the policy are the replica's {@link ProblemEvents} (one
 * per problem and policy generation, written by the leader only). A problem's
 * discriminator is its binding and expression field.
 */
import { Counter, type Registry } from 'prom-client';
import type { BindingEvaluation, PolicyCompileError, ValidatingAdmissionPolicy } from '../policy/vap/index.ts';
import type { ProblemEvents } from './problem-events.ts';

export type VapProblemReason = 'CompileError' | 'EvaluationError' | 'ParamNotFound' | 'CostExceeded';

export interface VapProblem {
  reason: VapProblemReason;
  /** The binding it showed under ('' for a compile error: it is the policy's). */
  binding: string;
  /** The expression's field, e.g. `spec.validations[0].expression`, when known. */
  field: string | undefined;
  message: string;
}

/** The problems of one policy's binding evaluations (a compile-error policy's errors are its compile errors, reported apart). */
export function problemsOf(evaluations: readonly BindingEvaluation[], compileErrored: (policy: string) => boolean): { policy: string; problem: VapProblem }[] {
  const out: { policy: string; problem: VapProblem }[] = [];
  for (const e of evaluations) {
    if (e.result !== 'error') continue;
    const at = (problem: VapProblem): void => void out.push({ policy: e.policy, problem });
    if (compileErrored(e.policy)) {
      // Each evaluation of an expression that did not compile errors; count it, the Event is the compile error's.
      at({ reason: 'CompileError', binding: e.binding, field: undefined, message: '' });
      continue;
    }
    const params = e.problems.find((p) => p.kind === 'params');
    if (params) {
      at({ reason: 'ParamNotFound', binding: e.binding, field: undefined, message: params.message });
      continue;
    }
    const cost = e.problems.find((p) => p.kind === 'cost');
    if (cost) {
      at({ reason: 'CostExceeded', binding: e.binding, field: cost.field, message: cost.message });
      continue;
    }
    const failure = e.failures.find((f) => f.error);
    const message = failure?.message ?? e.denyErrors[0] ?? e.ignoredErrors[0] ?? 'evaluation error';
    const field = failure?.expressionIndex !== undefined ? `spec.validations[${failure.expressionIndex}].expression` : failure ? 'spec.matchConditions' : undefined;
    at({ reason: 'EvaluationError', binding: e.binding, field, message });
  }
  return out;
}

export function compileProblems(errors: readonly PolicyCompileError[]): VapProblem[] {
  return errors.map((e) => ({ reason: 'CompileError', binding: '', field: e.field, message: e.error }));
}

/** `policy X[, binding Y], spec.validations[0].expression: why` (ProblemEvents cuts it to 1 KiB). */
export function eventMessage(policy: string, p: VapProblem): string {
  const where = [`ValidatingAdmissionPolicy ${policy}`, ...(p.binding ? [`binding ${p.binding}`] : []), ...(p.field ? [p.field] : [])].join(', ');
  return `${where}: ${p.message}`;
}

/** Counts VAP problems and hands new ones to the replica's Event writer. */
export class VapProblems {
  readonly #events: ProblemEvents;
  readonly #errors: Counter<'policy' | 'reason'>;

  constructor(deps: { events: ProblemEvents; registry: Registry }) {
    this.#events = deps.events;
    this.#errors = new Counter({
      name: 'portal_vap_evaluation_errors_total',
      help: 'Evaluation problems of ValidatingAdmissionPolicies in the audit, by policy and reason (CompileError, EvaluationError, ParamNotFound, CostExceeded): one per erroring evaluation, and one per compile error when a policy generation is loaded.',
      labelNames: ['policy', 'reason'],
      registers: [deps.registry],
    });
  }

  /** Called on every replica: counts the problem and, when it is new for this policy generation, queues its Event. */
  note(policy: ValidatingAdmissionPolicy | undefined, problem: VapProblem, policyName = policy?.metadata.name ?? ''): void {
    this.#errors.inc({ policy: policyName, reason: problem.reason });
    // A compile error's per-evaluation count carries no message: its Event comes from the policy's compile errors.
    if (!policy?.metadata.uid || problem.message === '') return;
    this.#events.note(
      {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicy',
        name: policy.metadata.name,
        uid: policy.metadata.uid,
        generation: policy.metadata.generation ?? 0,
      },
      { reason: problem.reason, discriminator: [problem.binding, problem.field ?? ''], message: eventMessage(policy.metadata.name, problem) },
    );
  }
}
