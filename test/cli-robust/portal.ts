/** The cli-test runner with this suite's pod name, plus the user-error assertion. */
import assert from 'node:assert/strict';
import { ROOT, runPortal as run, type RunResult } from '../cli-test/run-portal.ts';

export { ROOT, type RunResult };

export function runPortal(args: readonly string[], cwd = ROOT): Promise<RunResult> {
  return run(args, { cwd, env: { POD_NAME: 'portal-robust' } });
}

/** A user error: the given exit code, every expected message on stderr, and no stack trace. */
export function assertReported(r: RunResult, code: number, ...expected: RegExp[]): void {
  const context = `exit ${r.code}\nstderr:\n${r.stderr}\nstdout:\n${r.stdout.slice(0, 2000)}`;
  assert.equal(r.code, code, context);
  for (const re of expected) assert.match(r.stderr, re, context);
  assert.doesNotMatch(r.stderr + r.stdout, /\n\s+at .+:\d+:\d+\)?\n/, `stack trace shown:\n${context}`);
}
