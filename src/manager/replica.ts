/**
 * buildReplica(config): the composition root of `portal serve`, in
 * fastify's factory style — it builds every piece from the frozen
 * ServeConfig and returns an UN-STARTED replica. The CLI then only listens,
 * starts and exits; tests can build one, listen on port 0 and look inside.
 *
 * Who starts what (docs/architecture.md):
 * - `listen()` binds the probes server, then the webhook (a port in use is a
 *   start-up failure, not a restart loop);
 * - `start(signal)` runs the Manager: probes → webhook → informers (sync
 *   awaited) → others (the audit evaluation) → the election; the Manager
 *   starts the leader-only group (the audit actuator) on the elector's
 *   BecameLeader and cancels it on LostLeadership. Stop order is the reverse,
 *   bounded by --shutdown-grace-period;
 * - `close()` (idempotent) releases what the Manager does not own: servers
 *   never started, the FencedWriter, a self-signed certificate directory.
 *
 * Modes: file-mode.ts (`--policies DIR`) and cluster-mode.ts.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Registry, type Counter } from 'prom-client';
import { DenialLog } from '../admission/denial-log.ts';
import { TokenBucket } from '../kube/rate-limiter.ts';
import { writeSelfSigned } from '../admission/certs.ts';
import { kindLabeler } from '../admission/kind-label.ts';
import { HealthChecks, buildProbesServer } from '../admission/probes.ts';
import { ReadinessGate } from '../admission/readiness.ts';
import { timeoutLimits } from '../admission/limits.ts';
import { buildAdmissionServer } from '../admission/server.ts';
import { readTlsFiles, watchTlsFiles, type TlsFiles } from '../admission/tls-reload.ts';
import { AVAILABLE_CPUS, type ServeConfig } from '../config/options.ts';
import { EvaluationPool } from '../evaluation/pool.ts';
import { admissionRequestMs, pipelineFor } from '../evaluation/pool-config.ts';
import { RuleChecks } from '../evaluation/rule-check.ts';
import { builtinSchemas } from '../policy/kind-schemas/catalogue.ts';
import { DebugVars } from '../observability/debug-vars.ts';
import { RuntimeStats } from '../observability/runtime-stats.ts';
import { portalKinds, type PortalKind } from '../policy/portal-kinds.ts';
import { LogKey } from '../observability/log-keys.ts';
import { componentLogger, type Logger } from '../observability/logger.ts';
import { createAdmissionMetrics, registerCelFallbacks, registerReadiness, registerRulesNotReady } from '../observability/metrics.ts';
import { PER_CALL_COST_LIMIT, type RuleSet } from '../policy/index.ts';
import { exemptNamespaces, type ExemptNamespaces } from '../policy/review/answer.ts';
import { clusterMode } from './cluster-mode.ts';
import { fileMode } from './file-mode.ts';
import { bindRuleSeries } from './rule-series.ts';
import type { RuleStats } from '../evaluation/rule-stats.ts';
import { Manager, type ShutdownOutcome } from './manager.ts';
import { evaluationMemory, type EvaluationMemory } from './evaluation-memory.ts';
import { exceptionOptions, type BuildProblems, type Mode, type ModeRunnable } from './mode.ts';
import type { Runnable } from '../util/runnable.ts';
import { toError } from '../observability/errors.ts';

export interface ReplicaDeps {
  root: Logger;
  /** Environment (in-cluster detection); the replica never reads `process.env`. */
  env: Readonly<Record<string, string | undefined>>;
  /** The replica's memory in MiB (its cgroup limit, else the machine's; the CLI reads it), from which the evaluation threads' limits are derived. @default the machine's */
  memoryMiB?: number;
}

export interface Replica {
  readonly mode: Mode['kind'];
  readonly manager: Manager;
  readonly registry: Registry;
  /** Binds probes, then the webhook. Rejects with the listen error (`flag` says which port). */
  listen(): Promise<{ probes: string; webhook: string }>;
  /** Runs the Manager until `signal` aborts; resolves to how its shutdown ended (see Manager.start). */
  start(signal: AbortSignal, options?: { force?: AbortSignal }): Promise<ShutdownOutcome>;
  /** Idempotent. */
  close(): Promise<void>;
}

export class ListenError extends Error {
  constructor(
    readonly flag: '--probes-port' | '--webhook-port',
    cause: unknown,
  ) {
    super(`cannot listen (${flag}): ${(cause as Error).message}`, { cause });
  }
}

export type BuildResult = { ok: true; replica: Replica } | ({ ok: false } & BuildProblems);

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

/** Admission evaluates in worker threads with a hard deadline (adr/0013); threads start with the Manager. */
function admissionEvaluation(config: Readonly<ServeConfig>, mode: Mode, exempt: ExemptNamespaces, memory: EvaluationMemory, root: Logger, registry: Registry, ruleStats: RuleStats): EvaluationPool {
  const { source, ruleProblems } = mode;
  return new EvaluationPool(
    {
      name: 'admission',
      workers: config.evaluationWorkers,
      pipeline: pipelineFor(AVAILABLE_CPUS),
      timeoutMs: config.evaluationTimeout,
      // Queue and evaluations together stay inside the webhook's timeout (pool-config.ts).
      requestMs: admissionRequestMs(config.evaluationTimeout),
      exempt,
      memory: memory.threads,
    },
    // Namespace labels travel to the workers like the rules: they answer whole reviews.
    { rules: source.ruleSet, namespaces: source.namespaceStore, poison: memory.poison },
    {
      logger: componentLogger(root, 'evaluation'),
      registry,
      ruleStats,
      onRuleError: (v, input) => ruleProblems.verdictError('admission', v, { kind: input.kind.kind, namespace: input.namespace, name: input.name, operation: input.operation }),
    },
  );
}

/**
 * What the webhook for Portal's own kinds checks (adr/0011): a rule's check on a thread of its own, queued per
 * namespace (issue 31 item 5, adr/0020; started with the Manager's first group); a PortalException's on this thread.
 */
function portalKindChecks(config: Readonly<ServeConfig>, mode: Mode, memory: EvaluationMemory, root: Logger, on: { registry: Registry; debugVars: DebugVars }): { kinds: Readonly<Record<string, PortalKind>>; checks: RuleChecks; runnable: ModeRunnable } {
  const schemas = mode.kindSchemas ?? builtinSchemas();
  const checks = new RuleChecks({ webhookTimeoutMs: config.webhookTimeout, memory: memory.threads }, { logger: componentLogger(root, 'evaluation'), registry: on.registry, schemas });
  on.debugVars.register('rule_check', () => checks.stats());
  const runnable: ModeRunnable = { runnable: { name: 'rule-check', start: (signal) => checks.start(signal) }, group: 'probes' };
  return { kinds: portalKinds(exceptionOptions(config), schemas, checks.check), checks, runnable };
}

/** /debug/vars and the readiness and rules gauges of admission. */
function registerAdmissionState(debugVars: DebugVars, rules: RuleSet, gate: ReadinessGate, evaluation: EvaluationPool, registry: Registry): void {
  registerReadiness(registry, () => gate.status().ready, () => gate.errorGateTripped());
  registerRulesNotReady(registry, () => rules.states().filter((s) => !s.ready).length);
  registerCelFallbacks(registry, () => rules.celCosts().map((r) => ({ rule: r.key, expressions: r.expressions.filter((e) => e.fallback !== undefined).length })));
  debugVars.register('admission', () => ({ rules: rules.size, ready: gate.status(), recentErrors: gate.errorRatio(), evaluation: evaluation.stats() }));
  debugVars.register('rules', () => rules.states().map((s) => ({ key: s.key, ready: s.ready, reason: s.reason, message: s.message, generation: s.generation, enforcement: s.enforcement })));
}

/** Denied requests' log lines: at most 20 a second, bursts of 100 (a day of kubectl traffic fits; a deny loop does not flood the log). */
function denialLog(log: Logger, notLogged: Counter): DenialLog {
  return new DenialLog({ log, pacer: new TokenBucket({ qps: 20, burst: 100 }), notLogged });
}

/** Where a denied request goes: its log line, and its Event when `--denial-events` is on (each never throws). */
function denials(lines: DenialLog, events: Mode['denialEvents']): Pick<DenialLog, 'denied'> {
  if (events === undefined) return lines;
  return { denied: (out) => (lines.denied(out), events.denied(out)) };
}

/** The replica's own registry (never the global one), with the standard process_* and nodejs_* series (CPU, memory, heap, event-loop lag, GC). */
function replicaRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // Gauges named like counters, which `promtool check metrics` rejects; the same counts without the suffix stay.
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) registry.removeSingleMetric(name);
  return registry;
}

export async function buildReplica(config: Readonly<ServeConfig>, deps: ReplicaDeps): Promise<BuildResult> {
  const { root } = deps;
  const log = componentLogger(root, 'serve');
  const registry = replicaRegistry();
  const liveness = new HealthChecks();
  const debugVars = new DebugVars();
  const metrics = createAdmissionMetrics(registry);
  const memory = await evaluationMemory(config, deps.memoryMiB ?? Math.floor(totalmem() / 1048576), componentLogger(root, 'evaluation'));
  const mode =
    config.policies !== ''
      ? await fileMode(config.policies, registry, exceptionOptions(config))
      : clusterMode(config, { root, env: deps.env, registry, liveness, debugVars, rulesLoaded: metrics.rulesLoaded, evaluationMemory: memory });
  if (!('kind' in mode)) return { ok: false, ...mode };
  const { source } = mode;

  let selfSignedDir: string | undefined;
  const cleanup = async () => {
    await mode.close();
    if (selfSignedDir) await rm(selfSignedDir, { recursive: true, force: true });
  };
  let tlsFiles: TlsFiles = { certFile: config.tlsCertFile, keyFile: config.tlsKeyFile, caFile: config.clientCaFile };
  let tls: Awaited<ReturnType<typeof readTlsFiles>>;
  metrics.rulesLoaded.set(source.ruleSet.size);
  const exempt = exemptNamespaces(config.exemptNamespaces); // one set: the pool, its workers and the server's own answers
  const evaluation = admissionEvaluation(config, mode, exempt, memory, root, registry, bindRuleSeries(registry, source.ruleSet, metrics.exceptionsApplied));
  const own = portalKindChecks(config, mode, memory, root, { registry, debugVars });
  const gate = new ReadinessGate({ maxAgeMs: config.readinessErrorMaxAge });
  gate.addCheck('rules', () => source.ready() || source.notReadyReason());
  gate.addCheck('evaluation', () => evaluation.ready() || evaluation.notReadyReason());
  let webhook: ReturnType<typeof buildAdmissionServer>;
  try {
    if (config.selfSigned) {
      selfSignedDir = await mkdtemp(join(tmpdir(), 'portal-serve-'));
      const files = await writeSelfSigned(selfSignedDir, ['localhost', config.podName], ['127.0.0.1', '::1']);
      tlsFiles = { ...files, caFile: config.clientCaFile };
      log.info({ [LogKey.dir]: selfSignedDir, [LogKey.caFile]: files.caFile }, 'generated a self-signed certificate (local use only)');
    }
    // The pair was checked with the configuration; this catches a file
    // replaced in between, which would otherwise throw out of the server factory.
    tls = await readTlsFiles(tlsFiles);
    webhook = buildAdmissionServer({
      tls,
      // While ready, the whole review is read and answered in a worker: the main thread parses nothing.
      answerReview: (body, peer) => evaluation.review(body, peer),
      limits: { ...timeoutLimits(config.webhookTimeout), maxConnections: config.webhookMaxConnections, maxPerPeer: config.webhookMaxConnectionsPerPeer },
      gate,
      exempt,
      metrics,
      kindLabel: kindLabeler(source.ruleSet),
      portalKinds: own.kinds,
      logger: componentLogger(root, 'admission'), denials: denials(denialLog(componentLogger(root, 'admission'), metrics.denialsNotLogged), mode.denialEvents),
    });
  } catch (err) {
    await cleanup();
    return { ok: false, title: 'cannot use the serving certificate', problems: [`${tlsFiles.certFile} / ${tlsFiles.keyFile}: ${(err as Error).message}`] };
  }
  registerAdmissionState(debugVars, source.ruleSet, gate, evaluation, registry);
  const probes = buildProbesServer({ registry, gate, liveness, debugVars, logger: componentLogger(root, 'probes') });

  const manager = new Manager({ gracefulShutdownMs: config.shutdownGracePeriod }, { logger: componentLogger(root, 'manager'), ...(mode.election ? { election: mode.election } : {}) });
  manager.add(serverRunnable('probes', probes), 'probes');
  // In the first group, so it stops after the webhook: requests in flight at shutdown still get their evaluation.
  manager.add({ name: 'evaluation-admission', start: (signal) => evaluation.start(signal) }, 'probes');
  manager.add(
    serverRunnable('webhook', webhook, (signal) => watchTlsFiles({ ...tlsFiles, target: webhook.server, initial: tls, logger: componentLogger(root, 'tls') }, signal)),
    'webhook',
  );
  for (const { runnable, group } of [...mode.runnables, ...memory.runnables, own.runnable]) manager.add(runnable, group);
  // Estimated worst-case CEL cost per expression, and which run on cel-js instead of generated code (issue 19).
  debugVars.register('cel', () => ({ perExpressionLimit: PER_CALL_COST_LIMIT, rules: source.ruleSet.celCosts() }));
  debugVars.register('manager', () => manager.describe());
  // GC pauses and event-loop delay of the main thread: what stalls admission at a fixed rate (bench/admission.ts reads it).
  const runtime = new RuntimeStats();
  manager.add(runtime, 'probes');
  debugVars.register('runtime', () => runtime.snapshot());

  const replica = replicaOf({ config, log, mode: mode.kind, manager, registry, probes, webhook, pools: [evaluation, own.checks], rules: source.ruleSet, cleanup });
  return { ok: true, replica };
}

interface ReplicaParts {
  config: Readonly<ServeConfig>;
  log: Logger;
  mode: Replica['mode'];
  manager: Manager;
  registry: Registry;
  probes: ReturnType<typeof buildProbesServer>;
  webhook: ReturnType<typeof buildAdmissionServer>;
  /** The thread pools the Manager starts (and closes): closed here when it never started. */
  pools: { close(): Promise<void> }[];
  rules: { readonly size: number };
  cleanup: () => Promise<void>;
}

/** The built replica's handle: listen on the configured ports, start the Manager, close what was never started. */
function replicaOf({ config, log, mode, manager, registry, probes, webhook, pools, rules, cleanup }: ReplicaParts): Replica {
  let started = false;
  let closed: Promise<void> | undefined;
  const replica: Replica = {
    mode,
    manager,
    registry,
    async listen() {
      let flag: ListenError['flag'] = '--probes-port';
      try {
        const probesUrl = await probes.listen({ port: config.probesPort, host: config.bindAddress });
        log.info({ [LogKey.url]: probesUrl }, 'probes listening');
        flag = '--webhook-port';
        const webhookUrl = await webhook.listen({ port: config.webhookPort, host: config.bindAddress });
        log.info({ [LogKey.url]: `${webhookUrl}/validate`, [LogKey.count]: rules.size }, 'webhook listening');
        return { probes: probesUrl, webhook: webhookUrl };
      } catch (err) {
        log.error({ [LogKey.error]: toError(err) }, 'cannot start');
        throw new ListenError(flag, err);
      }
    },
    async start(signal, options = {}) {
      started = true;
      return manager.start(signal, options);
    },
    close() {
      closed ??= (async () => {
        // A started Manager closed the servers (and the pool) itself; otherwise nobody did.
        if (!started) await Promise.allSettled([webhook.close(), probes.close(), ...pools.map((p) => p.close())]);
        await cleanup();
      })();
      return closed;
    },
  };
  return replica;
}
