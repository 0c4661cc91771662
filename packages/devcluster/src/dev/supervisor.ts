/**
 * Runs the replicas as child processes and keeps them running like a
 * Deployment's kubelet would: a replica that exits is restarted with
 * exponential backoff (reset after it stayed up for a while), on the same
 * ports and with the same identity env, so the webhook endpoints stay stable.
 *
 * `start(signal)` resolves once every child has exited after the signal
 * fired: SIGTERM first, SIGKILL after the grace period.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { open, readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import { backoffDelay, LogKey, toError } from 'portal/dev-api';

export interface ReplicaSpec {
  name: string;
  webhookPort: number;
  probesPort: number;
  /** Arguments after the script, e.g. `['serve', '--kubeconfig', …]`. */
  args: string[];
  env: Record<string, string>;
  /** stdout and stderr of the replica are appended here. */
  logFile: string;
}

export interface ReplicaState {
  name: string;
  pid: number | undefined;
  webhookPort: number;
  probesPort: number;
  restarts: number;
  running: boolean;
}

export interface SupervisorOptions {
  /** The Node binary (the CLI passes process.execPath). */
  nodePath: string;
  /** bin/portal.js */
  script: string;
  replicas: readonly ReplicaSpec[];
  /** @default 10000 */
  gracePeriodMs?: number;
  /** Called whenever a pid or running state changes. */
  onChange?: (states: ReplicaState[]) => void;
  /**
   * A replica exited with code 2 (usage/configuration error): restarting it
   * cannot help, so the supervisor stops restarting it and reports.
   */
  onFatal?: (name: string, logTail: string) => void;
  logger?: Logger;
  /** Restart backoff; the defaults below suit a dev loop (tests shorten them). */
  backoff?: { initialMs?: number; maxMs?: number; resetAfterMs?: number };
}

/** First restart after 500 ms, doubling up to 30 s, like CrashLoopBackOff but scaled for a dev loop. */
export const BACKOFF_INITIAL_MS = 500;
export const BACKOFF_MAX_MS = 30_000;
/** A replica that stayed up this long is considered healthy again: its backoff is reset. */
export const BACKOFF_RESET_AFTER_MS = 30_000;
const EXIT_USAGE = 2;

interface Slot {
  spec: ReplicaSpec;
  child: ChildProcess | undefined;
  exited: Promise<void> | undefined;
  restarts: number;
  failures: number;
  timer: NodeJS.Timeout | undefined;
  fatal: boolean;
}

export class Supervisor {
  private readonly slots: Slot[];
  private stopping = false;

  constructor(private readonly opts: SupervisorOptions) {
    this.slots = opts.replicas.map((spec) => ({ spec, child: undefined, exited: undefined, restarts: 0, failures: 0, timer: undefined, fatal: false }));
  }

  states(): ReplicaState[] {
    return this.slots.map((s) => ({
      name: s.spec.name,
      pid: s.child?.pid,
      webhookPort: s.spec.webhookPort,
      probesPort: s.spec.probesPort,
      restarts: s.restarts,
      running: s.child !== undefined,
    }));
  }

  async start(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    await Promise.all(this.slots.map((s) => this.launch(s)));
    if (!signal.aborted) await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    await this.stopAll();
  }

  private changed(): void {
    this.opts.onChange?.(this.states());
  }

  private async launch(slot: Slot): Promise<void> {
    if (this.stopping) return;
    const log = await open(slot.spec.logFile, 'a');
    if (this.stopping) {
      await log.close();
      return;
    }
    let child: ChildProcess;
    try {
      child = spawn(this.opts.nodePath, [this.opts.script, ...slot.spec.args], {
        env: slot.spec.env,
        // The IPC channel is the replica's lifeline: it closes when dev dies
        // for any reason (even SIGKILL), and `portal serve` then shuts down.
        stdio: ['ignore', log.fd, log.fd, 'ipc'],
        // Own process group: a terminal's Ctrl-C reaches only dev, which then
        // stops each replica with ONE SIGTERM. Had the replicas also received
        // the SIGINT, dev's SIGTERM would be their second signal: exit at
        // once, without releasing the Lease.
        detached: true,
      });
    } finally {
      // The child has its own copy of the descriptor.
      await log.close();
    }
    const startedAt = performance.now();
    slot.child = child;
    slot.exited = new Promise<void>((resolve) => {
      child.once('exit', (code, sig) => {
        slot.child = undefined;
        resolve();
        this.opts.logger?.info({ [LogKey.name]: slot.spec.name, [LogKey.code]: code, [LogKey.signal]: sig }, 'replica exited');
        if (this.stopping) {
          this.changed();
          return;
        }
        if (code === EXIT_USAGE) {
          slot.fatal = true;
          this.changed();
          void this.logTail(slot.spec.logFile).then((tail) => this.opts.onFatal?.(slot.spec.name, tail));
          return;
        }
        const backoff = this.opts.backoff ?? {};
        if (performance.now() - startedAt >= (backoff.resetAfterMs ?? BACKOFF_RESET_AFTER_MS)) slot.failures = 0;
        const delay = backoffDelay(slot.failures, { initialMs: backoff.initialMs ?? BACKOFF_INITIAL_MS, maxMs: backoff.maxMs ?? BACKOFF_MAX_MS });
        slot.failures++;
        this.changed();
        slot.timer = setTimeout(() => {
          slot.timer = undefined;
          slot.restarts++;
          this.launch(slot).catch((err: unknown) => this.opts.logger?.error({ [LogKey.error]: toError(err) }, 'cannot restart replica'));
        }, delay);
      });
    });
    child.once('error', (err) => this.opts.logger?.error({ [LogKey.name]: slot.spec.name, [LogKey.error]: toError(err) }, 'replica process error'));
    this.changed();
  }

  private async logTail(file: string): Promise<string> {
    try {
      return (await readFile(file, 'utf8')).split('\n').slice(-20).join('\n');
    } catch {
      return '';
    }
  }

  private async stopAll(): Promise<void> {
    this.stopping = true;
    for (const slot of this.slots) {
      if (slot.timer) clearTimeout(slot.timer);
      slot.timer = undefined;
      slot.child?.kill('SIGTERM');
    }
    const grace = this.opts.gracePeriodMs ?? 10_000;
    const killer = setTimeout(() => {
      for (const slot of this.slots) slot.child?.kill('SIGKILL');
    }, grace);
    await Promise.all(this.slots.map((s) => (s.child ? s.exited : undefined)));
    clearTimeout(killer);
  }
}
