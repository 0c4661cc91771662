/**
 * `portal serve`: one replica. Parses and validates the configuration, owns
 * the signals (the first SIGINT/SIGTERM starts a graceful shutdown bounded
 * by --shutdown-grace-period, a second exits at once) and hands the rest to
 * the composition root in replica.ts (file mode with --policies, cluster
 * mode with --kubeconfig or in-cluster config).
 */
import { hostname } from 'node:os';
import { loadServeConfig, serveHelp } from '../config/load.ts';
import type { ServeConfig } from '../config/options.ts';
import { LogKey } from '../observability/log-keys.ts';
import { LogOutput } from '../observability/log-output.ts';
import { componentLogger, createLogger, type Logger } from '../observability/logger.ts';
import { parseArgs } from '../config/args.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type Command, type CommandIO } from './command.ts';
import { runReplica } from './replica.ts';
import { formatProblems, SERVE_FLAG_DEFS } from './serve-flags.ts';

export const serveCommand: Command = {
  // Admission does not depend on the log: the replica goes on without it.
  output: { kind: 'log', who: 'portal serve', goesOn: 'the replica goes on' },
  async run(argv, io) {
    const args = parseArgs(argv, SERVE_FLAG_DEFS, 'portal serve');
    if (args.values.has('help')) {
      io.stdout.write(serveHelp());
      return EXIT_OK;
    }
    const problems = [...args.problems];
    // A word after an unknown flag was already explained with that flag.
    const unexpected = args.positionals.filter((p) => !args.strays.includes(p));
    if (unexpected.length > 0) problems.push(`unexpected argument ${JSON.stringify(unexpected[0])}; portal serve takes only flags`);
    const configFile = args.values.get('config')?.at(-1);
    const loaded = loadServeConfig({ flags: args.values, ...(configFile !== undefined ? { configFile } : {}), env: io.env, hostname: hostname(), cwd: io.cwd });
    if (!loaded.ok) problems.push(...loaded.problems);
    if (problems.length > 0 || !loaded.ok) return usage(io, 'configuration problems', problems);
    return serve(loaded.config, io);
  },
};

function usage(io: CommandIO, title: string, problems: readonly string[]): number {
  io.stderr.write(`portal serve: ${title}:\n${formatProblems(problems)}`);
  return EXIT_USAGE;
}

async function serve(config: ServeConfig, io: CommandIO): Promise<number> {
  // The logger writes to the output, and says through it what the output dropped.
  const reporter: { log?: Logger } = {};
  const output = new LogOutput({
    // The descriptor of io.stdout: main.ts created process.stdout for it, which made a pipe non-blocking (log-output.ts).
    fd: STDOUT_FD,
    onFailed: (err) => io.output.failed('stdout', err),
    onCaughtUp: (dropped) => reporter.log?.warn({ [LogKey.droppedLines]: dropped }, `the log reader fell behind: ${dropped} log lines were dropped`),
  });
  const root = createLogger({ level: config.logLevel, destination: output, base: { pod: config.podName } });
  const log = componentLogger(root, 'serve');
  reporter.log = log;
  const graceful = new AbortController();
  const force = new AbortController();
  let deadline: { at: number; timer: NodeJS.Timeout } | undefined;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (graceful.signal.aborted) {
      log.warn({ [LogKey.signal]: signal }, 'second signal: exiting now');
      force.abort();
      exitAfterLog(output, EXIT_FAILURE);
      return;
    }
    log.info({ [LogKey.signal]: signal }, 'shutting down');
    graceful.abort();
    // The grace period bounds the shutdown, whatever still holds the process
    // (a write the API server never answers, a stuck close): past it and the
    // time to flush the logs, exit without waiting for anything. The Manager
    // bounds its own part by the grace period, so this fires only when the run
    // does not return (what runs after the Manager: closing the replica).
    const timer = setTimeout(() => {
      log.error({ [LogKey.graceMs]: config.shutdownGracePeriod }, 'shutdown outlived the grace period: exiting now');
      exitAfterLog(output, EXIT_FAILURE);
    }, config.shutdownGracePeriod + EXIT_FLUSH_MS - LAST_LINES_MS).unref();
    deadline = { at: Date.now() + config.shutdownGracePeriod + EXIT_FLUSH_MS, timer };
  };
  // Started by `portal dev` with an IPC channel: when dev dies, even by
  // SIGKILL, the channel closes and this replica shuts down like on SIGTERM,
  // so no replica outlives its supervisor (it runs in its own process group).
  const onParentGone = (): void => onSignal('SIGTERM');
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // process.send exists when this process was spawned with an IPC channel,
  // and stays after the channel closed.
  if (typeof process.send === 'function') {
    process.once('disconnect', onParentGone);
    process.channel?.unref();
    // dev may have died while this process was still loading its modules:
    // the 'disconnect' event has then already been emitted, to nobody.
    if (!process.connected) onParentGone();
  }
  let code = EXIT_FAILURE;
  try {
    code = await runReplica({
      config,
      root,
      env: io.env,
      logOutput: output,
      signal: graceful.signal,
      force: force.signal,
      usage: (title, problems) => usage(io, title, problems),
      failure: (message) => io.stderr.write(`portal serve: ${message}\n`),
    });
    return code;
  } finally {
    // Still handled meanwhile: a second signal exits at once, not by the signal's default.
    await exitWindow(output, graceful.signal.aborted ? deadline : undefined, code, io);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('disconnect', onParentGone);
  }
}

/**
 * The run returned: the log reaches its reader, for at most the time left
 * to flush (and never past the shutdown deadline), then is given up so that
 * nothing of it holds the process. After a signal, a safety net: a runnable
 * abandoned after the grace period may still hold a socket open; exit
 * regardless when the window closes, with the run's code (it logged why),
 * not the deadline's; one timer (no race between two exits).
 */
async function exitWindow(output: LogOutput, deadline: { at: number; timer: NodeJS.Timeout } | undefined, code: number, io: CommandIO): Promise<void> {
  clearTimeout(deadline?.timer);
  const closes = Math.min(Date.now() + EXIT_FLUSH_MS, deadline?.at ?? Infinity);
  if (!(await output.settle(closes - Date.now()))) io.stderr.write('portal serve: the log reader did not take the last lines of the log in time: they are lost\n');
  if (deadline) setTimeout(() => process.exit(code), Math.max(0, closes - Date.now())).unref();
}

/**
 * Exits with `code` once the log's last lines are written, or after
 * LAST_LINES_MS if the reader does not take them. Every process.exit of
 * serve goes through here or follows exitWindow: lines still buffered when
 * the process exits are lost (sonic-boom's synchronous flush is not used:
 * it retries a broken pipe forever).
 */
function exitAfterLog(output: LogOutput, code: number): void {
  void output.settle(LAST_LINES_MS).then(() => process.exit(code));
}

/**
 * The wait for the last lines of an exit that was asked for now (a second
 * signal, the grace period outlived): a reader that reads takes them in
 * well under a millisecond; this only bounds the wait for one that does not.
 */
const LAST_LINES_MS = 250;

/** stdout's descriptor, where the log goes. */
const STDOUT_FD = 1;

/** Time for stdout to drain before a forced exit after shutdown. */
const EXIT_FLUSH_MS = 2000;

export type { Logger };
