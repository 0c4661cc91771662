/** Runs the real `portal` executable in a given directory and collects what a user sees. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/portal.js', import.meta.url));
/** One run is ~1.5 s (tsx compiling the CLI); generous for a loaded 2-core machine. */
const TIMEOUT_MS = 30_000;

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runPortal(args: readonly string[], cwd = ROOT): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, POD_NAME: 'portal-robust' } });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`portal ${args.join(' ')} did not finish within ${TIMEOUT_MS} ms\n${stderr}`));
    }, TIMEOUT_MS);
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

/** A user error: the given exit code, every expected message on stderr, and no stack trace. */
export function assertReported(r: RunResult, code: number, ...expected: RegExp[]): void {
  const context = `exit ${r.code}\nstderr:\n${r.stderr}\nstdout:\n${r.stdout.slice(0, 2000)}`;
  assert.equal(r.code, code, context);
  for (const re of expected) assert.match(r.stderr, re, context);
  assert.doesNotMatch(r.stderr + r.stdout, /\n\s+at .+:\d+:\d+\)?\n/, `stack trace shown:\n${context}`);
}
