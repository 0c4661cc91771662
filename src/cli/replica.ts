/**
 * The composition root of one replica (`portal serve`): builds every piece
 * from the frozen ServeConfig and hands them to a Manager (DESIGN §1, §4).
 *
 * Start order: probes → webhook → informers (sync awaited) → others → the
 * election; the leader-only group runs while this replica leads. Stop order
 * is the reverse (the election first, which releases the Lease), bounded by
 * --shutdown-grace-period. Both servers listen before the manager starts so
 * that a port already in use is a start-up failure, not a restart loop.
 *
 * Modes:
 * - files (`--policies DIR`): rules read once, no cluster, no election;
 * - cluster (`--kubeconfig FILE`, or in-cluster config when
 *   KUBERNETES_SERVICE_HOST is set): rules and namespace labels from
 *   informers, leader election on the Lease.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { writeSelfSigned } from '../admission/certs.ts';
import { buildAudit, type Audit } from '../audit/audit.ts';
import { engineDecider } from '../admission/engine-decider.ts';
import { HealthChecks, buildProbesServer } from '../admission/probes.ts';
import { ReadinessGate } from '../admission/readiness.ts';
import { FileRuleSource, type RuleSource } from '../admission/rule-source.ts';
import { buildAdmissionServer } from '../admission/server.ts';
import { readTlsFiles, watchTlsFiles, type TlsFiles } from '../admission/tls-reload.ts';
import { loadRulesFromDirectory } from '../config/manifests.ts';
import type { ServeConfig } from '../config/options.ts';
import { createKubeClient, type KubeClient } from '../kube/client.ts';
import { FencedWriter } from '../kube/fenced-writer.ts';
import { leaderElectionConfig, makeIdentity, type LeaderEventMap, LeaderElector } from '../leader/index.ts';
import { Manager, type Runnable } from '../manager/index.ts';
import { DebugVars } from '../observability/debug-vars.ts';
import { EventBus } from '../observability/event-bus.ts';
import { LogKey } from '../observability/log-keys.ts';
import { componentLogger, type Logger } from '../observability/logger.ts';
import { createAdmissionMetrics } from '../observability/metrics.ts';
import { ClusterRuleSource } from '../kube/cluster-rule-source.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from './command.ts';

const VERSION = '0.1.0';

/** Everything leader-only work may need; grows with the audit. */
export interface LeaderContext {
  client: KubeClient;
  ruleSet: RuleSource['ruleSet'];
  bus: EventBus<LeaderEventMap>;
  logger: Logger;
}

/**
 * The leader-only runnables (needLeaderElection() = true). Empty for now:
 * the audit controller (PolicyReports, actions, alerts, rule status) plugs in
 * here. Each gets the term in start(signal, term) and must call
 * `term.assertValid()` immediately before every side effect.
 */
export function leaderRunnables(_ctx: LeaderContext): Runnable[] {
  return [];
}

export interface ReplicaOptions {
  config: Readonly<ServeConfig>;
  root: Logger;
  env: Readonly<Record<string, string | undefined>>;
  /** Aborts on the first SIGTERM/SIGINT: graceful shutdown. */
  signal: AbortSignal;
  /** Aborts on the second one: stop waiting for runnables. */
  force: AbortSignal;
  /** Receives problems that are configuration errors (exit code 2). */
  usage: (title: string, problems: readonly string[]) => void;
  /** Receives a one-line, human explanation of a start-up failure (exit code 1), besides the log. */
  failure?: (message: string) => void;
}

type Source = { kind: 'files'; source: FileRuleSource } | { kind: 'cluster'; source: ClusterRuleSource; client: KubeClient };

async function chooseSource(o: ReplicaOptions, log: Logger): Promise<Source | { problems: string[] }> {
  const { config } = o;
  if (config.policies !== '') {
    const source = new FileRuleSource(config.policies, loadRulesFromDirectory);
    const problems = await source.load();
    return problems.length > 0 ? { problems: problems.map((p) => `${p.source}: ${p.message}`) } : { kind: 'files', source };
  }
  const inCluster = config.kubeconfig === '' && (o.env.KUBERNETES_SERVICE_HOST ?? '') !== '';
  let client: KubeClient;
  try {
    client = createKubeClient({
      ...(inCluster ? { inCluster: true } : { kubeconfigPath: config.kubeconfig }),
      qps: config.kubeApiQps,
      burst: config.kubeApiBurst,
      userAgent: `portal/${VERSION} (${config.podName})`,
    });
  } catch (err) {
    return { problems: [(err as Error).message] };
  }
  log.info({ [LogKey.url]: client.server, inCluster }, 'cluster mode: rules and namespace labels from the API server');
  return { kind: 'cluster', client, source: new ClusterRuleSource({ client, logger: componentLogger(o.root, 'rules') }) };
}

/** A Runnable that keeps an already-listening server until its signal aborts, then closes it. */
function serverRunnable(name: string, server: FastifyInstance, alsoRun?: (signal: AbortSignal) => Promise<void>): Runnable {
  return {
    name,
    async start(signal) {
      const extra = alsoRun?.(signal);
      if (!signal.aborted) await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      // In-flight requests finish; new connections are refused.
      await Promise.allSettled([server.close(), ...(extra ? [extra] : [])]);
    },
  };
}

/** Runs one replica until `signal` aborts; returns the exit code. */
export async function runReplica(o: ReplicaOptions): Promise<number> {
  const { config, root } = o;
  const log = componentLogger(root, 'serve');

  const chosen = await chooseSource(o, log);
  if ('problems' in chosen) {
    o.usage(config.policies !== '' ? 'invalid rules' : 'cannot use the cluster', chosen.problems);
    return EXIT_USAGE;
  }
  const source: RuleSource = chosen.source;

  let selfSignedDir: string | undefined;
  /** The replica's one transport for leader-only writes; closed after the Manager stopped. */
  let writer: FencedWriter | undefined;
  try {
    let tlsFiles: TlsFiles = { certFile: config.tlsCertFile, keyFile: config.tlsKeyFile };
    if (config.selfSigned) {
      selfSignedDir = await mkdtemp(join(tmpdir(), 'portal-serve-'));
      const files = await writeSelfSigned(selfSignedDir, ['localhost', config.podName], ['127.0.0.1', '::1']);
      tlsFiles = files;
      log.info({ [LogKey.dir]: selfSignedDir, caFile: files.caFile }, 'generated a self-signed certificate (local use only)');
    }

    const registry = new Registry();
    const metrics = createAdmissionMetrics(registry);
    metrics.rulesLoaded.set(source.ruleSet.size);
    const gate = new ReadinessGate();
    gate.addCheck('rules', () => source.ready() || source.notReadyReason());
    const liveness = new HealthChecks();
    const debugVars = new DebugVars();
    debugVars.register('admission', () => ({ rules: source.ruleSet.size, ready: gate.status(), recentErrors: gate.errorRatio() }));
    debugVars.register('rules', () =>
      source.ruleSet.states().map((s) => ({ key: s.key, ready: s.ready, reason: s.reason, message: s.message, generation: s.generation, enforcement: s.enforcement })),
    );

    let tls: Awaited<ReturnType<typeof readTlsFiles>>;
    let webhook: ReturnType<typeof buildAdmissionServer>;
    try {
      // The pair was checked with the configuration; this catches a file
      // replaced in between, which would otherwise throw out of the server factory.
      tls = await readTlsFiles(tlsFiles);
      webhook = buildAdmissionServer({
        tls,
        decide: engineDecider(source.ruleSet),
        gate,
        exemptNamespaces: config.exemptNamespaces,
        namespaceLabels: source.namespaceLabels,
        metrics,
        logger: componentLogger(root, 'admission'),
      });
    } catch (err) {
      o.usage('cannot use the serving certificate', [`${tlsFiles.certFile} / ${tlsFiles.keyFile}: ${(err as Error).message}`]);
      return EXIT_USAGE;
    }
    const probes = buildProbesServer({ registry, gate, liveness, debugVars, logger: componentLogger(root, 'probes') });

    let election: LeaderElector | undefined;
    let audit: Audit | undefined;
    const leaderOnly: Runnable[] = [];
    if (chosen.kind === 'cluster') {
      debugVars.register('informers', () => chosen.source.informerStats());
      const bus = new EventBus<LeaderEventMap>((event, err) => log.error({ [LogKey.error]: err, event }, 'leader event listener failed'));
      try {
        election = new LeaderElector(
          leaderElectionConfig({
            leaderElect: config.leaderElect,
            leaseName: config.leaseName,
            leaseNamespace: config.leaseNamespace,
            leaseDurationMs: config.leaseDuration,
            renewDeadlineMs: config.renewDeadline,
            retryPeriodMs: config.retryPeriod,
          }),
          { client: chosen.client, identity: makeIdentity(config.podName), logger: componentLogger(root, 'leader'), registry, bus },
        );
      } catch (err) {
        o.usage('invalid leader election settings', [(err as Error).message]);
        return EXIT_USAGE;
      }
      const elector = election;
      debugVars.register('leader_election', () => elector.debugVars());
      liveness.add('leader-election', () => elector.healthError() ?? true);
      leaderOnly.push(...leaderRunnables({ client: chosen.client, ruleSet: source.ruleSet, bus, logger: componentLogger(root, 'leader-only') }));
      // The audit runs on every replica (warm on followers); its side effects are fenced by the elector's term.
      writer = new FencedWriter({ kubeConfig: chosen.client.kubeConfig, userAgent: chosen.client.userAgent });
      audit = buildAudit(
        {
          installNamespace: config.installNamespace,
          exemptNamespaces: config.exemptNamespaces,
          auditIntervalMs: config.auditInterval,
          workers: config.auditWorkers,
          maxEvictionsPerMinute: config.maxEvictionsPerMinute,
          alertmanagerUrls: config.alertmanagerUrl,
          alertResendIntervalMs: config.alertResendInterval,
        },
        {
          client: chosen.client,
          writer,
          ruleSet: source.ruleSet,
          namespaceLabels: (ns) => chosen.source.namespaceLabels(ns),
          ruleObject: (s) => (s.namespace !== undefined ? chosen.source.rules.namespacedRules.get(s.name, s.namespace) : chosen.source.rules.clusterRules.get(s.name)),
          onNamespaceChange: (h) => chosen.source.namespaces.informer.onEvent((e) => h(e.object.metadata?.name ?? '')),
          logger: componentLogger(root, 'audit'),
          registry,
        },
      );
      const { evaluator, actuator } = audit;
      debugVars.register('audit', () => ({ ...evaluator.stats(), ...actuator.stats() }));
    }

    const manager = new Manager(
      { gracefulShutdownMs: config.shutdownGracePeriod },
      { logger: componentLogger(root, 'manager'), ...(election ? { election } : {}) },
    );
    manager.add(serverRunnable('probes', probes), 'probes');
    manager.add(
      serverRunnable('webhook', webhook, (signal) => watchTlsFiles({ ...tlsFiles, target: webhook.server, initial: tls, logger: componentLogger(root, 'tls') }, signal)),
      'webhook',
    );
    if (chosen.kind === 'cluster') for (const r of chosen.source.runnables()) manager.add(r, 'informers');
    else manager.add({ name: 'rule-files', start: (signal) => source.start(signal) }, 'informers');
    if (audit) manager.add(audit.evaluator, 'others').add(audit.actuator);
    // Wrapped (not spread) so class-based runnables keep their methods; the
    // seam's contract is that everything it returns is leader-only.
    for (const r of leaderOnly) manager.add({ name: r.name, start: (signal, term) => r.start(signal, term), needLeaderElection: () => true });

    let listening = '--probes-port';
    try {
      const probesUrl = await probes.listen({ port: config.probesPort, host: config.bindAddress });
      log.info({ [LogKey.url]: probesUrl }, 'probes listening');
      listening = '--webhook-port';
      const webhookUrl = await webhook.listen({ port: config.webhookPort, host: config.bindAddress });
      log.info({ [LogKey.url]: `${webhookUrl}/validate`, [LogKey.count]: source.ruleSet.size }, 'webhook listening');
    } catch (err) {
      log.error({ [LogKey.error]: err }, 'cannot start');
      o.failure?.(listenFailure(err, listening, config));
      await Promise.allSettled([webhook.close(), probes.close()]);
      return EXIT_FAILURE;
    }

    try {
      await manager.start(o.signal, { force: o.force });
    } catch (err) {
      log.error({ [LogKey.error]: err }, 'stopped after a failure');
      return EXIT_FAILURE;
    }
    // The Manager logs a shutdown that outlived the grace period itself; the
    // CLI's exit safety net (serve-command) covers handles it abandoned.
    if (o.force.aborted) return EXIT_FAILURE;
    log.info('stopped');
    return EXIT_OK;
  } finally {
    // Idempotent; after the Manager stopped nothing writes any more, so this only closes pooled sockets.
    await writer?.close();
    if (selfSignedDir) await rm(selfSignedDir, { recursive: true, force: true });
  }
}

/** What went wrong binding a port, and what to do about it. */
function listenFailure(err: unknown, flag: string, config: Readonly<ServeConfig>): string {
  const code = (err as NodeJS.ErrnoException).code;
  const port = flag === '--probes-port' ? config.probesPort : config.webhookPort;
  const where = `${config.bindAddress}:${port} (${flag})`;
  switch (code) {
    case 'EADDRINUSE':
      return `cannot listen on ${where}: the port is already in use; stop what uses it or give another ${flag}`;
    case 'EACCES':
      return `cannot listen on ${where}: permission denied; ports below 1024 need privileges, give another ${flag}`;
    case 'EADDRNOTAVAIL':
      return `cannot listen on ${where}: ${config.bindAddress} is not an address of this machine; fix --bind-address`;
    default:
      return `cannot listen on ${where}: ${(err as Error).message}`;
  }
}
