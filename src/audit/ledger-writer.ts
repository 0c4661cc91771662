/**
 * Writes the audit ledger ConfigMaps (ledger.ts has the layout, idempotency.ts
 * the protocol). Leader-only: every write is paced by the API write limiter
 * and fenced by `term.assertValid()` immediately before it is sent.
 */
import type { CoreV1Api } from '@kubernetes/client-node';
import { apiStatusCode, callOptions, describeApiError, mergePatchOptions } from '../kube/client.ts';
import type { TokenBucket } from '../kube/rate-limiter.ts';
import type { LeaderTerm } from '../leader/term.ts';
import { ErrorCode, PortalError } from '../observability/errors.ts';
import type { EmittedAction } from './idempotency.ts';
import { LEDGER_LABELS, ledgerPatch, ledgerShardName } from './ledger.ts';

export interface LedgerWriterOptions {
  core: CoreV1Api;
  /** Install namespace. */
  namespace: string;
  writeLimiter: TokenBucket;
  /** Per-request timeout. @default 10000 */
  timeoutMs?: number;
}

export class LedgerWriter {
  readonly #o: Required<LedgerWriterOptions>;

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
    for (const [name, s] of shards) await this.#patchShard(name, ledgerPatch(s.set, s.remove), term, signal);
  }

  async #patchShard(name: string, patch: { data: Record<string, string | null> }, term: LeaderTerm, signal: AbortSignal): Promise<void> {
    const { core, namespace, writeLimiter, timeoutMs } = this.#o;
    for (let attempt = 0; attempt < 2; attempt++) {
      await writeLimiter.take(signal);
      term.assertValid();
      try {
        await core.patchNamespacedConfigMap({ name, namespace, body: patch }, mergePatchOptions({ signal, timeoutMs }));
        return;
      } catch (err) {
        if (apiStatusCode(err) !== 404) throw new PortalError(ErrorCode.Kube, `audit ledger ${namespace}/${name}: ${describeApiError(err)}`, { cause: err });
      }
      // First write to this shard: create it (only the entries being set; removals are moot).
      const data = Object.fromEntries(Object.entries(patch.data).filter((e): e is [string, string] => e[1] !== null));
      await writeLimiter.take(signal);
      term.assertValid();
      try {
        await core.createNamespacedConfigMap({ namespace, body: { metadata: { name, namespace, labels: { ...LEDGER_LABELS } }, data } }, callOptions({ signal, timeoutMs }));
        return;
      } catch (err) {
        // 409: another write created it first; patch again.
        if (apiStatusCode(err) !== 409) throw new PortalError(ErrorCode.Kube, `audit ledger ${namespace}/${name}: ${describeApiError(err)}`, { cause: err });
      }
    }
    throw new PortalError(ErrorCode.Kube, `audit ledger ${namespace}/${name}: could not create or patch`);
  }
}
