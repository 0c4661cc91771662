// The state-directory lock of `portal dev` (issue 15 item 4), both ways it
// is held: an abstract Unix socket (Linux) and a socket file (other
// systems; it runs on Linux too, so it is tested here). A live holder is
// named by its pid; a holder that crashed (SIGKILL, a real process) leaves
// nothing that blocks the directory: the abstract socket is gone with it, the
// socket file is stale and taken over.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { lockAddress, lockStateDir, type LockMechanism } from '../../packages/devcluster/src/dev/state-lock.ts';

const MODULE = pathToFileURL(fileURLToPath(new URL('../../packages/devcluster/src/dev/state-lock.ts', import.meta.url))).href;

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'portal-state-lock-'));
  try {
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A separate process that takes the lock, says so, and waits to be killed. */
function holder(dir: string, mechanism: LockMechanism): Promise<{ pid: number; kill: () => Promise<void> }> {
  const script = `
    const { lockStateDir } = await import(${JSON.stringify(MODULE)});
    const r = await lockStateDir(${JSON.stringify(dir)}, { pid: process.pid, mechanism: ${JSON.stringify(mechanism)} });
    process.stdout.write(r.ok ? 'locked\\n' : 'refused\\n');
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('locked\n') && !out.includes('refused')) {
        resolve({
          pid: child.pid as number,
          kill: async () => {
            child.kill('SIGKILL');
            await exited;
          },
        });
      } else if (out.includes('refused')) reject(new Error('the holder could not take the lock'));
    });
    child.once('exit', (code) => reject(new Error(`the holder exited with ${code} before taking the lock`)));
  });
}

for (const mechanism of ['abstract', 'path'] as const) {
  describe(`state-dir lock (${mechanism})`, () => {
    it('a live holder is named by its pid, also through another path to the same directory; released, the lock is free', async () => {
      await withDir(async (dir) => {
        const state = join(dir, 'state');
        const first = await lockStateDir(state, { pid: 4242, mechanism });
        assert.ok(first.ok);
        assert.deepEqual(await lockStateDir(state, { pid: 5151, mechanism }), { ok: false, holder: 4242 });
        await symlink(state, join(dir, 'alias'));
        assert.deepEqual(await lockStateDir(join(dir, 'alias'), { pid: 5151, mechanism }), { ok: false, holder: 4242 });
        // Another directory is another lock.
        const other = await lockStateDir(join(dir, 'other'), { pid: 5151, mechanism });
        assert.ok(other.ok);
        await first.lock.release();
        await first.lock.release(); // idempotent
        const second = await lockStateDir(state, { pid: 5151, mechanism });
        assert.ok(second.ok);
        await second.lock.release();
        await other.lock.release();
        if (mechanism === 'path') assert.equal(existsSync(await lockAddress(state, 'path')), false, 'the socket file is removed on release');
      });
    });

    it('a holder in another process is refused to others while it lives, and taken over after it is SIGKILLed', async () => {
      await withDir(async (dir) => {
        const state = join(dir, 'state');
        const other = await holder(state, mechanism);
        assert.deepEqual(await lockStateDir(state, { pid: process.pid, mechanism }), { ok: false, holder: other.pid });
        await other.kill();
        // A crash leaves the socket file behind (a stale lock); the abstract socket goes with its process.
        if (mechanism === 'path') assert.ok(existsSync(await lockAddress(state, 'path')), 'the crashed holder left its socket file');
        const taken = await lockStateDir(state, { pid: process.pid, mechanism });
        assert.ok(taken.ok, 'the lock of a dead process is taken over');
        await taken.lock.release();
      });
    });
  });
}
