/** What every `portal` subcommand implements. */
import type { OutputGuard, OutputPolicy } from './output-policy.ts';

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

export interface CommandIO {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** Standard input, for commands that read `-` (a function: the stream is created only when used). */
  stdin?: () => NodeJS.ReadableStream;
  /** Where a writer other than `stdout`/`stderr` themselves reports a failed write (output-policy.ts). */
  output: OutputGuard;
}

export interface Command {
  /** What a failed write to stdout or stderr means for this command (output-policy.ts). */
  readonly output: OutputPolicy;
  /**
   * Runs the command to completion and returns its exit code. Long-running
   * commands install their own SIGINT/SIGTERM handlers (this is src/cli).
   */
  run(argv: string[], io: CommandIO): Promise<number>;
}
