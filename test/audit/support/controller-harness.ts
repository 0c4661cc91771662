/**
 * In-process wiring of the audit (evaluation + actuator) for tests: a real embedded API
 * server with Portal's and both report APIs' CRDs installed, a cluster rule
 * source (rule + namespace informers) per replica, and a leader term the test
 * controls (grant / revoke), so leader and follower behaviour can be driven
 * deterministically. grant() does what the Manager does when the Lease is
 * won: it starts the leader-only actuator with the term; revoke() ends the
 * term, which stops it.
 */
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { ClusterRuleSource } from '../../../src/sources/cluster-rule-source.ts';
import type { AuditActuator } from '../../../src/audit/actuator.ts';
import { buildAudit, type AuditConfig, type AuditDeps } from '../../../src/audit/audit.ts';
import type { AuditEvaluator } from '../../../src/audit/evaluator.ts';
import { ExceptionEvents } from '../../../src/audit/exception-events.ts';
import { startApiServer, type ApiServer } from '../../../packages/devcluster/src/apiserver/index.ts';
import { DevApiClient } from '../../../packages/devcluster/src/dev/api-client.ts';
import { readChartCrds } from '../../../packages/devcluster/src/dev/manifests.ts';
import { FencedWriter } from '../../../src/kube/fenced-writer.ts';
import { createKubeClient, type KubeClient } from '../../../src/kube/client.ts';
import { Term } from '../../../src/leader/term.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import type { ReportApi, ReportGranularity } from '../../../src/policy/report-api.ts';
import type { ReportConfig } from '../../../src/audit/report-planner.ts';
import type { ExceptionOptions } from '../../../src/policy/index.ts';
import { NO_PRIVILEGED_SCHEMA } from '../../policy/support.ts';
export { until } from '../../support/until.ts';

/**
 * Report settings for tests: a short flush interval (so a test waits
 * fractions of a second for a coalesced write) and a budget that never
 * binds unless a test sets its own. The default shape is one wgpolicyk8s
 * report per object, which the tests that inspect an object's report read;
 * the report tests run every shape (test/audit/reports.test.ts).
 */
export function reportConfig(shape: { api?: ReportApi; granularity?: ReportGranularity } = {}, extra: Partial<ReportConfig> = {}): ReportConfig {
  return { api: shape.api ?? 'wgpolicyk8s', granularity: shape.granularity ?? 'resource', flushMs: 300, qps: 1000, maxResults: 100, statusFilter: ['fail', 'warn', 'error'], ...extra };
}

export const INSTALL_NS = 'portal-system';
export const APP_NS = 'apps';
const CHART = fileURLToPath(new URL('../../../charts/portal/', import.meta.url));

export async function clusterWithCrds(t: TestContext): Promise<{ api: ApiServer; admin: DevApiClient }> {
  const api = await startApiServer({ port: 0 });
  t.after(() => api.close());
  const admin = new DevApiClient(api.url, api.adminToken);
  const crds = await readChartCrds(CHART);
  if (crds.problems.length > 0) throw new Error(crds.problems.join('; '));
  for (const crd of crds.objects) await admin.apply(crd);
  for (const name of [INSTALL_NS, APP_NS]) await admin.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  return { api, admin };
}

export interface Replica {
  name: string;
  client: KubeClient;
  /** Evaluation (every replica). */
  controller: AuditEvaluator;
  /** Actuation (leader-only Runnable). */
  actuator: AuditActuator;
  /** Resolves when the actuator of the last granted term has stopped. */
  acting: Promise<void>;
  source: ClusterRuleSource;
  /** Events on PortalExceptions (leader-only: started with the actuator). */
  exceptionEvents: ExceptionEvents;
  /** Makes this replica the leader with a fresh epoch (validity 60 s). */
  grant(transitions?: number): Term;
  /** Ends the term; resolves once the actuator has stopped (what the Manager awaits before the next term). */
  revoke(): Promise<void>;
  stop(): Promise<void>;
}

let epochCounter = 0;

export async function startReplica(
  t: TestContext,
  api: ApiServer,
  name: string,
  config: Partial<AuditConfig> = {},
  deps: Partial<Pick<AuditDeps, 'onRuleError' | 'webhookConfiguration' | 'registry'>> = {},
  exceptions: ExceptionOptions = {},
): Promise<Replica> {
  const client = createKubeClient({ kubeconfigYaml: api.kubeConfig(name), qps: 50, burst: 100, userAgent: `portal-test (${name})` });
  const logger = silentLogger();
  const source = new ClusterRuleSource({ client, logger, exceptions });
  const writer = new FencedWriter({ kubeConfig: client.kubeConfig, userAgent: `portal-test (${name})` });
  t.after(() => writer.close());
  const exceptionEvents = new ExceptionEvents({ writer, logger, identity: name });
  let term: Term | undefined;
  let running = false;
  const { evaluator: controller, actuator } = buildAudit(
    {
      installNamespace: INSTALL_NS,
      exemptNamespaces: ['kube-system', 'kube-public', 'kube-node-lease'],
      auditIntervalMs: 3_600_000,
      workers: 4,
      maxEvictionsPerMinute: 10,
      alertmanagerUrls: [],
      alertResendIntervalMs: 3_600_000,
      statusDebounceMs: 200,
      // These tests watch every pass move lastAuditTime; the default's coalescing has its own test (test/audit/status-writer).
      auditTimeRefreshMs: 0,
      rulePollMs: 50,
      reports: reportConfig(),
      ...config,
    },
    {
      client,
      writer,
      ruleSet: source.ruleSet,
      namespaceLabels: (ns) => source.namespaceLabels(ns),
      ruleObject: (s) => (s.namespace !== undefined ? source.rules.namespacedRules.get(s.name, s.namespace) : source.rules.clusterRules.get(s.name)),
      exceptionObject: (s) => source.rules.exceptions.get(s.name, s.namespace),
      onExemption: (e) => exceptionEvents.note(e),
      onNamespaceChange: (h) => source.namespaces.informer.onEvent((e) => h(e.object.metadata?.name ?? '')),
      logger,
      registry: new Registry(),
      ...deps,
    },
  );
  const ac = new AbortController();
  const sourceDone = source.start(ac.signal);
  await source.rules.waitForSync(ac.signal);
  await source.namespaces.waitForSync(ac.signal);
  const done = controller.start(ac.signal);
  const r: Replica = {
    name,
    client,
    controller,
    actuator,
    acting: Promise.resolve(),
    source,
    exceptionEvents,
    grant(transitions = ++epochCounter) {
      term?.end('replaced');
      const granted = new Term({ leaseUid: 'test-lease', transitions }, performance.now(), 60_000);
      term = granted;
      // Like the Manager: the actuator starts with the term (synchronously, as
      // from the elector's event), once the previous term's actuator has stopped.
      const run = () => {
        running = true;
        return Promise.all([actuator.start(ac.signal, granted), exceptionEvents.start(ac.signal, granted)]).then(() => undefined).finally(() => (running = false));
      };
      r.acting = running ? r.acting.then(run) : run();
      return granted;
    },
    revoke() {
      term?.end('revoked');
      term = undefined;
      return r.acting;
    },
    async stop() {
      term?.end('stopped');
      ac.abort();
      await Promise.allSettled([r.acting, done, sourceDone]);
    },
  };
  t.after(() => r.stop());
  return r;
}


export function privilegedRule(name: string, actions: unknown[] = [], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalClusterRule',
    metadata: { name },
    spec: {
      enforcement: 'Deny',
      severity: 'high',
      category: 'Pod Security',
      match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] },
      validate: {
        message: 'Privileged containers are not allowed.',
        schema: NO_PRIVILEGED_SCHEMA,
      },
      ...(actions.length ? { audit: { actions } } : {}),
      ...extra,
    },
  };
}

export function pod(name: string, privileged: boolean, namespace = APP_NS): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace },
    spec: { containers: [{ name: 'c', image: 'nginx:1.27', securityContext: { privileged } }] },
  };
}

/** Writes (not reads) in the API server's audit log. */
export function writesBy(api: ApiServer, user?: string, resource?: string) {
  return api.auditLog().filter((e) => ['create', 'update', 'patch', 'delete'].includes(e.verb) && (user === undefined || e.user === user) && (resource === undefined || e.resource === resource));
}
