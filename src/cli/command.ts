/** What every `portal` subcommand implements. */
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
}

export interface Command {
  /**
   * Runs the command to completion and returns its exit code. Long-running
   * commands install their own SIGINT/SIGTERM handlers (this is src/cli).
   */
  run(argv: string[], io: CommandIO): Promise<number>;
}
