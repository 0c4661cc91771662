/**
 * The seams of the audit evaluation (evaluator.ts): its configuration and
 * dependencies, what it holds about one object, the side-effecting step the leader attaches, and other policy
 * kinds plugged in next to the RuleSet.
 */
import type { EvaluationInput, GroupVersionKind, KubeObject, RuleAction, RuleVerdict } from '../policy/types.ts';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { KubeClient } from '../kube/client.ts';
import type { WebhookConfigurationView } from '../kube/webhook-config-source.ts';
import type { RuleSet } from '../policy/index.ts';
import type { ExemptionTransition } from './exception-events.ts';
import type { ReportWriter } from './report-writer.ts';
import type { HandlerResult } from './worker-pool.ts';

export interface AuditEvaluatorConfig {
  /** Where the ledger ConfigMaps live. */
  installNamespace: string;
  /** Never evaluated (the install namespace is added). */
  exemptNamespaces: readonly string[];
  /** `--audit-interval`. */
  auditIntervalMs: number;
  /** `--audit-workers`. */
  workers: number;
  /** How often the rule set's revision is compared (rules have no change event yet). @default 100 */
  rulePollMs?: number;
  /** Informer silence bound (tests shorten it). */
  staleAfterMs?: number;
}

export interface AuditEvaluatorDeps {
  client: KubeClient;
  ruleSet: RuleSet;
  /**
   * Every rule's verdict for one object: the replica's audit evaluation pool
   * (worker threads with a deadline, adr/0013). @default evaluate(ruleSet, input) on this thread
   */
  evaluate?: ((input: EvaluationInput) => RuleVerdict[] | Promise<RuleVerdict[]>) | undefined;
  /** Further policy kinds evaluated next to the RuleSet (see AuditPolicySource). */
  policies?: readonly AuditPolicySource[];
  namespaceLabels: (namespace: string) => Record<string, string> | undefined;
  /** Subscribes to namespace changes (labels drive namespaceSelector); returns unsubscribe. */
  onNamespaceChange?: (handler: (namespace: string) => void) => () => void;
  /** Stored reports: watched here; written only by the actuator (through the FencedWriter). */
  reports: ReportWriter;
  /** An object started or stopped being exempted by a PortalException (every replica; Events are written by the leader). */
  onExemption?: (t: ExemptionTransition) => void;
  /** Sees each `error` verdict of a Portal rule (metric, Events); must not throw. */
  onRuleError?: (verdict: RuleVerdict, object: { kind: string; namespace: string; name: string }) => void;
  /** The webhook configuration Portal is served through, for the rules' coverage ('unchecked' when none is named). */
  webhookConfiguration?: () => WebhookConfigurationView | 'unchecked';
  logger: Logger;
  registry: Registry;
}

/**
 * A source of audit verdicts besides the RuleSet (the seam for other policy
 * kinds). `revision` changes when its policies change; `matchedKinds` adds
 * informers; `evaluate` must be pure and fast (it runs in the worker pool).
 */
export interface AuditPolicySource {
  readonly name: string;
  readonly revision: number;
  matchedKinds(): Iterable<{ group: string; kind: string }>;
  /** In the evaluation pool on a replica (adr/0013). */
  evaluate(request: EvaluationInput): RuleVerdict[] | Promise<RuleVerdict[]>;
  /** Audit actions of one of its policies (by verdict `rule`), for the actuator. */
  actionsFor?(rule: string): readonly RuleAction[] | undefined;
  /**
   * The lookup keys a PortalException names its policies by (`vap:POLICY`,
   * `vap:POLICY/BINDING`), or undefined until the source has listed them.
   */
  ruleKeys?(): Iterable<string> | undefined;
}

/** What evaluation knows about one object: the input of the side-effecting step. */
export interface ObjectState {
  gvk: GroupVersionKind;
  /** Last known object (the informer's own reference; for actions after a delete). */
  object: KubeObject;
  uid: string | undefined;
  verdicts: RuleVerdict[];
  /** Rules (display keys) the object violates now (fail or warn). */
  violating: Set<string>;
  /** Rules the object violated at some point and whose alert may still need resolving. */
  seen: Set<string>;
  deleted: boolean;
  /**
   * What a report says about it changed with the last evaluation (verdicts,
   * uid, or it went away): the leader marks its report dirty. Unchanged
   * objects (most of a full pass) cost their report nothing.
   */
  reportChanged: boolean;
  /** The uid of the object this one replaced under the same name (its resource report goes). */
  replacedUid?: string | undefined;
  /** PortalExceptions (`namespace/name`) exempting it now, with the rules each exempts it from. */
  exempted?: ReadonlyMap<string, readonly string[]>;
}

/**
 * The side-effecting step of the worker pool, attached by the actuator while
 * this replica leads. `act` runs after each evaluation; the hooks tell the
 * step what evaluation saw so it can keep rule status current.
 */
export interface AuditStep {
  act(key: string, state: ObjectState): Promise<HandlerResult>;
  /** After every handled key (acted on or not). */
  handled?(key: string): void;
  /** Rules (RuleState keys) whose violation count changed. */
  violationsChanged?(ruleKeys: string[]): void;
  /**
   * A full pass ended (every object enqueued by it was handled). `rules`: the
   * rules (RuleState keys) it evaluated — those in force when it started
   * whose kinds had all been listed.
   */
  passEnded?(at: Date, rules: ReadonlySet<string>): void;
  /** The coverage of these rules (RuleState keys) changed. */
  coverageChanged?(ruleKeys: string[]): void;
  /** The rule set changed. */
  rulesChanged?(): void;
  /** Exceptions (`namespace/name`) whose exempted count or expiry changed. */
  exceptionsChanged?(displays: string[]): void;
}

