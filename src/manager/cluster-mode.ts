/**
 * Cluster mode (`--kubeconfig FILE`, or in-cluster config when
 * KUBERNETES_SERVICE_HOST is set): rules and namespace labels from
 * informers, the audit (evaluation on every replica, actuation leader-only)
 * and leader election on the Lease. Builds everything un-started.
 *
 * Leadership reaches work in one place: the elector reports on its channel
 * (`elector.events`), the Manager subscribes and starts the leader-only
 * runnables (the audit actuator) with the term, and cancels them when it ends.
 */
import { Gauge, type Registry } from 'prom-client';
import type { HealthChecks } from '../admission/probes.ts';
import { buildAudit } from '../audit/audit.ts';
import type { ServeConfig } from '../config/options.ts';
import { createKubeClient, type KubeClient } from '../kube/client.ts';
import { ClusterRuleSource } from '../sources/cluster-rule-source.ts';
import { VapInformerSource } from '../sources/vap-informers.ts';
import { WebhookConfigSource } from '../kube/webhook-config-source.ts';
import { CrdSchemaSource } from '../sources/crd-schemas.ts';
import { TypeCheckStatus } from '../audit/type-check-status.ts';
import { VapTypeWarnings } from '../audit/vap-type-warnings.ts';
import { builtinSchemas, layered } from '../policy/kind-schemas/catalogue.ts';
import { VapAuditPolicySource } from '../audit/vap-audit.ts';
import { DenialEvents } from '../audit/denial-events.ts';
import { denialEventMetrics } from '../audit/metrics.ts';
import { ExceptionEvents } from '../audit/exception-events.ts';
import { ProblemEvents } from '../audit/problem-events.ts';
import { RuleProblems } from '../audit/rule-problems.ts';
import { compileProblems, VapProblems } from '../audit/vap-events.ts';
import { EvaluationPool } from '../evaluation/pool.ts';
import { FencedWriter } from '../kube/fenced-writer.ts';
import { leaderElectionConfig, LeaderElector, makeIdentity } from '../leader/index.ts';
import type { DebugVars } from '../observability/debug-vars.ts';
import { LogKey } from '../observability/log-keys.ts';
import { componentLogger, type Logger } from '../observability/logger.ts';
import type { KubeObject } from '../policy/types.ts';
import { exceptionOptions, type BuildProblems, type Mode } from './mode.ts';
import { AUDIT_THREADS, type EvaluationMemory } from './evaluation-memory.ts';
import { memoryExhaustedMessage } from '../evaluation/poison-pairs.ts';

export const VERSION = '0.1.0';

export interface ClusterModeDeps {
  root: Logger;
  env: Readonly<Record<string, string | undefined>>;
  registry: Registry;
  liveness: HealthChecks;
  debugVars: DebugVars;
  /** portal_rules_loaded: the rule informers keep it current. */
  rulesLoaded: Gauge;
  /** Evaluation threads' limits and the pairs that exhausted them (evaluation-memory.ts), shared with admission. */
  evaluationMemory: EvaluationMemory;
}

export function clusterMode(config: Readonly<ServeConfig>, deps: ClusterModeDeps): Mode | BuildProblems {
  const { root, registry, debugVars } = deps;
  const connected = clusterClient(config, deps.env);
  if ('problems' in connected) return connected;
  const { client, inCluster } = connected;
  componentLogger(root, 'serve').info({ [LogKey.url]: client.server, [LogKey.inCluster]: inCluster }, 'cluster mode: rules and namespace labels from the API server');
  // Problems of rules and VAPs: counted on every replica, Warning Events on the policy written by the leader only.
  const ruleProblemSink: { problems?: RuleProblems } = {};
  const source = new ClusterRuleSource({
    client,
    logger: componentLogger(root, 'rules'),
    rulesLoaded: deps.rulesLoaded,
    exceptions: exceptionOptions(config),
    onRule: (rule, state) => ruleProblemSink.problems?.ruleState(rule, state),
  });
  // ValidatingAdmissionPolicies are audited, never enforced here (the API server does): docs/design.md §8.
  const vaps = new VapInformerSource(client, componentLogger(root, 'vap'));
  // The webhook configuration Portal is served through, for the rules' Covered condition.
  const webhookConfig = config.webhookConfiguration !== '' ? new WebhookConfigSource(client, config.webhookConfiguration, componentLogger(root, 'coverage')) : undefined;
  // Custom kinds' schemas, for type-checking rules at apply and in their status (issue 33 item 1).
  const crds = new CrdSchemaSource(client, componentLogger(root, 'crd-schemas'));
  const kindSchemas = layered(builtinSchemas(), crds.schemas);

  const identity = makeIdentity(config.podName);
  const elector = clusterElector(config, client, identity, root, registry);
  if ('problems' in elector) return elector;

  // The replica's one transport for leader-only writes (fenced at the socket); closed after the Manager stopped.
  const writer = new FencedWriter({ kubeConfig: client.kubeConfig, userAgent: client.userAgent });
  const problemEvents = new ProblemEvents({ writer, logger: componentLogger(root, 'audit'), identity });
  const vapProblems = new VapProblems({ events: problemEvents, registry });
  // Exemptions starting and ending: noted on every replica, Normal Events on the exception written by the leader only.
  const exceptionEvents = new ExceptionEvents({ writer, logger: componentLogger(root, 'audit'), identity, writeLimiter: client.writeLimiter });
  vaps.onCompileErrors((policy, errors) => {
    for (const problem of compileProblems(errors)) vapProblems.note(policy, problem);
  });
  // What the API server puts in a VAP's status.typeChecking, as Events on the policy (issue 33).
  const vapTypeWarnings = new VapTypeWarnings({ schemas: kindSchemas, events: problemEvents });
  vaps.policies.onEvent((e) => vapTypeWarnings.observe(e));
  const ruleByDisplay = (display: string): KubeObject | undefined => {
    const slash = display.indexOf('/');
    return slash >= 0 ? source.rules.namespacedRules.get(display.slice(slash + 1), display.slice(0, slash)) : source.rules.clusterRules.get(display);
  };
  const ruleProblems = new RuleProblems({ registry, events: problemEvents, ruleObject: ruleByDisplay });
  ruleProblemSink.problems = ruleProblems;
  const memory = deps.evaluationMemory;
  const { evaluator, actuator, auditEvaluation } = clusterAudit(config, {
    client,
    writer,
    source,
    vaps,
    vapProblems,
    ruleProblems,
    exceptionEvents,
    webhookConfig,
    typeCheck: new TypeCheckStatus(kindSchemas, () => crds.schemas.generation),
    root,
    registry,
    memory,
  });
  // A rule's status names the object that exhausted a thread's memory with it (the leader writes it).
  memory.poison.onChange(({ pair }) => actuator.ruleChanged(pair.rule));

  const denialEvents = denialEventsWriter(config, { client, root, identity, registry, debugVars });
  registerDebugVars(debugVars, registry, { source, vaps, vapTypeWarnings, problemEvents, exceptionEvents, webhookConfig, crds, elector, evaluator, actuator, auditEvaluation });
  deps.liveness.add('leader-election', () => elector.healthError() ?? true);

  return {
    kind: 'cluster',
    source,
    election: elector,
    ruleProblems,
    kindSchemas,
    runnables: [...clusterRunnables({ source, vaps, problemEvents, exceptionEvents, webhookConfig, crds, elector, evaluator, actuator, auditEvaluation }), ...(denialEvents ? [{ runnable: denialEvents, group: 'others' as const }] : [])],
    ...(denialEvents ? { denialEvents } : {}),
    close: () => writer.close(),
  };
}

/** What the audit is built from in cluster mode. */
interface AuditParts {
  client: KubeClient;
  writer: FencedWriter;
  source: ClusterRuleSource;
  vaps: VapInformerSource;
  vapProblems: VapProblems;
  ruleProblems: RuleProblems;
  exceptionEvents: ExceptionEvents;
  webhookConfig: WebhookConfigSource | undefined;
  typeCheck: TypeCheckStatus;
  root: Logger;
  registry: Registry;
  memory: EvaluationMemory;
}

/** The audit (evaluation on every replica, actuation leader-only) and its own evaluation pool. */
function clusterAudit(config: Readonly<ServeConfig>, parts: AuditParts): ReturnType<typeof buildAudit> & { auditEvaluation: EvaluationPool } {
  const { client, writer, source, vaps, vapProblems, ruleProblems, exceptionEvents, webhookConfig, typeCheck, root, registry, memory } = parts;
  // The audit's own evaluation pool (adr/0013): one thread, so a full pass never takes a worker from admission,
  // and an admission flood never takes the audit's. Its deadlines count from when the thread starts an
  // evaluation (as admission's do), and no request waits on it (no requestMs); its flows are namespaces
  // too, so one namespace's heavy objects do not hold the reports of the others (issue 31 item 2).
  const auditEvaluation = new EvaluationPool(
    { name: 'audit', workers: AUDIT_THREADS, timeoutMs: config.evaluationTimeout, memory: memory.threads },
    { rules: source.ruleSet, vaps: vaps.set, params: vaps.params, poison: memory.poison },
    { logger: componentLogger(root, 'evaluation'), registry },
  );
  const { evaluator, actuator } = buildAudit(
    auditConfig(config),
    {
      client,
      writer,
      ruleSet: source.ruleSet,
      evaluate: (input) => auditEvaluation.audit(input),
      policies: [
        new VapAuditPolicySource(
          vaps,
          (policy, problem, name) => vapProblems.note(policy, problem, name),
          (attrs, namespaceObject) => auditEvaluation.vap(attrs, namespaceObject),
        ),
      ],
      onRuleError: (verdict, object) => ruleProblems.verdictError('audit', verdict, object),
      webhookConfiguration: () => webhookConfig?.view() ?? 'unchecked',
      typeCheck,
      namespaceLabels: (ns) => source.namespaceLabels(ns),
      ruleObject: (s) => (s.namespace !== undefined ? source.rules.namespacedRules.get(s.name, s.namespace) : source.rules.clusterRules.get(s.name)),
      memoryExhausted: (s) => memoryExhaustedMessage(memory.poison, s.key, source.ruleSet.version(s.key)),
      exceptionObject: (s) => source.rules.exceptions.get(s.name, s.namespace),
      onExemption: (t) => exceptionEvents.note(t),
      onNamespaceChange: (h) => source.namespaces.informer.onEvent((e) => h(e.object.metadata?.name ?? '')),
      logger: componentLogger(root, 'audit'),
      registry,
    },
  );
  return { evaluator, actuator, auditEvaluation };
}

/** The API server client, in-cluster or from `--kubeconfig`. */
function clusterClient(config: Readonly<ServeConfig>, env: ClusterModeDeps['env']): { client: KubeClient; inCluster: boolean } | BuildProblems {
  const inCluster = config.kubeconfig === '' && (env.KUBERNETES_SERVICE_HOST ?? '') !== '';
  try {
    const client = createKubeClient({
      ...(inCluster ? { inCluster: true } : { kubeconfigPath: config.kubeconfig }),
      qps: config.kubeApiQps,
      burst: config.kubeApiBurst,
      userAgent: `portal/${VERSION} (${config.podName})`,
    });
    return { client, inCluster };
  } catch (err) {
    return { title: 'cannot use the cluster', problems: [(err as Error).message] };
  }
}

function clusterElector(config: Readonly<ServeConfig>, client: KubeClient, identity: string, root: Logger, registry: Registry): LeaderElector | BuildProblems {
  try {
    return new LeaderElector(
      leaderElectionConfig({
        leaderElect: config.leaderElect,
        leaseName: config.leaseName,
        leaseNamespace: config.leaseNamespace,
        leaseDurationMs: config.leaseDuration,
        renewDeadlineMs: config.renewDeadline,
        retryPeriodMs: config.retryPeriod,
      }),
      { client, identity, logger: componentLogger(root, 'leader'), registry },
    );
  } catch (err) {
    return { title: 'invalid leader election settings', problems: [(err as Error).message] };
  }
}

/** The audit's settings, from the serve flags. */
function auditConfig(config: Readonly<ServeConfig>): Parameters<typeof buildAudit>[0] {
  return {
    installNamespace: config.installNamespace,
    exemptNamespaces: config.exemptNamespaces,
    auditIntervalMs: config.auditInterval,
    workers: config.auditWorkers,
    maxEvictionsPerMinute: config.maxEvictionsPerMinute,
    alertmanagerUrls: config.alertmanagerUrl,
    alertResendIntervalMs: config.alertResendInterval,
    reports: {
      api: config.reportApi,
      granularity: config.reportGranularity,
      flushMs: config.reportFlush,
      qps: config.reportQps,
      maxResults: config.reportMaxResults,
      statusFilter: config.reportStatusFilter,
    },
  };
}

interface ClusterParts {
  source: ClusterRuleSource;
  vaps: VapInformerSource;
  vapTypeWarnings?: VapTypeWarnings;
  problemEvents: ProblemEvents;
  exceptionEvents: ExceptionEvents;
  webhookConfig: WebhookConfigSource | undefined;
  crds: CrdSchemaSource;
  elector: LeaderElector;
  evaluator: ReturnType<typeof buildAudit>['evaluator'];
  actuator: ReturnType<typeof buildAudit>['actuator'];
  auditEvaluation: EvaluationPool;
}

/** /debug/vars and the gauges read at scrape time. */
/**
 * Every replica answers admission, so every replica writes its own denials'
 * Events (not leader-only), with --denial-events. Its counter is registered
 * on every replica either way, like the other metrics (no series until it writes).
 */
function denialEventsWriter(
  config: Readonly<ServeConfig>,
  deps: { client: KubeClient; root: Logger; identity: string; registry: Registry; debugVars: DebugVars },
): DenialEvents | undefined {
  const metrics = denialEventMetrics(deps.registry);
  if (!config.denialEvents) return undefined;
  const writer = new DenialEvents({ client: deps.client, logger: componentLogger(deps.root, 'admission'), identity: deps.identity, metrics });
  deps.debugVars.register('denial_events', () => writer.stats());
  return writer;
}

function registerDebugVars(debugVars: DebugVars, registry: Registry, parts: ClusterParts): void {
  const { source, vaps, vapTypeWarnings, problemEvents, exceptionEvents, webhookConfig, crds, elector, evaluator, actuator, auditEvaluation } = parts;
  debugVars.register('informers', () => source.informerStats());
  debugVars.register('crd_schemas', () => crds.stats());
  debugVars.register('validating_admission_policies', () => ({ ...vaps.debugVars(), typeWarnings: vapTypeWarnings?.debugVars() ?? {}, events: problemEvents.stats() }));
  debugVars.register('problem_events', () => problemEvents.stats());
  if (webhookConfig) debugVars.register('webhook_configuration', () => webhookConfig.stats());
  debugVars.register('exceptions', () => ({
    loaded: source.ruleSet.exceptionStates().map((s) => ({ exception: s.display, valid: s.valid, message: s.message, exempted: evaluator.exempted(s.display), expiresAt: s.expiresAt !== undefined ? new Date(s.expiresAt).toISOString() : null })),
    events: exceptionEvents.stats(),
  }));
  // A VAP the API server accepted can still fail to compile in Portal's CEL engine (a
  // stricter type check): every request it matches is then an audit `error` (docs/design.md §8).
  new Gauge({
    name: 'portal_vap_compile_errors',
    help: 'ValidatingAdmissionPolicies with an expression that does not compile in Portal (audited as errors).',
    registers: [registry],
    collect(this: Gauge) {
      this.set(vaps.compileErrors().size);
    },
  });
  debugVars.register('leader_election', () => elector.debugVars());
  debugVars.register('audit', () => ({ ...evaluator.stats(), ...actuator.stats(), evaluation: auditEvaluation.stats() }));
}

/** What the Manager runs in cluster mode, by start group. */
function clusterRunnables(parts: ClusterParts): Mode['runnables'] {
  const { source, vaps, problemEvents, exceptionEvents, webhookConfig, crds, evaluator, actuator, auditEvaluation } = parts;
  return [
    // Never gates readiness: until synced, rules on custom kinds are admitted unchecked (TypeChecked=Unknown).
    { runnable: crds, group: 'others' },
    ...source.runnables().map((runnable) => ({ runnable, group: 'informers' as const })),
    // Not an admission dependency: VAP informers never gate readiness (a cluster without
    // VAPs, or without RBAC for them, still admits); until synced the audit has no VAP verdicts.
    { runnable: { name: 'vap-informers', start: (signal: AbortSignal) => vaps.start(signal) }, group: 'others' },
    // Started before the audit evaluation that uses it, stopped with it (a closed pool fails its tasks, which the audit retries).
    { runnable: { name: 'evaluation-audit', start: (signal: AbortSignal) => auditEvaluation.start(signal) }, group: 'informers' },
    // Never gates readiness either: only the rules' Covered condition reads it.
    ...(webhookConfig ? [{ runnable: webhookConfig, group: 'others' as const }] : []),
    // Every replica evaluates (warm followers) ...
    { runnable: evaluator, group: 'others' },
    // ... and only the leader acts: started by the Manager with each term.
    { runnable: actuator, group: 'others' },
    { runnable: problemEvents, group: 'others' },
    { runnable: exceptionEvents, group: 'others' },
  ];
}
