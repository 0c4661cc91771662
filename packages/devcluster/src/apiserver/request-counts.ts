/**
 * Requests per user, reads and watches included (the audit log records
 * writes only): lets a benchmark measure what a client really sends, e.g.
 * the Lease requests per second of each replica at steady state.
 */

/** Distinct `METHOD path` keys kept per user; the rest are summed under "other" (bounded for long dev sessions). */
const MAX_KEYS_PER_USER = 1000;

export class RequestCounts {
  private readonly byUser = new Map<string, Map<string, number>>();

  /** `watch`: a GET with watch=true (counted once, when it opens). */
  record(user: string, method: string, path: string, watch: boolean): void {
    let keys = this.byUser.get(user);
    if (!keys) {
      keys = new Map();
      this.byUser.set(user, keys);
    }
    let key = `${watch ? 'WATCH' : method} ${path}`;
    if (!keys.has(key) && keys.size >= MAX_KEYS_PER_USER) key = 'other';
    keys.set(key, (keys.get(key) ?? 0) + 1);
  }

  /** `{user: {"GET /apis/...": n}}` */
  snapshot(): Record<string, Record<string, number>> {
    return Object.fromEntries([...this.byUser].map(([u, keys]) => [u, Object.fromEntries(keys)]));
  }
}
