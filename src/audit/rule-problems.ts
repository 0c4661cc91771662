/**
 * Problems of Portal's own rules made visible (issue 15 items 1 and 3):
 * - `portal_rule_evaluation_errors_total{rule,path}` counts every `error`
 *   verdict of a PortalRule / PortalClusterRule, at admission and in the
 *   audit, on every replica. `rule` is the rule's display name (from the
 *   cluster's rules, never from a request), `path` is `admission` or
 *   `audit`: both bounded.
 * - Warning Events on the rule (through the replica's {@link ProblemEvents}:
 *   leader only, one per problem and rule generation): `CompileError` when a
 *   generation does not compile (with the field and the line and column of a
 *   CEL error), `EvaluationError` / `CostExceeded` when an expression or the
 *   schema fails on an object (with the field and the object that triggered
 *   it); `OutOfMemory` when evaluating it on an object exhausted an
 *   evaluation thread's memory (adr/0018, naming the object). A deadline or an unknown namespace is counted but is not the rule's
 *   defect, so it gets no Event.
 *
 * An admission error seen by a follower is counted there; its Event is
 * written once the leader meets the same problem (its own admission
 * requests, or the audit of the object once it exists).
 */
import { Counter, type Registry } from 'prom-client';
import type { PortalRuleObject, RuleState } from '../policy/index.ts';
import type { KubeObject, RuleVerdict } from '../policy/types.ts';
import type { ProblemEvents, ProblemSubject } from './problem-events.ts';

export type RuleErrorPath = 'admission' | 'audit';

/** What the problem is about: the object that triggered it. */
export interface ProblemObject {
  kind: string;
  namespace: string;
  name: string;
  /** The admission operation (absent in the audit). */
  operation?: string;
}

export interface RuleProblemsDeps {
  registry: Registry;
  /** Absent in files mode (no cluster): only counted. */
  events?: ProblemEvents;
  /** The rule object (uid, generation) of a display name (`name` or `namespace/name`), from the informers' cache. */
  ruleObject?: (display: string) => KubeObject | undefined;
}

const RULE_API_VERSION = 'portal.dev/v1alpha1';

export function ruleErrorsCounter(registry: Registry): Counter<'rule' | 'path'> {
  const name = 'portal_rule_evaluation_errors_total';
  return (
    (registry.getSingleMetric(name) as Counter<'rule' | 'path'> | undefined) ??
    new Counter({
      name,
      help: 'error verdicts of PortalRules and PortalClusterRules (never compiled, runtime error, cost, regex or time budget, undecidable), by rule and where (admission, audit). What an error does follows the rule\'s failurePolicy and enforcement.',
      labelNames: ['rule', 'path'],
      registers: [registry],
    })
  );
}

function subjectOf(display: string, object: KubeObject | undefined): ProblemSubject | undefined {
  const uid = object?.metadata?.uid;
  if (!object || !uid) return undefined;
  const slash = display.indexOf('/');
  return {
    apiVersion: RULE_API_VERSION,
    kind: slash >= 0 ? 'PortalRule' : 'PortalClusterRule',
    name: object.metadata?.name ?? display.slice(slash + 1),
    ...(slash >= 0 ? { namespace: display.slice(0, slash) } : {}),
    uid,
    generation: object.metadata?.generation ?? 0,
  };
}

function describe(o: ProblemObject): string {
  const at = `${o.kind} ${o.namespace ? `${o.namespace}/` : ''}${o.name || '(unnamed)'}`;
  return o.operation ? `${at} (${o.operation})` : `${at} (audit)`;
}

export class RuleProblems {
  readonly #errors: Counter<'rule' | 'path'>;
  readonly #events: ProblemEvents | undefined;
  readonly #ruleObject: ((display: string) => KubeObject | undefined) | undefined;

  constructor(deps: RuleProblemsDeps) {
    this.#errors = ruleErrorsCounter(deps.registry);
    this.#events = deps.events;
    this.#ruleObject = deps.ruleObject;
  }

  /** An `error` verdict (every replica). Counts it; a defect of the rule also becomes an Event on it. */
  verdictError(path: RuleErrorPath, v: RuleVerdict, on: ProblemObject): void {
    if (v.ruleKind === 'ValidatingAdmissionPolicy') return;
    this.#errors.inc({ rule: v.rule, path });
    const reason = v.error?.reason;
    if (!this.#events || (reason !== 'EvaluationError' && reason !== 'CostExceeded' && reason !== 'OutOfMemory')) return;
    const subject = subjectOf(v.rule, this.#ruleObject?.(v.rule));
    if (!subject) return;
    const prefix = `rule ${v.rule} could not be evaluated: `;
    const why = v.message.startsWith(prefix) ? v.message.slice(prefix.length) : v.message;
    const field = v.error?.field ?? '';
    this.#events.note(subject, {
      reason,
      discriminator: [field],
      message: `${subject.kind} ${v.rule}${field ? `, ${field}` : ''}: evaluation failed on ${describe(on)}: ${why}`,
    });
  }

  /** A rule version as the RuleSet took it (every replica): a generation that does not compile becomes an Event. */
  ruleState(rule: PortalRuleObject, state: RuleState): void {
    if (!this.#events || state.ready || state.reason !== 'CompileError') return;
    const display = state.namespace !== undefined ? `${state.namespace}/${state.name}` : state.name;
    const subject = subjectOf(display, rule as unknown as KubeObject);
    if (!subject) return;
    this.#events.note(subject, { reason: 'CompileError', discriminator: [], message: `${subject.kind} ${display} generation ${state.generation}: ${state.message}` });
  }
}
