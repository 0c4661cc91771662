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
}

/** 100,000 entries of ~200 bytes is ~20 MB: enough for any test, bounded for a dev session. */
const DEFAULT_LIMIT = 100_000;

export class AuditLog {
  private entries: AuditEntry[] = [];
  constructor(private readonly limit = DEFAULT_LIMIT) {}

  record(e: AuditEntry): void {
    this.entries.push(e);
    if (this.entries.length > this.limit) this.entries = this.entries.slice(-Math.floor(this.limit / 2));
  }

  all(): AuditEntry[] {
    return [...this.entries];
  }
}
