/**
 * Where `portal serve`'s log lines go: a bounded, non-blocking buffer in
 * front of a file descriptor (sonic-boom, pino's own destination, through
 * its public API). A reader that stays connected but stops reading (a
 * stalled log collector) must cost neither admission's time nor unbounded
 * memory: past {@link LOG_BUFFER_BYTES} waiting to be written, lines are
 * dropped and counted (`portal_log_lines_dropped_total`), and once the
 * reader has caught up one line says how many were lost (the caller's
 * logger writes it, {@link LogOutputOptions.onCaughtUp}).
 *
 * Why not Node's process.stdout: on a pipe it writes what the pipe takes
 * and queues the rest in memory without any bound, so a reader that never
 * reads grows the replica until it is killed for its memory.
 *
 * Non-blocking needs a non-blocking descriptor: writes run on libuv's
 * threads and a full pipe answers EAGAIN, retried every 100 ms by
 * sonic-boom. A pipe or socket on fd 1 is non-blocking once Node created
 * `process.stdout` for it (the CLI does before any command runs); a file
 * never blocks for long. A terminal stays blocking (Node makes it so): a
 * terminal that stops scrolling (XOFF) still holds a write thread.
 */
import { Counter, type Registry } from 'prom-client';
import sonicBoom, { type SonicBoom as Boom } from 'sonic-boom';

// CommonJS: the class is a property of the module object, which Node does not see as a named export.
const { SonicBoom } = sonicBoom;

/**
 * Bytes waiting to be written at most, beyond what the pipe itself holds
 * (64 KiB to a few hundred KiB). 4 MiB: a collector that pauses for a few
 * seconds (a restart, a log rotation) loses nothing even at debug level
 * (one ~400-byte line per review: ~10 s at 1,000 reviews/s), and the worst
 * case is a fixed 4 MiB of a replica's memory, not the whole log.
 */
export const LOG_BUFFER_BYTES = 4 * 1024 * 1024;

/** Why lines were not written: the reader fell behind (the buffer was full), or the output failed for good. */
export type LogDropReason = 'buffer_full' | 'output_failed';
const REASONS: readonly LogDropReason[] = ['buffer_full', 'output_failed'];

export interface LogOutputOptions {
  /** Descriptor the lines go to (the CLI passes 1, stdout). */
  fd: number;
  /** @default LOG_BUFFER_BYTES */
  maxBufferBytes?: number;
  /** The output failed (EPIPE: its reader went away; anything else): called once, and nothing more is written. */
  onFailed?: (err: NodeJS.ErrnoException) => void;
  /** The reader caught up after lines were dropped: `dropped` lines since the last call. */
  onCaughtUp?: (dropped: number) => void;
}

export class LogOutput {
  readonly #boom: Boom;
  readonly #opts: LogOutputOptions;
  /** Everything accepted has been written. */
  #idle = true;
  #failed = false;
  /** The sonic-boom is destroyed (failed or given up): it must not be written to. */
  #destroyed = false;
  /** Given up (exiting): write errors are expected, nothing more is accepted. */
  #closing = false;
  /** Lines dropped since the reader last caught up. */
  #unreported = 0;
  readonly #dropped: Record<LogDropReason, number> = { buffer_full: 0, output_failed: 0 };

  constructor(opts: LogOutputOptions) {
    this.#opts = opts;
    this.#boom = new SonicBoom({
      fd: opts.fd,
      sync: false,
      maxLength: opts.maxBufferBytes ?? LOG_BUFFER_BYTES,
      // A full pipe is retried every 100 ms until the output is given up.
      retryEAGAIN: () => !this.#closing,
    });
    this.#boom.on('drop', () => {
      this.#dropped.buffer_full++;
      this.#unreported++;
    });
    this.#boom.on('drain', () => this.#drained());
    this.#boom.on('error', (err: NodeJS.ErrnoException) => this.#fail(err));
  }

  /** pino's destination: takes one line, never blocks, never throws. */
  write(line: string): void {
    if (this.#closing) return;
    if (this.#failed) {
      this.#dropped.output_failed++;
      return;
    }
    this.#idle = false;
    this.#boom.write(line);
  }

  /** Lines dropped since start, by reason. */
  dropped(): Readonly<Record<LogDropReason, number>> {
    return this.#dropped;
  }

  /**
   * Waits up to `ms` for the reader to take everything accepted; past it,
   * gives the rest up so that nothing (a retry timer) holds the process.
   * Resolves false when lines were given up that way (an output that had
   * failed already was said to be lost when it failed).
   */
  async settle(ms: number): Promise<boolean> {
    if (!this.#idle && !this.#failed && ms > 0) {
      let timer: NodeJS.Timeout | undefined;
      let onDrain: (() => void) | undefined;
      await new Promise<void>((resolve) => {
        onDrain = resolve;
        timer = setTimeout(resolve, ms);
        this.#boom.once('drain', onDrain);
      });
      clearTimeout(timer);
      if (onDrain) this.#boom.off('drain', onDrain);
    }
    const taken = this.#idle || this.#failed;
    this.#abandon();
    return taken;
  }

  #drained(): void {
    this.#idle = true;
    if (this.#unreported === 0 || this.#closing) return;
    const n = this.#unreported;
    this.#unreported = 0;
    this.#opts.onCaughtUp?.(n);
  }

  #fail(err: NodeJS.ErrnoException): void {
    if (this.#closing || this.#failed) return;
    this.#failed = true;
    this.#destroy();
    this.#opts.onFailed?.(err);
  }

  #abandon(): void {
    this.#closing = true;
    this.#destroy();
  }

  #destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#boom.destroy();
  }
}

/** `portal_log_lines_dropped_total{reason}`, read from `dropped` on each scrape. */
export function registerLogMetrics(registry: Registry, dropped: () => Readonly<Record<LogDropReason, number>>): void {
  const reported: Record<LogDropReason, number> = { buffer_full: 0, output_failed: 0 };
  new Counter({
    name: 'portal_log_lines_dropped_total',
    help: 'Log lines not written: the log reader fell behind and the buffer was full (buffer_full), or the output failed for good, e.g. its reader went away (output_failed).',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      const now = dropped();
      for (const reason of REASONS) {
        this.inc({ reason }, now[reason] - reported[reason]);
        reported[reason] = now[reason];
      }
    },
  });
}
