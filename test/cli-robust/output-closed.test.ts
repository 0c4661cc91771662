/**
 * `portal test`'s output going nowhere, on the real executable: a reader
 * that stops early (`portal test … | head`) gets what it read and the
 * command still exits with its verdict, without a stack trace; an output
 * that cannot be written (a full disk) fails the run and says why.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ROOT, runPortal } from './portal.ts';

const BIN = join(ROOT, 'bin', 'portal.js');
// ~780 KB of JSON: far more than a pipe holds, so writes go on after the reader left.
const ARGS = ['test', '--policies', join(ROOT, 'policies', 'pod-security'), '--output', 'json', join(ROOT, 'test', 'fixtures', 'pss')];

describe('portal test when its output goes away', () => {
  it('a reader that stops after the first bytes: the same exit code as a full read, nothing on stderr', async () => {
    const full = await runPortal(ARGS);
    assert.equal(full.code, 1, `the fixtures hold violations (exit 1)\n${full.stderr}`);
    assert.ok(full.stdout.length > 256 * 1024, `output of ${full.stdout.length} bytes does not outgrow a pipe`);

    const child = spawn(process.execPath, [BIN, ...ARGS], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, POD_NAME: 'portal-robust' } });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const [first] = (await once(child.stdout, 'data')) as [Buffer];
    assert.ok(first.length > 0);
    // What `head -c N` does once it has its bytes: close its end of the pipe.
    child.stdout.destroy();
    const [code] = (await once(child, 'close')) as [number | null];
    assert.equal(code, full.code, `exit code after the reader left\nstderr:\n${stderr}`);
    assert.equal(stderr, '', 'nothing on stderr (no EPIPE stack trace)');
  });

  it('an output that cannot be written (a full disk): exit 1, one line saying so', async () => {
    const fd = openSync('/dev/full', 'w');
    try {
      const child = spawn(process.execPath, [BIN, ...ARGS.slice(0, -1), join(ROOT, 'test', 'fixtures', 'pss', 'compliant')], { cwd: ROOT, stdio: ['ignore', fd, 'pipe'] });
      let stderr = '';
      child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      const [code] = (await once(child, 'close')) as [number | null];
      assert.equal(code, 1, `compliant fixtures, but the output is lost: exit 1\nstderr:\n${stderr}`);
      assert.match(stderr, /^portal: cannot write to standard output \(ENOSPC\): the output is incomplete\n$/);
    } finally {
      closeSync(fd);
    }
  });
});
