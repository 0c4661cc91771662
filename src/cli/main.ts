/**
 * The `portal` executable: one binary with roles (serve, test, dev). This is
 * the only layer that touches `process`: it parses arguments, wires signals
 * to an AbortController and turns outcomes into exit codes
 * (0 clean, 1 runtime failure, 2 usage or configuration error).
 */
import { closest } from './args.ts';
import { EXIT_USAGE, type Command } from './command.ts';

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
 * Whether writing to stdout or stderr failed for a reason other than the
 * reader going away: the output is then incomplete, so the exit code says
 * so (1) whatever the command's own was.
 */
let outputFailed = false;

/**
 * A reader that goes away (`portal test … | head`) closes the pipe: the
 * next write fails with EPIPE, an 'error' event that, unhandled, crashed
 * with a stack trace and exit 1. The reader wanted no more output; the
 * command finishes and exits with its own code (its verdict), as `head`'s
 * users expect. Any other write error (a full disk) is said once on stderr
 * and fails the run. `serve` handles its own (serve-command.ts: its log is
 * lost, admission goes on).
 */
function survivingReaderLoss(stream: NodeJS.WriteStream, name: string): void {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE' || outputFailed) return;
    outputFailed = true;
    // The error may come after the command returned its code (writes are asynchronous).
    process.exitCode = 1;
    if (stream !== process.stderr) process.stderr.write(`portal: cannot write to ${name} (${err.code ?? err.message}): the output is incomplete\n`);
  });
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name !== 'serve') {
    survivingReaderLoss(process.stdout, 'standard output');
    survivingReaderLoss(process.stderr, 'standard error');
  }
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(USAGE);
    return name === undefined ? EXIT_USAGE : 0;
  }
  if (name === '--version') {
    // The runtime too: npm scripts run the Node 24 of node_modules/.bin (ADR 0008), `node` on PATH may differ.
    process.stdout.write(`portal 0.1.0 (Node ${process.version})\n`);
    return 0;
  }
  const load = commands[name];
  if (!load) {
    const hint = closest(name, Object.keys(commands));
    process.stderr.write(`portal: unknown command "${name}"${hint ? ` (did you mean 'portal ${hint}'?)` : ''}\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  const command = await load();
  return command.run(rest, {
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
    cwd: process.cwd(),
    stdin: () => process.stdin,
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
