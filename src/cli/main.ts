/**
 * The `portal` executable: one binary with roles (serve, test, dev). This is
 * the only layer that touches `process`: it parses arguments, wires signals
 * to an AbortController and turns outcomes into exit codes
 * (0 clean, 1 runtime failure, 2 usage or configuration error).
 */
import { closest } from '../config/args.ts';
import { EXIT_USAGE, type Command } from './command.ts';
import { guardOutput, RESULT_OUTPUT } from './output-policy.ts';

const commands: Record<string, () => Promise<Command>> = {
  serve: async () => (await import('./serve-command.ts')).serveCommand,
  test: async () => (await import('./test-command.ts')).testCommand,
  dev: async () => (await import('./dev-command.ts')).devCommand,
};

const USAGE = `Usage: portal <command> [flags]

Commands:
  serve   run one replica (admission webhook, informers, audit, election)
  test    evaluate manifests against rules offline
  dev     run an embedded API server and a set of replicas on this machine

Run 'portal <command> --help' for the flags of a command.
`;

/**
 * Set once an output could not be written and the command's policy says the
 * run failed (output-policy.ts); the exit code then says so (1), whatever the
 * command's own was.
 */
let outputFailed = false;

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  const load = name !== undefined && Object.hasOwn(commands, name) ? commands[name] : undefined;
  const command = load ? await load() : undefined;
  // Before anything is written: usage, --version and unknown commands have the result policy.
  const output = guardOutput(command?.output ?? RESULT_OUTPUT, {
    stdout: process.stdout,
    stderr: process.stderr,
    onIncomplete: () => {
      outputFailed = true;
      // The error may come after the command returned its code (writes are asynchronous).
      process.exitCode = 1;
    },
  });
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(USAGE);
    return name === undefined ? EXIT_USAGE : 0;
  }
  if (name === '--version') {
    // The runtime too: npm scripts run the Node 24 of node_modules/.bin (ADR 0008), `node` on PATH may differ.
    process.stdout.write(`portal 0.1.0 (Node ${process.version})\n`);
    return 0;
  }
  if (!command) {
    const hint = closest(name, Object.keys(commands));
    process.stderr.write(`portal: unknown command "${name}"${hint ? ` (did you mean 'portal ${hint}'?)` : ''}\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  return command.run(rest, {
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
    cwd: process.cwd(),
    stdin: () => process.stdin,
    output,
  });
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = outputFailed ? 1 : code;
  },
  (err: unknown) => {
    process.stderr.write(`portal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
