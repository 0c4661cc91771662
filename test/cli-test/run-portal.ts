/** Runs the real `portal` executable and collects what a user would see. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/portal.js', import.meta.url));

/** Generous: one run takes ~1.5 s, most of it tsx compiling the CLI. */
const TIMEOUT_MS = 30_000;

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  /** @default the repository root */
  cwd?: string;
  /** Extra environment on top of this process's. */
  env?: Record<string, string>;
  /** @default TIMEOUT_MS */
  timeoutMs?: number;
}

export function runPortal(args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: options.cwd ?? ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...options.env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timeout = options.timeoutMs ?? TIMEOUT_MS;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`portal ${args.join(' ')} did not finish within ${timeout} ms\n${stderr}`));
    }, timeout);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
