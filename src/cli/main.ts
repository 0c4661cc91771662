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

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
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
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`portal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
