/**
 * The audit of one replica, built un-started: evaluation (every replica, a
 * Runnable in the Manager's "others" group) and actuation (leader-only, a
 * Runnable the Manager starts with each term). See evaluator.ts and actuator.ts.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { KubeClient } from '../kube/client.ts';
import type { WebhookConfigurationView } from '../kube/webhook-config-source.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import type { ExceptionState, RuleSet, RuleState } from '../policy/index.ts';
import type { ExemptionTransition } from './exception-events.ts';
import type { KubeObject, RuleVerdict } from '../policy/types.ts';
import { AuditActuator, type AuditActuatorConfig } from './actuator.ts';
import { AuditEvaluator, type AuditEvaluatorConfig, type AuditEvaluatorDeps, type AuditPolicySource } from './evaluator.ts';
import { ReportWriter } from './report-writer.ts';
import type { TypeCheckStatus } from './type-check-status.ts';
export type { ReportConfig } from './report-planner.ts';

export type AuditConfig = AuditEvaluatorConfig & AuditActuatorConfig;

export interface AuditDeps {
  client: KubeClient;
  /** The replica's one leader-only writer (owned by the replica, which closes it); only the actuator's writes use it. */
  writer: FencedWriter;
  ruleSet: RuleSet;
  /** Rule evaluation (the audit evaluation pool); see AuditEvaluatorDeps.evaluate. */
  evaluate?: AuditEvaluatorDeps['evaluate'] | undefined;
  /** Other policy kinds audited next to the rules (e.g. ValidatingAdmissionPolicies). */
  policies?: readonly AuditPolicySource[];
  namespaceLabels: (namespace: string) => Record<string, string> | undefined;
  ruleObject?: (state: RuleState) => KubeObject | undefined;
  /** The object that exhausted an evaluation thread's memory with this rule version, for its status (adr/0018). */
  memoryExhausted?: (state: RuleState) => string | undefined;
  /** The stored PortalException of a RuleSet entry (for its status). */
  exceptionObject?: (state: ExceptionState) => KubeObject | undefined;
  /** Exemptions starting and ending (every replica), for their Events. */
  onExemption?: (t: ExemptionTransition) => void;
  onNamespaceChange?: (handler: (namespace: string) => void) => () => void;
  /** The webhook configuration Portal is served through, for the rules' coverage. */
  webhookConfiguration?: () => WebhookConfigurationView | 'unchecked';
  /** The rules' TypeChecked condition (status-writer.ts); absent: not shown. */
  typeCheck?: TypeCheckStatus | undefined;
  /** Sees each `error` verdict of a Portal rule in the audit (metric, Events). */
  onRuleError?: (verdict: RuleVerdict, object: { kind: string; namespace: string; name: string }) => void;
  logger: Logger;
  registry: Registry;
}

export interface Audit {
  evaluator: AuditEvaluator;
  actuator: AuditActuator;
}

export function buildAudit(config: AuditConfig, deps: AuditDeps): Audit {
  // Stored reports are watched on every replica (evaluation compares against them); only the actuator writes through it.
  const reports = new ReportWriter(deps.client, deps.writer, deps.logger, { api: config.reports.api, ...(config.staleAfterMs !== undefined ? { staleAfterMs: config.staleAfterMs } : {}) });
  const evaluator = new AuditEvaluator(config, { ...deps, reports });
  const actuator = new AuditActuator(config, { ...deps, evaluator });
  return { evaluator, actuator };
}
