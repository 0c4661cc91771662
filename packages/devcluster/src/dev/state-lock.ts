/**
 * One `portal dev` per state directory (issue 15 item 4). A second instance
 * started on the same directory (the README's own advice when port 6443 is
 * taken is `--port 0`, in the same checkout) used to overwrite the first
 * one's kubeconfig and certificates, leaving it running but unreachable.
 *
 * The lock is a listening Unix socket, not a pid file: a pid file outlives a
 * crash, and its pid may by then belong to an unrelated process, so a
 * crashed instance would block the directory until someone deletes the file
 * by hand. A socket is the kernel's: it stops accepting connections the
 * moment its process dies, however it dies. Connecting to it is the
 * liveness check, and the holder answers with its pid, which the refusal
 * names.
 *
 * - `abstract` (Linux): a socket in the abstract namespace, named after the
 *   directory's device and inode. The kernel removes it with its process:
 *   there is never a stale lock, and binding is atomic.
 * - `path` (other systems): a socket file in the temp directory, named the
 *   same way. A crash leaves the file; connecting to it is refused, so it is
 *   stale and taken over (removed and bound again). Two instances taking
 *   over the same stale file at the same moment: each asks the socket who
 *   holds it after binding, and only the last binder is answered with its
 *   own pid. What remains is a window of a few milliseconds (one instance's
 *   stale check, then its removal, with the other's bind in between) in
 *   which both can win; Linux has no such window.
 *
 * The directory's device and inode, not its path, name the lock: the same
 * directory reached through a symlink or a relative path is the same lock.
 */
import { createHash } from 'node:crypto';
import { mkdir, rm, stat } from 'node:fs/promises';
import { createConnection, createServer, type Server } from 'node:net';
import { platform, tmpdir } from 'node:os';
import { join } from 'node:path';

export type LockMechanism = 'abstract' | 'path';

export interface StateLockOptions {
  /** This process's pid, given to whoever asks who holds the lock. */
  pid: number;
  /** @default 'abstract' on Linux, 'path' elsewhere */
  mechanism?: LockMechanism;
  /** How long a holder may take to say its pid. @default 2000 */
  answerTimeoutMs?: number;
}

export interface StateLock {
  /** The socket address (for /debug and tests). */
  readonly address: string;
  /** Idempotent. */
  release(): Promise<void>;
}

export type LockResult = { ok: true; lock: StateLock } | { ok: false; holder: number | undefined };

/** Taking over a stale lock and losing a race to another instance, this many times, is reported as held. */
const ATTEMPTS = 5;

export function defaultMechanism(): LockMechanism {
  return platform() === 'linux' ? 'abstract' : 'path';
}

/** The lock's socket address for a state directory (which must exist). */
export async function lockAddress(dir: string, mechanism: LockMechanism): Promise<string> {
  const info = await stat(dir);
  const key = createHash('sha256').update(`portal-dev-state:${info.dev}:${info.ino}`).digest('hex').slice(0, 24);
  return mechanism === 'abstract' ? `\0portal-dev-${key}` : join(tmpdir(), `portal-dev-${key}.sock`);
}

type Probe = { state: 'held'; pid: number | undefined } | { state: 'free' } | { state: 'stale' };

/** Who holds the socket at `address`, by connecting to it. */
function probe(address: string, timeoutMs: number): Promise<Probe> {
  return new Promise((resolve) => {
    let answer = '';
    let settled = false;
    const done = (p: Probe): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(p);
    };
    const socket = createConnection({ path: address });
    // Connected but silent (its event loop is blocked): held, pid unknown.
    socket.setTimeout(timeoutMs, () => done({ state: 'held', pid: undefined }));
    socket.on('data', (c: Buffer) => (answer += c.toString()));
    socket.on('end', () => {
      const pid = Number(answer.trim());
      done({ state: 'held', pid: Number.isInteger(pid) && pid > 0 ? pid : undefined });
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // ENOENT: no socket file; ECONNREFUSED: a socket nobody listens on (its process died).
      if (err.code === 'ENOENT') done({ state: 'free' });
      else if (err.code === 'ECONNREFUSED') done({ state: 'stale' });
      else done({ state: 'held', pid: undefined });
    });
  });
}

function listen(address: string, pid: number): Promise<Server | 'in-use'> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => {
      socket.on('error', () => undefined);
      socket.end(`${pid}\n`);
    });
    server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' ? resolve('in-use') : reject(err)));
    server.listen({ path: address }, () => {
      // The lock must not keep `portal dev` alive, nor be what keeps it from exiting.
      server.unref();
      resolve(server);
    });
  });
}

/**
 * Locks the state directory `dir` (created if missing) for this process, or
 * says which pid holds it (undefined when the holder does not answer).
 */
export async function lockStateDir(dir: string, options: StateLockOptions): Promise<LockResult> {
  const mechanism = options.mechanism ?? defaultMechanism();
  const timeoutMs = options.answerTimeoutMs ?? 2000;
  await mkdir(dir, { recursive: true });
  const address = await lockAddress(dir, mechanism);
  let holder: number | undefined;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const server = await listen(address, options.pid);
    if (server !== 'in-use') {
      if (mechanism === 'path') {
        // Another instance may have removed this file as stale and bound its
        // own since: the socket at the path answers with the last binder's pid.
        const who = await probe(address, timeoutMs);
        if (who.state !== 'held' || who.pid !== options.pid) {
          await new Promise<void>((r) => server.close(() => r()));
          holder = who.state === 'held' ? who.pid : undefined;
          continue;
        }
      }
      let released = false;
      return {
        ok: true,
        lock: {
          address,
          release: async () => {
            if (released) return;
            released = true;
            await new Promise<void>((r) => server.close(() => r()));
            if (mechanism === 'path') await rm(address, { force: true });
          },
        },
      };
    }
    const who = await probe(address, timeoutMs);
    if (who.state === 'held') return { ok: false, holder: who.pid };
    // A path socket whose process died: take it over. (An abstract socket is
    // never stale; 'stale' there is another instance between bind and listen.)
    if (who.state === 'stale' && mechanism === 'path') await rm(address, { force: true });
    else await new Promise((r) => setTimeout(r, 50));
  }
  return { ok: false, holder };
}
