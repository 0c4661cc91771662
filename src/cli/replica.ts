/**
 * `portal serve`'s run: build the replica (src/manager/replica.ts, un-started),
 * listen, run until the signal, exit. Building, wiring and the start order
 * live in buildReplica; this file only maps outcomes to exit codes and
 * explains a port that cannot be bound.
 */
import type { ServeConfig } from '../config/options.ts';
import type { ShutdownOutcome } from '../manager/manager.ts';
import { buildReplica, ListenError } from '../manager/replica.ts';
import { LogKey } from '../observability/log-keys.ts';
import { registerLogMetrics, type LogOutput } from '../observability/log-output.ts';
import { componentLogger, type Logger } from '../observability/logger.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from './command.ts';
import { toError } from '../observability/errors.ts';
import { releaseThreadHeapFlags, replicaMemoryMiB } from './process-memory.ts';

export interface ReplicaOptions {
  config: Readonly<ServeConfig>;
  root: Logger;
  env: Readonly<Record<string, string | undefined>>;
  /** Where the log goes, for its metrics (`portal_log_lines_dropped_total`). */
  logOutput?: LogOutput;
  /** Aborts on the first SIGTERM/SIGINT: graceful shutdown. */
  signal: AbortSignal;
  /** Aborts on the second one: stop waiting for runnables. */
  force: AbortSignal;
  /** Receives problems that are configuration errors (exit code 2). */
  usage: (title: string, problems: readonly string[]) => void;
  /** Receives a one-line, human explanation of a start-up failure (exit code 1), besides the log. */
  failure?: (message: string) => void;
}

/** Runs one replica until `signal` aborts; returns the exit code. */
export async function runReplica(o: ReplicaOptions): Promise<number> {
  const log = componentLogger(o.root, 'serve');
  releaseThreadHeapFlags();
  const built = await buildReplica(o.config, { root: o.root, env: o.env, memoryMiB: replicaMemoryMiB() });
  if (!built.ok) {
    o.usage(built.title, built.problems);
    return EXIT_USAGE;
  }
  const { replica } = built;
  const output = o.logOutput;
  if (output) registerLogMetrics(replica.registry, () => output.dropped());
  try {
    try {
      await replica.listen();
    } catch (err) {
      o.failure?.(err instanceof ListenError ? listenFailure(err.cause, err.flag, o.config) : (err as Error).message);
      return EXIT_FAILURE;
    }
    let outcome: ShutdownOutcome;
    try {
      outcome = await replica.start(o.signal, { force: o.force });
    } catch (err) {
      log.error({ [LogKey.error]: toError(err) }, 'stopped after a failure');
      return EXIT_FAILURE;
    }
    if (outcome === 'forced' || o.force.aborted) return EXIT_FAILURE;
    if (outcome === 'timed-out') {
      // The Manager named the group it abandoned; what that group still holds
      // (a request in flight, a worker) would keep the process alive: the
      // CLI's exit safety net (serve-command) exits after the logs flushed.
      log.error({ [LogKey.graceMs]: o.config.shutdownGracePeriod }, 'shutdown outlived the grace period: exiting without waiting for the work still running');
      return EXIT_FAILURE;
    }
    log.info('stopped');
    return EXIT_OK;
  } finally {
    await replica.close();
  }
}

/** What went wrong binding a port, and what to do about it. */
function listenFailure(err: unknown, flag: ListenError['flag'], config: Readonly<ServeConfig>): string {
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
