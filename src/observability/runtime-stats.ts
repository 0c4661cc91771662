/**
 * The main thread's own health, for `/debug/vars` (`runtime`): its garbage
 * collection pauses by kind, how busy its event loop is, and how late its
 * timers run (event-loop delay).
 *
 * Why: admission latency at a fixed rate is bounded by main-thread stalls
 * (a long GC pause, a burst of informer or audit work), which a CPU profile
 * shows only with effort and req/s not at all. Every figure here is
 * cumulative since start, so a benchmark or an operator reads it twice and
 * subtracts to see what happened in between (docs/benchmarks.md, issue 21).
 *
 * Cost: one callback per GC (a few per second under load) and libuv's own
 * delay sampler (one timer every `resolutionMs`); nothing per request.
 */
import { constants, monitorEventLoopDelay, performance, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';

/** GC pauses longer than this are counted apart: they are what shows up in a p99. */
export const LONG_GC_PAUSE_MS = 10;

export interface GcKindStats {
  count: number;
  totalMs: number;
  maxMs: number;
  /** Pauses longer than {@link LONG_GC_PAUSE_MS}. */
  long: number;
}

export interface RuntimeStatsSnapshot {
  gc: Record<string, GcKindStats>;
  eventLoop: {
    /** Milliseconds the loop ran something / waited for I/O, since start. */
    activeMs: number;
    idleMs: number;
    /** Timer lateness since start (ms): how long a callback ready to run had to wait. */
    delay: { p50Ms: number; p99Ms: number; maxMs: number; samples: number };
  };
}

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

const round3 = (n: number): number => Math.round(n * 1000) / 1000;

export class RuntimeStats {
  readonly name = 'runtime-stats';
  readonly #resolutionMs: number;
  readonly #gc = new Map<string, GcKindStats>();
  #delay: ReturnType<typeof monitorEventLoopDelay> | undefined;
  #elu0 = performance.eventLoopUtilization();

  constructor(config: { resolutionMs?: number } = {}) {
    this.#resolutionMs = config.resolutionMs ?? 10;
  }

  /** Observes until `signal` aborts (a Runnable). */
  async start(signal: AbortSignal): Promise<void> {
    this.#elu0 = performance.eventLoopUtilization();
    const observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) this.#record(entry);
    });
    observer.observe({ entryTypes: ['gc'] });
    const delay = monitorEventLoopDelay({ resolution: this.#resolutionMs });
    delay.enable();
    this.#delay = delay;
    if (!signal.aborted) await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    observer.disconnect();
    delay.disable();
  }

  snapshot(): RuntimeStatsSnapshot {
    const elu = performance.eventLoopUtilization(this.#elu0);
    const d = this.#delay;
    // The histogram is in nanoseconds; before any sample its min/max are sentinels.
    const ms = (ns: number): number => (d && d.count > 0 ? round3(ns / 1e6) : 0);
    return {
      gc: Object.fromEntries([...this.#gc].map(([k, v]) => [k, { ...v, totalMs: round3(v.totalMs), maxMs: round3(v.maxMs) }])),
      eventLoop: {
        activeMs: round3(elu.active),
        idleMs: round3(elu.idle),
        delay: { p50Ms: ms(d?.percentile(50) ?? 0), p99Ms: ms(d?.percentile(99) ?? 0), maxMs: ms(d?.max ?? 0), samples: d?.count ?? 0 },
      },
    };
  }

  #record(entry: PerformanceEntry): void {
    // A gc entry's `detail` (Node's PerformanceEntry subtype) says which collection it was.
    const kind = GC_KINDS[(entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? -1] ?? 'other';
    let s = this.#gc.get(kind);
    if (!s) this.#gc.set(kind, (s = { count: 0, totalMs: 0, maxMs: 0, long: 0 }));
    s.count++;
    s.totalMs += entry.duration;
    if (entry.duration > s.maxMs) s.maxMs = entry.duration;
    if (entry.duration > LONG_GC_PAUSE_MS) s.long++;
  }
}
