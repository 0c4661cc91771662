/**
 * Fault injection for failover tests: added latency, a fraction of requests
 * failing with 500/429, dropping open watches, and cutting a user off (its
 * sockets destroyed, new requests hung up on).
 */
export interface FaultScope { user?: string }

/** Narrows the latency fault to some requests: paths containing `path`, with one of `methods` (e.g. report writes only). */
export interface LatencyScope extends FaultScope { path?: string; methods?: string[] }

interface LatencyRule { ms: number; user?: string; path?: string; methods?: string[] }

interface ErrorRule { fraction: number; code: 500 | 429; user?: string; verbs?: string[] }

export class Faults {
  private latency: LatencyRule[] = [];
  private errorRules: ErrorRule[] = [];
  private readonly cut = new Set<string>();
  /** Requests being held by the latency fault right now, per user (`METHOD path`). */
  private readonly held = new Map<string, string[]>();
  /** Releases every held request now (clear()). */
  private readonly releases = new Set<() => void>();

  constructor(
    private readonly hooks: { dropWatches(user?: string): void; dropConnections(user: string): void },
    private readonly random: () => number = Math.random,
  ) {}

  setLatency(ms: number, scope: LatencyScope = {}): void {
    const same = (l: LatencyRule) => l.user === scope.user && l.path === scope.path && (l.methods ?? []).join() === (scope.methods ?? []).join();
    this.latency = this.latency.filter((l) => !same(l));
    if (ms <= 0) return;
    const rule: LatencyRule = { ms };
    if (scope.user !== undefined) rule.user = scope.user;
    if (scope.path !== undefined) rule.path = scope.path;
    if (scope.methods !== undefined) rule.methods = scope.methods.map((m) => m.toUpperCase());
    this.latency.push(rule);
  }

  setErrorRate(fraction: number, code: 500 | 429, scope: FaultScope & { verbs?: string[] } = {}): void {
    this.errorRules = this.errorRules.filter((r) => r.user !== scope.user);
    if (fraction > 0) {
      const rule: ErrorRule = { fraction, code };
      if (scope.user !== undefined) rule.user = scope.user;
      if (scope.verbs) rule.verbs = scope.verbs;
      this.errorRules.push(rule);
    }
  }

  dropWatches(scope: FaultScope = {}): void {
    this.hooks.dropWatches(scope.user);
  }

  cutOff(user: string): void {
    this.cut.add(user);
    this.hooks.dropConnections(user);
  }

  restore(user?: string): void {
    if (user === undefined) this.cut.clear();
    else this.cut.delete(user);
  }

  /** Every fault off; requests held by the latency fault go on now. */
  clear(): void {
    for (const release of [...this.releases]) release();
    this.latency = [];
    this.errorRules = [];
    this.cut.clear();
  }

  isCutOff(user: string): boolean {
    return this.cut.has(user);
  }

  latencyFor(user: string, method = '', path = ''): number {
    let ms = 0;
    for (const l of this.latency) {
      if (l.user !== undefined && l.user !== user) continue;
      if (l.path !== undefined && !path.includes(l.path)) continue;
      if (l.methods !== undefined && !l.methods.includes(method.toUpperCase())) continue;
      ms = Math.max(ms, l.ms);
    }
    return ms;
  }

  /**
   * Holds a request for `ms` (the latency fault). While it waits it is listed
   * by delayed(): a test can wait for "a request is in flight" as an event
   * instead of guessing it from timing.
   */
  async delay(user: string, request: string, ms: number): Promise<void> {
    const list = this.held.get(user) ?? [];
    this.held.set(user, list);
    list.push(request);
    let release!: () => void;
    try {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        release = () => {
          clearTimeout(timer);
          resolve();
        };
        this.releases.add(release);
      });
    } finally {
      this.releases.delete(release);
      list.splice(list.indexOf(request), 1);
    }
  }

  /** `METHOD path` of the requests of `user` held by the latency fault right now. */
  delayed(user: string): string[] {
    return [...(this.held.get(user) ?? [])];
  }

  /** The status code to fail this request with, if any. */
  errorFor(user: string, verb: string): 500 | 429 | undefined {
    for (const r of this.errorRules) {
      if (r.user !== undefined && r.user !== user) continue;
      if (r.verbs && !r.verbs.includes(verb)) continue;
      if (this.random() < r.fraction) return r.code;
    }
    return undefined;
  }

  snapshot(): object {
    return { latency: this.latency, errorRates: this.errorRules, cutOff: [...this.cut] };
  }
}
