/**
 * `portal serve`: one replica. This issue wires the standalone mode
 * (`--policies DIR`: rules from files, no cluster, no audit, no election);
 * cluster mode plugs in through {@link ruleSourceFor}.
 *
 * Start order (controller-runtime's): probes → webhook → rule source; stop
 * order the reverse, bounded by --shutdown-grace-period. A second SIGINT or
 * SIGTERM exits at once.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DestinationStream } from 'pino';
import { Registry } from 'prom-client';
import { writeSelfSigned } from '../admission/certs.ts';
import { engineDecider } from '../admission/engine-decider.ts';
import { HealthChecks, buildProbesServer } from '../admission/probes.ts';
import { ReadinessGate } from '../admission/readiness.ts';
import { FileRuleSource, type RuleSource } from '../admission/rule-source.ts';
import { buildAdmissionServer } from '../admission/server.ts';
import { readTlsFiles, watchTlsFiles, type TlsFiles } from '../admission/tls-reload.ts';
import { loadServeConfig, serveHelp } from '../config/load.ts';
import { loadRulesFromDirectory } from '../config/manifests.ts';
import { META_FLAGS, SERVE_OPTIONS, type ServeConfig } from '../config/options.ts';
import { DebugVars } from '../observability/debug-vars.ts';
import { LogKey } from '../observability/log-keys.ts';
import { componentLogger, createLogger, type Logger } from '../observability/logger.ts';
import { createAdmissionMetrics } from '../observability/metrics.ts';
import { parseArgs, type FlagDef } from './args.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type Command, type CommandIO } from './command.ts';

const FLAG_DEFS: FlagDef[] = [
  ...SERVE_OPTIONS.map((o): FlagDef => ({ flag: o.flag, type: o.type === 'bool' ? 'bool' : 'value' })),
  ...META_FLAGS.map((o): FlagDef => ({ flag: o.flag, type: o.type === 'bool' ? 'bool' : 'value' })),
];

export const serveCommand: Command = {
  async run(argv, io) {
    const args = parseArgs(argv, FLAG_DEFS, 'portal serve');
    if (args.values.has('help')) {
      io.stdout.write(serveHelp());
      return EXIT_OK;
    }
    const problems = [...args.problems];
    if (args.positionals.length > 0) problems.push(`unexpected argument ${JSON.stringify(args.positionals[0])}; portal serve takes only flags`);
    const configFile = args.values.get('config')?.at(-1);
    const loaded = loadServeConfig({ flags: args.values, ...(configFile !== undefined ? { configFile } : {}), env: io.env, hostname: hostname(), cwd: io.cwd });
    if (!loaded.ok) problems.push(...loaded.problems);
    if (problems.length > 0 || !loaded.ok) return usage(io, 'configuration problems', problems);
    return serve(loaded.config, io);
  },
};

function usage(io: CommandIO, title: string, problems: readonly string[]): number {
  io.stderr.write(`portal serve: ${title}:\n${problems.map((p) => `  - ${p}`).join('\n')}\n`);
  return EXIT_USAGE;
}

/**
 * The rule source for this configuration. Cluster mode (`--kubeconfig`
 * without `--policies`: rules from PortalRule/PortalClusterRule informers,
 * namespace labels from a Namespace informer) is the seam the lead wires.
 */
async function ruleSourceFor(config: ServeConfig): Promise<{ source: RuleSource } | { problems: string[] }> {
  if (config.policies !== '') {
    const source = new FileRuleSource(config.policies, loadRulesFromDirectory);
    const problems = await source.load();
    return problems.length > 0 ? { problems: problems.map((p) => `${p.source}: ${p.message}`) } : { source };
  }
  return { problems: ['cluster mode (--kubeconfig without --policies) is not wired yet; give --policies DIR'] };
}

async function serve(config: ServeConfig, io: CommandIO): Promise<number> {
  const root = createLogger({ level: config.logLevel, destination: io.stdout as unknown as DestinationStream, base: { pod: config.podName } });
  const log = componentLogger(root, 'serve');

  const chosen = await ruleSourceFor(config);
  if ('problems' in chosen) return usage(io, 'invalid rules', chosen.problems);
  const { source } = chosen;

  let selfSignedDir: string | undefined;
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
  debugVars.register('rules', () => source.ruleSet.states().map((s) => ({ key: s.key, ready: s.ready, reason: s.reason, enforcement: s.enforcement })));

  const tls = await readTlsFiles(tlsFiles);
  const webhook = buildAdmissionServer({
    tls,
    decide: engineDecider(source.ruleSet),
    gate,
    exemptNamespaces: config.exemptNamespaces,
    namespaceLabels: source.namespaceLabels,
    metrics,
    logger: componentLogger(root, 'admission'),
  });
  const probes = buildProbesServer({ registry, gate, liveness, debugVars, logger: componentLogger(root, 'probes') });

  const ac = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    if (ac.signal.aborted) {
      log.warn({ [LogKey.signal]: signal }, 'second signal: exiting now');
      process.exit(EXIT_FAILURE);
    }
    log.info({ [LogKey.signal]: signal }, 'shutting down');
    ac.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const running: Promise<void>[] = [];
  try {
    const probesUrl = await probes.listen({ port: config.probesPort, host: config.bindAddress });
    log.info({ [LogKey.url]: probesUrl }, 'probes listening');
    const webhookUrl = await webhook.listen({ port: config.webhookPort, host: config.bindAddress });
    log.info({ [LogKey.url]: `${webhookUrl}/validate`, [LogKey.count]: source.ruleSet.size }, 'webhook listening');
    running.push(
      watchTlsFiles({ ...tlsFiles, target: webhook.server, initial: tls, logger: componentLogger(root, 'tls') }, ac.signal),
      source.start(ac.signal),
    );
  } catch (err) {
    log.error({ [LogKey.error]: err }, 'cannot start');
    ac.abort();
    await Promise.allSettled([webhook.close(), probes.close(), ...running]);
    await cleanup();
    return EXIT_FAILURE;
  }

  await new Promise<void>((resolve) => ac.signal.addEventListener('abort', () => resolve(), { once: true }));
  let timer: NodeJS.Timeout | undefined;
  const timedOut = await Promise.race([
    (async () => {
      // Reverse of the start order: stop taking admission traffic (in-flight
      // requests finish), then the sources, then the probes.
      await webhook.close();
      await Promise.allSettled(running);
      await probes.close();
      return false;
    })(),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), config.shutdownGracePeriod);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
  await cleanup();
  if (timedOut) {
    log.error({ durationMs: config.shutdownGracePeriod }, 'graceful shutdown timed out');
    return EXIT_FAILURE;
  }
  log.info('stopped');
  return EXIT_OK;

  async function cleanup(): Promise<void> {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    if (selfSignedDir) await rm(selfSignedDir, { recursive: true, force: true });
  }
}

export type { Logger };
