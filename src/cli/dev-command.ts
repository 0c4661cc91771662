/**
 * `portal dev`: flags, signals and exit codes around runDev
 * (src/devcluster/dev/dev.ts). Ctrl-C / SIGTERM stop everything cleanly;
 * a second signal is ignored while the replicas drain (they get SIGKILL
 * after --grace-period anyway).
 */
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { runDev } from '../devcluster/dev/dev.ts';
import { DEV_HELP, parseDevArgs } from '../devcluster/dev/options.ts';
import { EXIT_OK, EXIT_USAGE, type Command } from './command.ts';

const packageRoot = fileURLToPath(new URL('../..', import.meta.url));

export const devCommand: Command = {
  async run(argv, io) {
    const { options, problems } = parseDevArgs(argv, {
      chart: join(packageRoot, 'charts', 'portal'),
      policies: join(io.cwd, 'policies'),
      stateDir: join(io.cwd, '.portal', 'dev'),
    });
    if (options.help) {
      io.stdout.write(DEV_HELP);
      return EXIT_OK;
    }
    if (problems.length > 0) {
      io.stderr.write(`portal dev: ${problems.join('\nportal dev: ')}\nRun 'portal dev --help' for the flags.\n`);
      return EXIT_USAGE;
    }
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
  },
};
