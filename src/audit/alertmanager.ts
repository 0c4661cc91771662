/**
 * Alertmanager v2 client: `POST /api/v2/alerts` to every configured
 * Alertmanager (`--alertmanager-url`, repeatable). Like Prometheus, it sends
 * the same batch to each URL (an HA Alertmanager cluster deduplicates by
 * labels); a batch is delivered when at least one URL accepted it.
 *
 * Failures never throw: network errors, timeouts, 5xx and 429 are retried
 * with capped exponential backoff, other 4xx (a payload Alertmanager rejects)
 * are not, and the outcome is reported per URL. Only an abort of the caller's
 * signal rejects (with the signal's reason).
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { backoffDelay, sleep } from '../util/backoff.ts';
import type { FencedWriter, WriteTerm } from '../kube/fenced-writer.ts';
import { ErrorCode, PortalError, isPortalError, toError } from '../observability/errors.ts';
import { alertMetrics, type AlertMetrics } from './metrics.ts';
import { LogKey } from '../observability/log-keys.ts';

export interface AlertmanagerAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** RFC 3339. */
  startsAt: string;
  /** RFC 3339; in the past or now = resolved. */
  endsAt: string;
  generatorURL?: string;
}

export interface AlertmanagerClientOptions {
  /** Base URLs, e.g. `http://alertmanager:9093` (the client appends `/api/v2/alerts`). */
  urls: readonly string[];
  /** Per-request timeout. @default 5000 */
  timeoutMs?: number;
  /**
   * Attempts per URL per batch. With the defaults the waits are 250 + 500 +
   * 1000 ms, so a batch gives up after ~2 s plus timeouts and the caller's
   * work queue retries it later with its own, longer backoff. @default 4
   */
  maxAttempts?: number;
  /** @default 250 */
  baseDelayMs?: number;
  /** @default 5000 */
  maxDelayMs?: number;
  /** The replica's leader-only writer: sends under a term go through it (fenced at the socket). */
  writer?: FencedWriter;
  logger?: Logger;
  registry?: Registry;
}

export interface UrlOutcome {
  url: string;
  ok: boolean;
  attempts: number;
  /** HTTP status of the last attempt, if one was received. */
  status?: number;
  /** Last error, when not ok. */
  error?: string;
}

export interface SendResult {
  /** At least one Alertmanager accepted the batch. */
  delivered: boolean;
  outcomes: UrlOutcome[];
}

export interface UrlHealth {
  url: string;
  consecutiveFailures: number;
  /** Wall-clock ms. */
  lastSuccessAt?: number;
  lastErrorAt?: number;
  lastError?: string;
}

export class AlertmanagerClient {
  readonly #urls: readonly string[];
  readonly #timeoutMs: number;
  readonly #maxAttempts: number;
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #logger: Logger | undefined;
  readonly #metrics: AlertMetrics | undefined;
  readonly #health = new Map<string, UrlHealth>();
  readonly #writer: FencedWriter | undefined;

  constructor(options: AlertmanagerClientOptions) {
    this.#urls = options.urls.map((u) => u.replace(/\/+$/, ''));
    this.#writer = options.writer;
    for (const url of this.#urls) {
      let parsed: URL;
      try {
        parsed = new URL(url);
      } catch (err) {
        throw new PortalError(ErrorCode.ConfigInvalid, `--alertmanager-url "${url}" is not a URL`, { cause: err });
      }
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
        throw new PortalError(ErrorCode.ConfigInvalid, `--alertmanager-url "${url}" must be http or https`);
      }
      this.#health.set(url, { url, consecutiveFailures: 0 });
    }
    this.#timeoutMs = options.timeoutMs ?? 5000;
    this.#maxAttempts = options.maxAttempts ?? 4;
    this.#baseDelayMs = options.baseDelayMs ?? 250;
    this.#maxDelayMs = options.maxDelayMs ?? 5000;
    this.#logger = options.logger?.child({ [LogKey.subcomponent]: 'alertmanager' });
    this.#metrics = options.registry ? alertMetrics(options.registry) : undefined;
  }

  get configured(): boolean {
    return this.#urls.length > 0;
  }

  /** Per-URL success tracking (for /debug/vars and conditions). */
  health(): UrlHealth[] {
    return [...this.#health.values()].map((h) => ({ ...h }));
  }

  /**
   * Sends one batch to every URL. Resolves with per-URL outcomes; rejects
   * only when `signal` aborts or the `term` has ended. Leader-only sends
   * pass their term: they go through the FencedWriter, which checks it again
   * synchronously before each attempt's bytes reach the socket (see
   * kube/fenced-writer.ts).
   */
  async send(alerts: readonly AlertmanagerAlert[], signal: AbortSignal, term?: WriteTerm): Promise<SendResult> {
    if (this.#urls.length === 0) return { delivered: false, outcomes: [] };
    if (term && !this.#writer) throw new PortalError(ErrorCode.Internal, 'a leader-only alert needs the AlertmanagerClient to have a writer');
    const body = JSON.stringify(alerts);
    const outcomes = await Promise.all(this.#urls.map((url) => this.#sendTo(url, body, signal, term)));
    signal.throwIfAborted();
    const delivered = outcomes.some((o) => o.ok);
    if (delivered) {
      const resolved = alerts.filter((a) => Date.parse(a.endsAt) <= Date.now()).length;
      this.#metrics?.alerts.inc({ kind: 'firing' }, alerts.length - resolved);
      this.#metrics?.alerts.inc({ kind: 'resolved' }, resolved);
    }
    return { delivered, outcomes };
  }

  /**
   * Is an alert with exactly these labels active in any Alertmanager?
   * (`GET /api/v2/alerts`, filtered by alertname and name, compared
   * exactly here.) `undefined` when no Alertmanager answered. Used to settle
   * an `intent` a previous leader left behind: was it sent or not?
   */
  async isActive(labels: Readonly<Record<string, string>>, signal: AbortSignal): Promise<boolean | undefined> {
    let answered = false;
    const query = new URLSearchParams({ active: 'true', silenced: 'true', inhibited: 'true', unprocessed: 'true' });
    for (const key of ['alertname', 'name'] as const) if (labels[key] !== undefined) query.append('filter', `${key}=${JSON.stringify(labels[key])}`);
    const want = JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1)));
    for (const url of this.#urls) {
      try {
        const res = await fetch(`${url}/api/v2/alerts?${query}`, { signal: AbortSignal.any([signal, AbortSignal.timeout(this.#timeoutMs)]) });
        if (!res.ok) {
          await res.text().catch(() => '');
          continue;
        }
        answered = true;
        const alerts = (await res.json()) as Array<{ labels?: Record<string, string>; endsAt?: string }>;
        const now = Date.now();
        if (alerts.some((a) => JSON.stringify(Object.entries(a.labels ?? {}).sort(([x], [y]) => (x < y ? -1 : 1))) === want && (!a.endsAt || Date.parse(a.endsAt) > now))) return true;
      } catch (err) {
        signal.throwIfAborted();
        this.#logger?.debug({ [LogKey.url]: url, [LogKey.error]: toError(err) }, 'alertmanager alert query failed');
      }
    }
    return answered ? false : undefined;
  }

  /** One POST: through the writer under `term`, plain `fetch` otherwise. */
  async #post(url: string, body: string, signal: AbortSignal, term: WriteTerm | undefined): Promise<{ status: number; text: string }> {
    const headers = { 'content-type': 'application/json' };
    if (term && this.#writer) return this.#writer.request(url, term, { method: 'POST', headers, body, signal });
    const res = await fetch(url, { method: 'POST', headers, body, signal });
    return { status: res.status, text: await res.text() };
  }

  async #sendTo(url: string, body: string, signal: AbortSignal, term: WriteTerm | undefined): Promise<UrlOutcome> {
    const outcome: UrlOutcome = { url, ok: false, attempts: 0 };
    for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
      if (signal.aborted) break;
      outcome.attempts = attempt;
      let retryable = true;
      try {
        const res = await this.#post(`${url}/api/v2/alerts`, body, AbortSignal.any([signal, AbortSignal.timeout(this.#timeoutMs)]), term);
        outcome.status = res.status;
        const text = res.text;
        if (res.status >= 200 && res.status < 300) {
          outcome.ok = true;
          delete outcome.error;
          break;
        }
        retryable = res.status >= 500 || res.status === 429;
        outcome.error = `HTTP ${res.status}: ${text.slice(0, 200)}`;
      } catch (err) {
        if (isPortalError(err, ErrorCode.TermExpired)) throw err; // fenced: nothing was sent, and nothing more may be
        if (signal.aborted) break;
        const e = err as Error & { cause?: { code?: string } };
        outcome.error = e.name === 'TimeoutError' ? `timed out after ${this.#timeoutMs} ms` : `${e.message}${e.cause?.code ? ` (${e.cause.code})` : ''}`;
      }
      this.#metrics?.sends.inc({ url, outcome: 'error' });
      if (!retryable || attempt === this.#maxAttempts) break;
      // Cut short only by an abort; send() rethrows it.
      if (!(await sleep(backoffDelay(attempt - 1, { initialMs: this.#baseDelayMs, maxMs: this.#maxDelayMs }), signal))) break;
    }
    const health = this.#health.get(url)!;
    if (outcome.ok) {
      this.#metrics?.sends.inc({ url, outcome: 'ok' });
      health.consecutiveFailures = 0;
      health.lastSuccessAt = Date.now();
    } else if (!signal.aborted) {
      health.consecutiveFailures++;
      health.lastErrorAt = Date.now();
      health.lastError = outcome.error ?? 'unknown error';
      this.#logger?.warn({ [LogKey.url]: url, [LogKey.attempts]: outcome.attempts, [LogKey.reason]: outcome.error }, 'alertmanager did not accept alerts');
    }
    return outcome;
  }
}
