/**
 * Rule `.status` (leader-only), written by the fenced status writer
 * (fenced-status-writer.ts): observedGeneration, conditions (Ready: Compiled /
 * CompileError; ActionsValid: problems with spec.audit.actions; Covered:
 * whether admission and the audit see what the rule matches, coverage.ts;
 * TypeChecked: its field references against the matched kinds' schemas,
 * type-check-status.ts),
 * violations (objects violating the rule now) and lastAuditTime (the end of
 * the last full pass that evaluated the rule and ended while leading;
 * docs/architecture.md).
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../kube/client.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import { matchesPods, type RuleState } from '../policy/index.ts';
import { LogKey } from '../observability/log-keys.ts';
import type { Condition, KubeObject, RuleSpec, RuleStatus } from '../policy/types.ts';
import { validateActions } from './actions.ts';
import type { Coverage } from './coverage.ts';
import { FencedStatusWriter, sameConditions, withTransition } from './fenced-status-writer.ts';
import type { TypeCheckedCondition } from './type-check-status.ts';

export interface StatusInputs {
  states(): RuleState[];
  /** Violating objects of a rule (display key: `name` or `namespace/name`). */
  violations(display: string): number;
  /** The stored rule object (for its spec and current status), if cached. */
  ruleObject(state: RuleState): KubeObject | undefined;
  /** When the last full pass that evaluated the rule and ended while leading (takeover drained) finished. */
  lastAuditTime(state: RuleState): Date | undefined;
  /** The last full pass that evaluated the rule, also as a follower: used only when the rule has no lastAuditTime yet. */
  lastPassTime(state: RuleState): Date | undefined;
  /** The rule's coverage, once known. */
  coverage?(state: RuleState): Coverage | undefined;
  /** The rule's type check against the matched kinds' schemas (type-check-status.ts). */
  typeChecked?(state: RuleState, object: KubeObject | undefined): TypeCheckedCondition | undefined;
  /** The condition message when an object exhausted an evaluation thread's memory with the rule version in force (adr/0018). */
  memoryExhausted?(state: RuleState): string | undefined;
}

export function ruleDisplay(state: Pick<RuleState, 'name' | 'namespace'>): string {
  return state.namespace !== undefined ? `${state.namespace}/${state.name}` : state.name;
}

function actionProblems(state: RuleState, object: KubeObject | undefined): string[] {
  const spec = (object as { spec?: RuleSpec } | undefined)?.spec;
  const onlyPods = spec?.match?.kinds ? matchesPods(spec) && spec.match.kinds.every((k) => k.kinds.every((x) => x === 'Pod')) : true;
  return validateActions(state.actions, onlyPods);
}

/** The status the rule should have now; `previous` supplies lastTransitionTime of unchanged conditions. */
export function desiredStatus(
  state: RuleState,
  object: KubeObject | undefined,
  violations: number,
  lastAudit: Date | undefined,
  now: Date,
  anyPass?: Date,
  coverage?: Coverage,
  typeChecked?: TypeCheckedCondition,
  memoryExhausted?: string,
): RuleStatus {
  const previous = (object as { status?: RuleStatus } | undefined)?.status?.conditions ?? [];
  const cond = (c: Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>): Condition => withTransition(c, previous, now, state.generation);
  const problems = actionProblems(state, object);
  const status: RuleStatus = {
    observedGeneration: state.generation,
    conditions: [
      cond({ type: 'Ready', status: state.ready ? 'True' : 'False', reason: state.reason, message: state.message }),
      problems.length === 0
        ? cond({ type: 'ActionsValid', status: 'True', reason: 'Valid', message: `${state.actions.length} audit action(s)` })
        : cond({ type: 'ActionsValid', status: 'False', reason: 'InvalidAction', message: problems.join('; ') }),
      ...(coverage ? [cond({ type: 'Covered', status: coverage.covered ? 'True' : 'False', reason: coverage.reason, message: coverage.message })] : []),
      // Only for a rule that compiled: a CompileError's Ready condition already says what is wrong.
      ...(typeChecked ? [cond({ type: 'TypeChecked', ...typeChecked })] : []),
      // Only while this version has such an object: the condition names it (an edited rule is tried again).
      ...(memoryExhausted !== undefined ? [cond({ type: 'MemoryExhausted', status: 'True', reason: 'OutOfMemory', message: memoryExhausted })] : []),
    ],
    violations,
  };
  const stored = (object as { status?: RuleStatus } | undefined)?.status?.lastAuditTime;
  if (lastAudit) status.lastAuditTime = lastAudit.toISOString();
  else if (stored) status.lastAuditTime = stored;
  else if (anyPass) status.lastAuditTime = anyPass.toISOString();
  return status;
}

/**
 * How long a stored lastAuditTime stands when a pass changed nothing else
 * in a rule's status. Why: every rule change starts a full pass, and every
 * pass moves the lastAuditTime of every rule it evaluated, so one tenant
 * creating 20 rules rewrote the status of every rule in the cluster after
 * each of them (the first rule 14 times in 20 s; 100 rules of 62 KB made
 * thousands of writes, each a whole object for the API server and etcd).
 * Like the kubelet's node status report frequency: a change is written at
 * once, a mere heartbeat at most this often.
 */
export const AUDIT_TIME_REFRESH_MS = 30_000;

/** The stored status says the same as the desired one, but for a lastAuditTime moved by less than `refreshMs`. */
export function sameStatus(a: RuleStatus | undefined, b: RuleStatus, refreshMs = 0): boolean {
  if (!a) return false;
  return a.observedGeneration === b.observedGeneration && a.violations === b.violations && recentEnough(a.lastAuditTime, b.lastAuditTime, refreshMs) && sameConditions(a.conditions, b.conditions);
}

function recentEnough(stored: string | undefined, desired: string | undefined, refreshMs: number): boolean {
  if (stored === desired) return true;
  if (stored === undefined || desired === undefined) return false;
  const moved = Date.parse(desired) - Date.parse(stored);
  return moved >= 0 && moved < refreshMs;
}

/** Rule status writes, keyed by RuleState key. */
export class StatusWriter extends FencedStatusWriter<RuleState, RuleStatus> {
  /** `auditTimeRefreshMs`: see {@link AUDIT_TIME_REFRESH_MS} (its default); 0 writes every move. */
  constructor(client: KubeClient, writer: FencedWriter, inputs: StatusInputs, logger: Logger, options: { debounceMs?: number; auditTimeRefreshMs?: number } = {}) {
    const refreshMs = options.auditTimeRefreshMs ?? AUDIT_TIME_REFRESH_MS;
    super(
      client,
      writer,
      {
        noun: 'rule',
        logFields: (key) => ({ [LogKey.rule]: key }),
        subcomponent: 'status-writer',
        current: () => new Map(inputs.states().map((s) => [s.key, s])),
        object: (state) => inputs.ruleObject(state),
        needsObject: false,
        desired: (state, object, now) =>
          desiredStatus(
            state,
            object,
            inputs.violations(ruleDisplay(state)),
            inputs.lastAuditTime(state),
            now,
            inputs.lastPassTime(state),
            inputs.coverage?.(state),
            state.ready ? inputs.typeChecked?.(state, object) : undefined,
            inputs.memoryExhausted?.(state),
          ),
        same: (a, b) => sameStatus(a, b, refreshMs),
        patch: (state, body, opts) =>
          state.namespace !== undefined
            ? writer.customObjects.patchNamespacedCustomObjectStatus({ group: 'portal.dev', version: 'v1alpha1', namespace: state.namespace, plural: 'portalrules', name: state.name, body }, opts)
            : writer.customObjects.patchClusterCustomObjectStatus({ group: 'portal.dev', version: 'v1alpha1', plural: 'portalclusterrules', name: state.name, body }, opts),
      },
      logger,
      options,
    );
  }
}
