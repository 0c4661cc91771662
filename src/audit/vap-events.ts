/**
 * Evaluation problems of ValidatingAdmissionPolicies on the cluster (issue 12
 * item 5): an expression that does not compile in Portal's engine, an
 * evaluation error (unknown variable, type error, no such key), a missing
 * param, a cost overrun.
 *
 * Every replica notes them while it audits ({@link VapProblemEvents.note}) and
 * counts them in `portal_vap_evaluation_errors_total{policy,reason}`; only the
 * leader writes them, as Warning Events on the policy, through the replica's
 * one FencedWriter under its term (this is a leader-only Runnable).
 *
 * One Event per problem and policy generation: the problem's key
 * (policy uid, generation, reason, binding, expression field) names the Event
 * deterministically, so a second create — by this leader after a restart of
 * the audit, or by the next leader, whose follower time noted the same
 * problems — answers 409 and writes nothing. A new generation of the policy
 * is a new key, so an edited policy that still fails is reported again.
 * The queue and the fenced, deduplicated writes are leader-events.ts.
 */
import { createHash } from 'node:crypto';
import type { CoreV1Event } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import type { LeaderTerm } from '../leader/term.ts';
import type { Runnable } from '../manager/runnable.ts';
import { ErrorCode, PortalError } from '../observability/errors.ts';
import type { BindingEvaluation, PolicyCompileError, ValidatingAdmissionPolicy } from '../policy/vap/index.ts';
import { LeaderEvents } from './leader-events.ts';

export type VapProblemReason = 'CompileError' | 'EvaluationError' | 'ParamNotFound' | 'CostExceeded';

export interface VapProblem {
  reason: VapProblemReason;
  /** The binding it showed under ('' for a compile error: it is the policy's). */
  binding: string;
  /** The expression's field, e.g. `spec.validations[0].expression`, when known. */
  field: string | undefined;
  message: string;
}

export const VAP_EVENT_CONTROLLER = 'portal.dev/audit';
/**
 * A problem already recorded is tried again after this long: kube-apiserver
 * deletes Events after its --event-ttl (1h by default), so a problem that
 * persists gets its Event back; while the Event exists the create is a 409.
 */
const RECHECK_MS_DEFAULT = 30 * 60_000;
/** Event messages are capped by the API server at 1 KiB (as client-go truncates them). */
const MAX_MESSAGE = 1024;

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

/** `policy X[, binding Y], spec.validations[0].expression: why` */
export function eventMessage(policy: string, p: VapProblem): string {
  const where = [`ValidatingAdmissionPolicy ${policy}`, ...(p.binding ? [`binding ${p.binding}`] : []), ...(p.field ? [p.field] : [])].join(', ');
  const text = `${where}: ${p.message}`;
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE - 3)}...` : text;
}

export class VapProblemEvents implements Runnable {
  readonly name = 'vap-events';
  readonly #log: Logger;
  readonly #identity: string;
  readonly #recheckMs: number;
  /**
   * Where the Events are written: Portal's install namespace, where its Role
   * already lets it create Events (client-go would use `default` for a
   * cluster-scoped object; `kubectl describe` of the policy and
   * `kubectl get events -A` find them in any namespace).
   */
  readonly namespace: string;
  readonly #errors: Counter<'policy' | 'reason'>;
  readonly #events: LeaderEvents;
  /** Keys written (or found written by an earlier leader): never again for this generation. */
  readonly #done = new Map<string, number>();

  constructor(deps: { writer: FencedWriter; logger: Logger; registry: Registry; identity: string; namespace: string; recheckMs?: number }) {
    this.#recheckMs = deps.recheckMs ?? RECHECK_MS_DEFAULT;
    this.namespace = deps.namespace;
    this.#log = deps.logger.child({ subcomponent: 'vap-events' });
    this.#identity = deps.identity;
    this.#events = new LeaderEvents({ writer: deps.writer, logger: this.#log, onRecorded: (key) => this.#done.set(key, Date.now()) });
    this.#errors = new Counter({
      name: 'portal_vap_evaluation_errors_total',
      help: 'Evaluation problems of ValidatingAdmissionPolicies in the audit, by policy and reason (CompileError, EvaluationError, ParamNotFound, CostExceeded): one per erroring evaluation, and one per compile error when a policy generation is loaded.',
      labelNames: ['policy', 'reason'],
      registers: [deps.registry],
    });
  }

  /** Events created by this replica (for tests and /debug/vars). */
  get written(): number {
    return this.#events.written;
  }

  needLeaderElection(): boolean {
    return true;
  }

  /** Called on every replica: counts the problem and, when it is new for this policy generation, queues its Event. */
  note(policy: ValidatingAdmissionPolicy | undefined, problem: VapProblem, policyName = policy?.metadata.name ?? ''): void {
    this.#errors.inc({ policy: policyName, reason: problem.reason });
    // A compile error's per-evaluation count carries no message: its Event comes from the policy's compile errors.
    if (!policy?.metadata.uid || problem.message === '') return;
    const generation = policy.metadata.generation ?? 0;
    const key = createHash('sha256').update(JSON.stringify([policy.metadata.uid, generation, problem.reason, problem.binding, problem.field ?? ''])).digest('hex').slice(0, 20);
    const recorded = this.#done.get(key);
    if ((recorded !== undefined && Date.now() - recorded < this.#recheckMs) || this.#events.has(key)) return;
    this.#events.enqueue({ key, namespace: this.namespace, body: this.#event(key, { name: policy.metadata.name, uid: policy.metadata.uid }, problem) });
  }

  /** Writes the queued Events under `term` until the term ends. */
  async start(signal: AbortSignal, term?: LeaderTerm): Promise<void> {
    if (!term) throw new PortalError(ErrorCode.Internal, 'the VAP event writer runs only with a leader term (add it to the Manager as leader-only)');
    await this.#events.run(signal, term);
  }

  #event(key: string, policy: { name: string; uid: string }, problem: VapProblem): CoreV1Event {
    const now = new Date();
    return {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: `${policy.name.slice(0, 200)}.${key}`, namespace: this.namespace },
      involvedObject: { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicy', name: policy.name, uid: policy.uid },
      reason: problem.reason,
      message: eventMessage(policy.name, problem),
      type: 'Warning',
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component: 'portal' },
      reportingComponent: VAP_EVENT_CONTROLLER,
      reportingInstance: this.#identity,
    };
  }

  stats(): Record<string, unknown> {
    return { pending: this.#events.pending, recorded: this.#done.size, written: this.#events.written };
  }
}
