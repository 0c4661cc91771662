/**
 * `portal dev`: flags, signals and exit codes around runDev, from the
 * separate package @portal/devcluster (packages/devcluster, ADR 0015): the
 * product never imports it statically, and where it is not installed (the
 * container image, `npm ci --omit=dev`) `portal dev` says how to get it.
 * Ctrl-C / SIGTERM stop everything cleanly; a second signal is ignored while
 * the replicas drain (they get SIGKILL after --grace-period anyway).
 */
import { fileURLToPath } from 'node:url';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from '../config/args.ts';
import { EXIT_OK, EXIT_USAGE, type Command, type CommandIO } from './command.ts';
import { RESULT_OUTPUT } from './output-policy.ts';
import { SERVE_FLAG_DEFS } from './serve-flags.ts';
import type * as DevClusterModule from '@portal/devcluster';

const packageRoot = fileURLToPath(new URL('../..', import.meta.url));

// Type-only (erased): the package itself is loaded by the import() below, when present.
type DevCluster = typeof DevClusterModule;
type DevOptions = DevClusterModule.DevOptions;
type LockResult = DevClusterModule.LockResult;

/** The dev cluster package, or undefined when it is not installed. */
async function loadDevCluster(): Promise<DevCluster | undefined> {
  try {
    return await import('@portal/devcluster');
  } catch (err) {
    const e = err as { code?: string; message?: string };
    if (e.code === 'ERR_MODULE_NOT_FOUND' && e.message?.includes('@portal/devcluster')) return undefined;
    throw err;
  }
}

export const NOT_INSTALLED =
  'the dev cluster (package @portal/devcluster) is not installed: it is a development tool, left out of the image and of `npm ci --omit=dev`. ' +
  'Run `npm install` in a Portal checkout, then `npm start` or `portal dev`.';

export const devCommand: Command = {
  // Its status lines are what the developer reads: as `portal test`'s.
  output: RESULT_OUTPUT,
  async run(argv, io) {
    const dc = await loadDevCluster();
    if (dc === undefined) {
      io.stderr.write(`portal dev: ${NOT_INSTALLED}
`);
      return EXIT_USAGE;
    }
    const { DEV_HELP, parseDevArgs } = dc;
    const { options, problems } = parseDevArgs(argv, {
      chart: join(packageRoot, 'charts', 'portal'),
      policies: join(io.cwd, 'policies'),
      stateDir: join(io.cwd, '.portal', 'dev'),
    });
    if (options.help) {
      io.stdout.write(DEV_HELP);
      return EXIT_OK;
    }
    // Flags passed through are checked here, the way each replica will check
    // them, so a typo is a usage error before the API server starts rather
    // than N replicas exiting with code 2 afterwards.
    problems.push(...(await passthroughProblems(options.passthrough, io, dc.INSTALL_NAMESPACE, dc.DEV_FLAGS)));
    if (problems.length > 0) {
      // One pointer to the help: an unknown flag's line already carries it.
      const help = problems.some((p) => p.includes('--help')) ? '' : "Run 'portal dev --help' for the flags.\n";
      io.stderr.write(`portal dev: ${problems.join('\nportal dev: ')}\n${help}`);
      return EXIT_USAGE;
    }
    // The state directory before the port: a second instance in the same
    // checkout is told about the directory even when it also asked for the
    // first one's port, and it leaves the first one's kubeconfig and
    // certificates untouched.
    const stateDir = resolve(io.cwd, options.stateDir);
    let locked: LockResult;
    try {
      locked = await dc.lockStateDir(stateDir, { pid: process.pid });
    } catch (err) {
      io.stderr.write(`portal dev: cannot use the state directory ${stateDir}: ${(err as Error).message}; give another one: --state-dir DIR\n`);
      return EXIT_USAGE;
    }
    if (!locked.ok) {
      const who = locked.holder !== undefined ? `another portal dev (pid ${locked.holder})` : 'another portal dev (it did not say its pid)';
      io.stderr.write(`portal dev: the state directory ${stateDir} is in use by ${who}; stop that one, or give this one its own: --state-dir DIR\n`);
      return EXIT_USAGE;
    }
    try {
      return await start(dc, { ...options, stateDir }, io);
    } finally {
      await locked.lock.release();
    }
  },
};

async function start(dc: DevCluster, options: DevOptions, io: CommandIO): Promise<number> {
  // A taken port (another portal dev, a real cluster on 6443) is the
  // commonest start-up failure: one line and exit 2 before the second of
  // module loading that the rest costs.
  const busy = await dc.portProblem(options.port);
  if (busy) {
    io.stderr.write(`portal dev: ${busy}\n`);
    return EXIT_USAGE;
  }
  const runDev = await dc.loadRunDev();
  const controller = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => {
    if (!controller.signal.aborted) io.stderr.write(`\nportal dev: ${sig}, stopping\n`);
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const result = await runDev(
      options,
      {
        nodePath: process.execPath,
        nodeVersion: process.version,
        script: join(packageRoot, 'bin', 'portal.js'),
        env: io.env,
        out: { write: (t: string) => io.stdout.write(t), isTTY: (io.stdout as NodeJS.WriteStream).isTTY === true },
      },
      controller.signal,
    );
    if (result.code !== 0) io.stderr.write(`portal dev: ${result.message}\n`);
    return result.code;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

async function passthroughProblems(passthrough: readonly string[], io: CommandIO, installNamespace: string, devFlags: readonly string[]): Promise<string[]> {
  if (passthrough.length === 0) return [];
  const { loadServeConfig } = await import('../config/load.ts');
  // Unknown here means neither dev's nor serve's: the nearest of both is suggested, and dev's help (which covers both).
  const args = parseArgs(passthrough, SERVE_FLAG_DEFS, 'portal dev', devFlags);
  const problems = [...args.problems];
  const unexpected = args.positionals.filter((p) => !args.strays.includes(p));
  if (unexpected.length > 0) {
    problems.push(`unexpected argument ${JSON.stringify(unexpected[0])}; portal dev takes only flags (its own, and 'portal serve' flags for the replicas)`);
  }
  const configFile = args.values.get('config')?.at(-1);
  const loaded = loadServeConfig({
    flags: args.values,
    ...(configFile !== undefined ? { configFile } : {}),
    env: { ...io.env, POD_NAME: 'portal-0', POD_NAMESPACE: installNamespace },
    hostname: hostname(),
    cwd: io.cwd,
    // Dev writes each replica's certificate and kubeconfig itself.
    deferred: new Set(['tls', 'ruleSource'] as const),
  });
  if (!loaded.ok) problems.push(...loaded.problems);
  return problems;
}
