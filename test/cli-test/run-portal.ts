/** Runs the real `portal` executable and collects what a user would see. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/portal.js', import.meta.url));

/**
 * Only a hang should reach this: one run takes ~1.5 s on an idle machine
 * (most of it tsx compiling the CLI), but 20-30 s on 2 cores at load 25,
 * where 30 s failed runs that were merely slow.
 */
const TIMEOUT_MS = 120_000;

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** With `peakRss`: the command's peak resident set (getrusage's maxrss, through /usr/bin/time), in bytes. */
  peakRssBytes?: number;
}

export interface RunOptions {
  /** @default the repository root */
  cwd?: string;
  /** Extra environment on top of this process's. */
  env?: Record<string, string>;
  /** Written to the command's standard input (otherwise it has none). */
  stdin?: string;
  /** @default TIMEOUT_MS */
  timeoutMs?: number;
  /** Measure the peak RSS of the command (run under /usr/bin/time, whose line is taken out of stderr). */
  peakRss?: boolean;
}

/** What /usr/bin/time adds to stderr: a line on a non-zero exit or a signal, then the format's. */
const PEAK_LINE = /(?:Command (?:exited with non-zero status|terminated by signal) \d+\n)?portal-peak-rss-kb (\d+)\n$/;

export function runPortal(args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const command = options.peakRss ? ['/usr/bin/time', '-f', 'portal-peak-rss-kb %M', process.execPath] : [process.execPath];
    const child = spawn(command[0]!, [...command.slice(1), BIN, ...args], {
      cwd: options.cwd ?? ROOT,
      stdio: [options.stdin !== undefined ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...options.env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    // A command that exits without reading its input must not fail the run with EPIPE.
    child.stdin?.on('error', () => undefined);
    if (options.stdin !== undefined) child.stdin?.end(options.stdin);
    const timeoutMs = options.timeoutMs ?? TIMEOUT_MS;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`portal ${args.join(' ')} did not finish within ${timeoutMs} ms\n${stderr}`));
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      const peak = PEAK_LINE.exec(stderr);
      if (options.peakRss && peak) return resolve({ code, stdout, stderr: stderr.slice(0, peak.index), peakRssBytes: Number(peak[1]) * 1024 });
      resolve({ code, stdout, stderr });
    });
  });
}
