/**
 * The test suite's one polling helper: waits until `check` returns a value
 * (anything but undefined, null or false) and returns it, or throws naming
 * `what` after `ms`. Use it for conditions that have no event to wait on
 * (state in another process, the API server's write log); never to prove
 * that something did NOT happen.
 */
export interface UntilOptions {
  /** Pause between checks. @default 20 */
  intervalMs?: number;
  /** A check that throws counts as "not yet" (e.g. fetching a paused process). @default false */
  ignoreErrors?: boolean;
}

/**
 * For checks that run kubectl or read another process's files: every 100 ms,
 * not the default 20, since each check costs a process or a file read.
 */
export const SLOW_CHECK: Readonly<UntilOptions> = Object.freeze({ intervalMs: 100 });

type Check<T> = () => T | undefined | null | false | Promise<T | undefined | null | false>;

export async function until<T>(what: string, ms: number, check: Check<T>, options: UntilOptions = {}): Promise<T> {
  const deadline = performance.now() + ms;
  for (;;) {
    let v: T | undefined | null | false;
    try {
      v = await check();
    } catch (err) {
      if (!options.ignoreErrors) throw err;
      v = undefined;
    }
    if (v !== undefined && v !== null && v !== false) return v;
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 20));
  }
}

/**
 * Waits until `probes`/readyz answers 200, as the kubelet does before it
 * sends a replica traffic: a replica listens before it is ready (its
 * evaluation workers start, its informers sync) and denies "not ready" until
 * then, so a test that expects rule decisions waits for this first.
 */
export function untilReady(probes: string, ms = 30_000): Promise<true> {
  return until(`${probes}/readyz to answer 200`, ms, async () => (await fetch(`${probes}/readyz`, { signal: AbortSignal.timeout(1000) })).status === 200 || undefined, { ignoreErrors: true });
}
