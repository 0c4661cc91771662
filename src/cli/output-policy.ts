/**
 * What a failed write to stdout or stderr means. Each command declares its
 * policy (`Command.output`); main.ts applies it to the process's streams
 * before the command runs, and a command that writes its output another
 * way (serve's log buffer on fd 1) reports its write errors here too, so
 * that each kind of loss is said once, one way.
 */
import type { EventEmitter } from 'node:events';

export type OutputPolicy =
  /**
   * The output is the result (`portal test`, `portal dev`, usage, version).
   * A reader that goes away (`portal test … | head`: EPIPE) wanted no more:
   * the command finishes and exits with its own code (its verdict), as
   * `head`'s users expect. Any other write error (a full disk) means the
   * output is incomplete: said once on stderr, and the run fails (exit 1).
   */
  | { kind: 'result' }
  /**
   * The output is a log beside the work (`portal serve`: admission does not
   * depend on it). Losing it, whatever the reason, is said once on stderr
   * ("<who>: cannot write the log to stdout (EPIPE): the log is lost from
   * now on; <goesOn>") and changes nothing else, not even the exit code.
   */
  | { kind: 'log'; who: string; goesOn: string };

export const RESULT_OUTPUT: OutputPolicy = Object.freeze({ kind: 'result' });

type Stream = EventEmitter & NodeJS.WritableStream;

export interface OutputStreams {
  stdout: Stream;
  stderr: Stream;
  /** Policy `result`: called once the output is incomplete (possibly after the command returned: writes are asynchronous). */
  onIncomplete: () => void;
}

export interface OutputGuard {
  /** A write to `stream` failed (from the stream's 'error' event, or from another writer to the same descriptor). */
  failed(stream: 'stdout' | 'stderr', err: NodeJS.ErrnoException): void;
}

/** Applies `policy` to `streams` (their 'error' events) and returns the guard that the command reports to. */
export function guardOutput(policy: OutputPolicy, streams: OutputStreams): OutputGuard {
  let said = false;
  let incomplete = false;
  const say = (line: string): void => {
    if (said) return;
    said = true;
    streams.stderr.write(`${line}\n`);
  };
  const guard: OutputGuard = {
    failed(stream, err) {
      const code = err.code ?? err.message;
      if (policy.kind === 'log') {
        // stderr gone too: nowhere left to say anything.
        if (stream === 'stdout') say(`${policy.who}: cannot write the log to stdout (${code}): the log is lost from now on; ${policy.goesOn}`);
        return;
      }
      if (err.code === 'EPIPE' || incomplete) return;
      incomplete = true;
      streams.onIncomplete();
      if (stream === 'stdout') say(`portal: cannot write to standard output (${code}): the output is incomplete`);
    },
  };
  // Unhandled, an 'error' event would crash the process with a stack trace.
  streams.stdout.on('error', (err: NodeJS.ErrnoException) => guard.failed('stdout', err));
  streams.stderr.on('error', (err: NodeJS.ErrnoException) => guard.failed('stderr', err));
  return guard;
}
