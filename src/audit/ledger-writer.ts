/**
 * Writes the audit ledger ConfigMaps (ledger.ts has the layout, idempotency.ts
 * the protocol). Leader-only: every write is paced by the API write limiter,
 * fenced by `term.assertValid()` before it is started and again at the socket
 * write (through the replica's FencedWriter, kube/fenced-writer.ts), and conditional on
 * the shard's resourceVersion.
 */
import { apiStatusCode, callOptions, describeApiError } from '../kube/client.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import type { TokenBucket } from '../kube/rate-limiter.ts';
import type { LeaderTerm } from '../util/leader-term.ts';
import { ErrorCode, PortalError, isPortalError } from '../observability/errors.ts';
import type { EmittedAction } from './idempotency.ts';
import { LEDGER_LABELS, ledgerPatch, ledgerShardName } from './ledger.ts';

export interface LedgerWriterOptions {
  /** The replica's leader-only writer (reads of a shard go through it too, unfenced). */
  writer: FencedWriter;
  /** Install namespace. */
  namespace: string;
  writeLimiter: TokenBucket;
  /** Per-request timeout. @default 10000 */
  timeoutMs?: number;
}

/**
 * Attempts per shard write. Conflicts come from another writer (a stale
 * leader's late request, or a successor) — this writer serialises its own
 * writes per shard — so one re-read nearly always settles it; three leaves
 * room for a create race on first use.
 */
const MAX_ATTEMPTS = 3;

export class LedgerWriter {
  readonly #o: Required<LedgerWriterOptions>;
  /** resourceVersion of each shard as this writer last saw it (its own writes' responses, or a read). */
  readonly #rv = new Map<string, string>();
  /** Writes to one shard run one after another, so this writer's precondition never conflicts with itself. */
  readonly #tails = new Map<string, Promise<void>>();

  constructor(options: LedgerWriterOptions) {
    this.#o = { timeoutMs: 10_000, ...options };
  }

  /**
   * Sets and removes entries (one merge patch per shard touched). Creates a
   * shard on first use. Throws PortalError(TermExpired) when fenced, Kube on
   * API errors.
   */
  async write(set: Record<string, EmittedAction>, remove: readonly string[], term: LeaderTerm, signal: AbortSignal): Promise<void> {
    const shards = new Map<string, { set: Record<string, EmittedAction>; remove: string[] }>();
    const shard = (key: string) => {
      const name = ledgerShardName(key);
      let s = shards.get(name);
      if (!s) shards.set(name, (s = { set: {}, remove: [] }));
      return s;
    };
    for (const [key, entry] of Object.entries(set)) shard(key).set[key] = entry;
    for (const key of remove) shard(key).remove.push(key);
    for (const [name, s] of shards) await this.#serialised(name, () => this.#patchShard(name, ledgerPatch(s.set, s.remove), term, signal));
  }

  async #serialised(name: string, run: () => Promise<void>): Promise<void> {
    const previous = this.#tails.get(name) ?? Promise.resolve();
    const mine = previous.then(run, run);
    const tail = mine.catch(() => {});
    this.#tails.set(name, tail);
    try {
      await mine;
    } finally {
      if (this.#tails.get(name) === tail) this.#tails.delete(name);
    }
  }

  /**
   * One merge patch, conditional on the shard's resourceVersion as last
   * observed: a request delayed across a pause (ADR 0004, residual window)
   * fails with 409 if the shard was written since — by a successor, say —
   * instead of landing on top of it. On 409 the shard is re-read and the
   * patch retried, fenced again, so only a still-valid leader retries.
   */
  async #patchShard(name: string, patch: { data: Record<string, string | null> }, term: LeaderTerm, signal: AbortSignal): Promise<void> {
    const { writer, namespace, writeLimiter, timeoutMs } = this.#o;
    const core = writer.core;
    const fail = (err: unknown) => new PortalError(ErrorCode.Kube, `audit ledger ${namespace}/${name}: ${describeApiError(err)}`, { cause: err });
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      let rv = this.#rv.get(name);
      if (rv === undefined) {
        // A read is not a side effect: it happens before the fence.
        try {
          rv = (await core.readNamespacedConfigMap({ name, namespace }, callOptions({ signal, timeoutMs }))).metadata?.resourceVersion;
        } catch (err) {
          if (apiStatusCode(err) !== 404) throw fail(err);
        }
      }
      if (rv === undefined) {
        // First write to this shard: create it (only the entries being set; removals are moot).
        const data = Object.fromEntries(Object.entries(patch.data).filter((e): e is [string, string] => e[1] !== null));
        await writeLimiter.take(signal);
        term.assertValid();
        try {
          const created = await core.createNamespacedConfigMap({ namespace, body: { metadata: { name, namespace, labels: { ...LEDGER_LABELS } }, data } }, writer.options(term, { signal, timeoutMs }));
          this.#remember(name, created.metadata?.resourceVersion);
          return;
        } catch (err) {
          // 409: created meanwhile; read it and patch.
          if (isPortalError(err) || apiStatusCode(err) !== 409) throw isPortalError(err) ? err : fail(err);
          continue;
        }
      }
      await writeLimiter.take(signal);
      term.assertValid();
      try {
        const body = { metadata: { resourceVersion: rv }, ...patch };
        const patched = await core.patchNamespacedConfigMap({ name, namespace, body }, writer.mergePatchOptions(term, { signal, timeoutMs }));
        this.#remember(name, patched.metadata?.resourceVersion);
        return;
      } catch (err) {
        if (isPortalError(err)) throw err;
        const code = apiStatusCode(err);
        // 409: written by someone else since we saw it; 404: deleted. Either way, look again.
        if (code !== 409 && code !== 404) throw fail(err);
        this.#rv.delete(name);
      }
    }
    throw new PortalError(ErrorCode.Kube, `audit ledger ${namespace}/${name}: still conflicting after ${MAX_ATTEMPTS} attempts`);
  }

  #remember(name: string, rv: string | undefined): void {
    if (rv === undefined) this.#rv.delete(name);
    else this.#rv.set(name, rv);
  }
}
