/** In-memory audit log of every write, bounded so a long `portal dev` session cannot grow without limit. */
export interface AuditEntry {
  verb: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
  user: string;
  resourceVersion: string;
  code: number;
  time: string;
  /** Audit annotations of the request (admission webhooks' `<webhook>/<key>`, VAPs'), when there are any. */
  annotations?: Record<string, string>;
}

/** 100,000 entries of ~200 bytes is ~20 MB: enough for any test, bounded for a dev session. */
const DEFAULT_LIMIT = 100_000;

/** A ring buffer: recording is O(1) and the oldest entries fall off once `limit` is reached. */
export class AuditLog {
  private readonly entries: AuditEntry[] = [];
  private head = 0;
  constructor(private readonly limit = DEFAULT_LIMIT) {}

  record(e: AuditEntry): void {
    if (this.entries.length < this.limit) this.entries.push(e);
    else {
      this.entries[this.head] = e;
      this.head = (this.head + 1) % this.limit;
    }
  }

  /** Oldest first. */
  all(): AuditEntry[] {
    return [...this.entries.slice(this.head), ...this.entries.slice(0, this.head)];
  }
}
