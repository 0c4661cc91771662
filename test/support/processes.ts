/** The process table, for tests that must prove nothing was left running. */
import { readdirSync, readFileSync } from 'node:fs';

/** Pids of live (non-zombie) processes whose command line mentions `needle`, e.g. a test's temp dir. */
export function processesMentioning(needle: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // A zombie has exited; it only waits for its parent to reap it.
      if (cmd.includes(needle) && !/^\d+ \(.*\) Z/.test(stat)) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** SIGKILLs what a failed test left behind, by pid. */
export function killMentioning(needle: string): void {
  for (const pid of processesMentioning(needle)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}
