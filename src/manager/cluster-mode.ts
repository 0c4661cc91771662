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
import { ClusterRuleSource } from '../kube/cluster-rule-source.ts';
import { VapInformerSource } from '../kube/vap-source.ts';
import { VapAuditPolicySource } from '../audit/vap-policy-source.ts';
import { compileProblems, VapProblemEvents } from '../audit/vap-events.ts';
import { FencedWriter } from '../kube/fenced-writer.ts';
import { leaderElectionConfig, LeaderElector, makeIdentity } from '../leader/index.ts';
import type { DebugVars } from '../observability/debug-vars.ts';
import { LogKey } from '../observability/log-keys.ts';
import { componentLogger, type Logger } from '../observability/logger.ts';
import type { BuildProblems, Mode } from './mode.ts';

export const VERSION = '0.1.0';

export interface ClusterModeDeps {
  root: Logger;
  env: Readonly<Record<string, string | undefined>>;
  registry: Registry;
  liveness: HealthChecks;
  debugVars: DebugVars;
  /** portal_rules_loaded: the rule informers keep it current. */
  rulesLoaded: Gauge;
}

export function clusterMode(config: Readonly<ServeConfig>, deps: ClusterModeDeps): Mode | BuildProblems {
  const { root, registry, debugVars } = deps;
  const inCluster = config.kubeconfig === '' && (deps.env.KUBERNETES_SERVICE_HOST ?? '') !== '';
  let client: KubeClient;
  try {
    client = createKubeClient({
      ...(inCluster ? { inCluster: true } : { kubeconfigPath: config.kubeconfig }),
      qps: config.kubeApiQps,
      burst: config.kubeApiBurst,
      userAgent: `portal/${VERSION} (${config.podName})`,
    });
  } catch (err) {
    return { title: 'cannot use the cluster', problems: [(err as Error).message] };
  }
  componentLogger(root, 'serve').info({ [LogKey.url]: client.server, inCluster }, 'cluster mode: rules and namespace labels from the API server');
  const source = new ClusterRuleSource({ client, logger: componentLogger(root, 'rules'), rulesLoaded: deps.rulesLoaded });
  // ValidatingAdmissionPolicies are audited, never enforced here (the API server does): DESIGN §8.
  const vaps = new VapInformerSource(client, componentLogger(root, 'vap'));

  const identity = makeIdentity(config.podName);
  let elector: LeaderElector;
  try {
    elector = new LeaderElector(
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

  // The replica's one transport for leader-only writes (fenced at the socket); closed after the Manager stopped.
  const writer = new FencedWriter({ kubeConfig: client.kubeConfig, userAgent: client.userAgent });
  // VAP evaluation problems: counted on every replica, Warning Events on the policy written by the leader only.
  const vapEvents = new VapProblemEvents({ writer, logger: componentLogger(root, 'audit'), registry, identity, namespace: config.installNamespace });
  vaps.onCompileErrors((policy, errors) => {
    for (const problem of compileProblems(errors)) vapEvents.note(policy, problem);
  });
  const { evaluator, actuator } = buildAudit(
    {
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
    },
    {
      client,
      writer,
      ruleSet: source.ruleSet,
      policies: [new VapAuditPolicySource(vaps, (policy, problem, name) => vapEvents.note(policy, problem, name))],
      namespaceLabels: (ns) => source.namespaceLabels(ns),
      ruleObject: (s) => (s.namespace !== undefined ? source.rules.namespacedRules.get(s.name, s.namespace) : source.rules.clusterRules.get(s.name)),
      onNamespaceChange: (h) => source.namespaces.informer.onEvent((e) => h(e.object.metadata?.name ?? '')),
      logger: componentLogger(root, 'audit'),
      registry,
    },
  );

  debugVars.register('informers', () => source.informerStats());
  debugVars.register('validating_admission_policies', () => ({ ...vaps.debugVars(), events: vapEvents.stats() }));
  // A VAP the API server accepted can still fail to compile in Portal's CEL engine (a
  // stricter type check): every request it matches is then an audit `error` (DESIGN §8).
  new Gauge({
    name: 'portal_vap_compile_errors',
    help: 'ValidatingAdmissionPolicies with an expression that does not compile in Portal (audited as errors).',
    registers: [registry],
    collect(this: Gauge) {
      this.set(vaps.compileErrors().size);
    },
  });
  debugVars.register('leader_election', () => elector.debugVars());
  debugVars.register('audit', () => ({ ...evaluator.stats(), ...actuator.stats() }));
  deps.liveness.add('leader-election', () => elector.healthError() ?? true);

  return {
    kind: 'cluster',
    source,
    election: elector,
    runnables: [
      ...source.runnables().map((runnable) => ({ runnable, group: 'informers' as const })),
      // Not an admission dependency: VAP informers never gate readiness (a cluster without
      // VAPs, or without RBAC for them, still admits); until synced the audit has no VAP verdicts.
      { runnable: { name: 'vap-informers', start: (signal: AbortSignal) => vaps.start(signal) }, group: 'others' },
      // Every replica evaluates (warm followers) ...
      { runnable: evaluator, group: 'others' },
      // ... and only the leader acts: started by the Manager with each term.
      { runnable: actuator, group: 'others' },
      { runnable: vapEvents, group: 'others' },
    ],
    close: () => writer.close(),
  };
}
