/**
 * One structured info line per denied admission request (issue 33, Deliver
 * 3): which rule(s) denied what, and for whom. Identifiers only, never the
 * object (it can be a Secret):
 *
 *   {"level":30,"component":"admission","uid":"…","operation":"CREATE","kind":"Pod",
 *    "namespace":"team-a","name":"web","user":"alice","rules":["disallow-privileged"],
 *    "msg":"admission request denied"}
 *
 * Rate-limited by a token bucket, so that a client that makes itself denied
 * in a loop cannot flood the log (and, through it, the collector). What the
 * bucket refuses is counted (`portal_admission_denials_not_logged_total`)
 * and said in one warn line at most every `summaryMs`
 * (`"N denied requests were not logged (rate limit)"`).
 */
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import { LogKey } from '../observability/log-keys.ts';
import type { Outcome } from '../policy/review/answer.ts';

/** What paces the lines: a token bucket (kube/rate-limiter.ts fits). */
export interface LinePacer {
  tryTake(): boolean;
}

export interface DenialLogDeps {
  log: Logger;
  pacer: LinePacer;
  notLogged: Counter;
  /** @default 10 s */
  summaryMs?: number;
}

/** User names are the API server's; bounded anyway, as everything a log line repeats. */
const MAX_USER = 256;

export class DenialLog {
  readonly #deps: DenialLogDeps;
  #dropped = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(deps: DenialLogDeps) {
    this.#deps = deps;
  }

  /** A denied request (decision `deny`). Never throws. */
  denied(out: Outcome): void {
    try {
      if (!this.#deps.pacer.tryTake()) {
        this.#dropped++;
        this.#deps.notLogged.inc();
        this.#timer ??= setTimeout(() => this.flush(), this.#deps.summaryMs ?? 10_000).unref();
        return;
      }
      const r = out.request;
      this.#deps.log.info(
        {
          [LogKey.uid]: out.response.uid,
          [LogKey.operation]: r?.operation,
          [LogKey.kind]: r?.kind.kind,
          [LogKey.namespace]: r?.namespace,
          [LogKey.name]: r?.name,
          [LogKey.user]: r?.user?.slice(0, MAX_USER),
          [LogKey.rules]: out.deniedBy,
        },
        'admission request denied',
      );
    } catch {
      // The denial goes out whatever the log does.
    }
  }

  /** Says how many lines the limit dropped since the last summary (also on close). */
  flush(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#dropped === 0) return;
    const n = this.#dropped;
    this.#dropped = 0;
    this.#deps.log.warn({ [LogKey.count]: n }, `${n} denied request${n === 1 ? ' was' : 's were'} not logged (rate limit); portal_admission_denials_not_logged_total counts them`);
  }
}
