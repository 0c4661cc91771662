/**
 * Reloads the webhook's certificate and key (and the client CA bundle, with
 * `--client-ca-file`) when their files change, without
 * a restart and without dropping connections: `server.setSecureContext()`
 * only affects new handshakes, so open (keep-alive) connections continue.
 *
 * Change detection: `fs.watch` on the files' directories (Kubernetes Secret
 * volumes swap a `..data` symlink, so watching the file itself would lose
 * track of it after the first rotation), plus stat polling as a fallback for
 * filesystems where watch events are unreliable (NFS, some overlays). A
 * half-written pair (cert rotated, key not yet) fails `createSecureContext`
 * and the old context stays until the next event or poll finds a valid pair.
 */
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import type { Logger } from 'pino';
import { caBundleProblem } from '../config/ca-bundle.ts';
import { LogKey } from '../observability/log-keys.ts';
import { toError } from '../observability/errors.ts';

/** TLS 1.2 minimum (docs/design.md §3); the apiserver speaks 1.2 and 1.3. */
export const TLS_MIN_VERSION = 'TLSv1.2' as const;

export interface TlsFiles {
  certFile: string;
  keyFile: string;
  /** CA bundle that client certificates must chain to; none: clients are not asked for one. */
  caFile?: string;
}

export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  /** Trusted client CAs (PEM), when client certificates are required. */
  ca?: Buffer;
}

export interface SecureContextTarget {
  setSecureContext(options: SecureContextOptions): void;
}

export interface TlsReloaderOptions extends TlsFiles {
  target: SecureContextTarget;
  /** The material the server was started with (not reloaded again if unchanged). */
  initial: TlsMaterial;
  logger: Logger;
  /**
   * Stat-polling interval. 10 s: a rotated Secret reaches the volume within
   * the kubelet sync period (~1 min), so polling 6x faster adds no visible
   * delay while costing two small reads. @default 10000
   */
  pollIntervalMs?: number;
  /** Called after each successful reload (e.g. to publish an event). */
  onReload?: () => void;
  /** Called when changed files were read but kept out (unreadable, or not a matching pair). */
  onRejected?: (reason: string) => void;
}

export async function readTlsFiles(files: TlsFiles): Promise<TlsMaterial> {
  const [cert, key, ca] = await Promise.all([
    readFile(files.certFile),
    readFile(files.keyFile),
    files.caFile !== undefined && files.caFile !== '' ? readFile(files.caFile) : undefined,
  ]);
  return ca === undefined ? { cert, key } : { cert, key, ca };
}

export function secureContextOptions(m: TlsMaterial): SecureContextOptions {
  return { cert: m.cert, key: m.key, minVersion: TLS_MIN_VERSION, ...(m.ca !== undefined ? { ca: m.ca } : {}) };
}

function sameMaterial(a: TlsMaterial, b: TlsMaterial): boolean {
  return a.cert.equals(b.cert) && a.key.equals(b.key) && (a.ca === undefined ? b.ca === undefined : b.ca !== undefined && a.ca.equals(b.ca));
}

/**
 * Watches the files until `signal` aborts. Resolves after the watchers and
 * timers are closed.
 */
export async function watchTlsFiles(opts: TlsReloaderOptions, signal: AbortSignal): Promise<void> {
  let current = opts.initial;
  let checking = false;
  let again = false;
  let debounce: NodeJS.Timeout | undefined;
  const log = opts.logger;

  const check = async (): Promise<void> => {
    if (checking) {
      again = true;
      return;
    }
    checking = true;
    try {
      do {
        again = false;
        let next: TlsMaterial;
        try {
          next = await readTlsFiles(opts);
        } catch (err) {
          log.warn({ [LogKey.error]: toError(err) }, 'cannot read TLS files; keeping the current certificate');
          opts.onRejected?.((err as Error).message);
          continue;
        }
        if (sameMaterial(next, current)) continue;
        const caProblem = next.ca === undefined ? undefined : caBundleProblem(next.ca.toString('utf8'));
        if (caProblem !== undefined) {
          log.warn({ [LogKey.file]: opts.caFile, [LogKey.reason]: caProblem }, 'new client CA bundle is not usable; keeping the current one');
          opts.onRejected?.(`client CA bundle ${caProblem}`);
          continue;
        }
        try {
          // Validates that the key matches the certificate (and that the CA
          // bundle parses) before switching.
          createSecureContext(secureContextOptions(next));
        } catch (err) {
          log.warn({ [LogKey.error]: toError(err) }, 'new TLS files are not a valid pair yet; keeping the current certificate');
          opts.onRejected?.((err as Error).message);
          continue;
        }
        if (signal.aborted) return;
        opts.target.setSecureContext(secureContextOptions(next));
        current = next;
        log.info({ [LogKey.file]: opts.certFile }, 'reloaded TLS certificate');
        opts.onReload?.();
      } while (again && !signal.aborted);
    } finally {
      checking = false;
    }
  };
  const schedule = (): void => {
    if (signal.aborted) return;
    clearTimeout(debounce);
    // Writers replace cert and key in separate steps; wait for both.
    debounce = setTimeout(() => void check(), 50);
  };

  const watchers: FSWatcher[] = [];
  const files = [opts.certFile, opts.keyFile, ...(opts.caFile !== undefined && opts.caFile !== '' ? [opts.caFile] : [])];
  for (const dir of new Set(files.map((f) => dirname(f)))) {
    try {
      const w = watch(dir, { persistent: false }, schedule);
      w.on('error', (err) => log.debug({ [LogKey.error]: toError(err), [LogKey.dir]: dir }, 'TLS directory watch failed; relying on polling'));
      watchers.push(w);
    } catch (err) {
      log.debug({ [LogKey.error]: toError(err), [LogKey.dir]: dir }, 'cannot watch TLS directory; relying on polling');
    }
  }
  const poll = setInterval(() => void check(), opts.pollIntervalMs ?? 10_000);
  poll.unref();

  if (!signal.aborted) await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
  clearInterval(poll);
  clearTimeout(debounce);
  for (const w of watchers) w.close();
}
