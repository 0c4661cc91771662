/**
 * ResilientInformer: a list+watch cache that survives what client-node's
 * makeInformer does not.
 *
 * Why not makeInformer: in 1.4.0 it stops for good on any error other than
 * 410, emits an AbortError `error` when stopped deliberately, never asks for
 * bookmarks (so a dead connection is indistinguishable from a quiet resource),
 * and yields model instances (Dates) from the list but plain JSON from the
 * watch. Here the list is a plain JSON GET and the watch uses client-node's
 * `Watch` with `allowWatchBookmarks=true`, so:
 * - list items and watch objects have one shape (plain JSON, with the list
 *   items stamped with the kind/apiVersion that watch objects carry);
 * - any error restarts list/watch with capped exponential backoff; a
 *   deliberate stop (the start() signal) never restarts;
 * - 410 Expired (as a response status or as an ERROR event) relists;
 * - a watch that delivers nothing (no event, no bookmark) for `staleAfterMs`
 *   is torn down and resumed from the last resourceVersion.
 * Readiness is `synced && !stale`.
 */
import { Watch } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { KubeObject } from '../types/kubernetes.ts';
import { Backoff, sleep, type BackoffOptions } from '../util/backoff.ts';
import type { KubeClient } from './client.ts';
import { kubeGetJson } from './raw-get.ts';
import { LogKey } from '../observability/log-keys.ts';
import { toError } from '../observability/errors.ts';

export interface InformerConfig {
  /** For logs. */
  name: string;
  /** Collection path, e.g. `/api/v1/namespaces` or `/apis/portal.dev/v1alpha1/portalrules`. */
  path: string;
  /** Stamped on list items (built-in list items carry no kind/apiVersion). */
  apiVersion: string;
  kind: string;
  labelSelector?: string;
  fieldSelector?: string;
  /**
   * A watch that yields nothing (not even a bookmark) for this long is
   * presumed dead and restarted. kube-apiserver sends a bookmark about once a
   * minute to watchers that ask for them, so 2.5 × that avoids false alarms.
   * @default 150000
   */
  staleAfterMs?: number;
  /**
   * Server-side watch timeout; the server ends the watch and it is resumed
   * from the last resourceVersion (client-go picks 5–10 minutes). @default 300
   */
  watchTimeoutSeconds?: number;
  /** Page size for the list. @default 500 */
  pageSize?: number;
  /** Restart pacing after errors. @default { initialMs: 200, maxMs: 30000 } */
  backoff?: BackoffOptions;
  /**
   * Applied to every object (list items and watch events) before it is
   * cached or handed to handlers, e.g. {@link stripManagedFields}.
   */
  transform?: <O extends KubeObject>(object: O) => O;
}

/**
 * Drops `metadata.managedFields` (server-side apply bookkeeping): about half
 * of a typical Pod as the API server returns it, and nothing a policy reads.
 * controller-runtime offers the same transform for its caches.
 */
export function stripManagedFields<T extends KubeObject>(object: T): T {
  const meta = object.metadata as (Record<string, unknown> & { managedFields?: unknown }) | undefined;
  if (!meta || meta.managedFields === undefined) return object;
  const { managedFields: _dropped, ...rest } = meta;
  return { ...object, metadata: rest };
}

export type InformerEvent<T> =
  | { type: 'add'; object: T }
  | { type: 'update'; object: T; old: T }
  | { type: 'delete'; object: T };

export type InformerHandler<T> = (event: InformerEvent<T>) => void;

interface ListResponse<T> {
  metadata?: { resourceVersion?: string; continue?: string };
  items?: T[];
}

type WatchEnd = 'closed' | 'expired' | 'stale' | 'aborted';

export interface InformerStats {
  lists: number;
  watches: number;
  errors: number;
  staleRestarts: number;
  expiredRelists: number;
  /** BOOKMARK events received (each one refreshes the staleness clock). */
  bookmarks: number;
}

export function objectKey(obj: Pick<KubeObject, 'metadata'>): string {
  const ns = obj.metadata?.namespace;
  const name = obj.metadata?.name ?? '';
  return ns ? `${ns}/${name}` : name;
}

function isExpired(err: unknown): boolean {
  const e = err as { statusCode?: unknown; code?: unknown } | null;
  return e?.statusCode === 410 || e?.code === 410;
}

export class ResilientInformer<T extends KubeObject = KubeObject> {
  readonly name: string;
  readonly #client: KubeClient;
  readonly #config: Required<Omit<InformerConfig, 'labelSelector' | 'fieldSelector' | 'backoff' | 'transform'>> & InformerConfig;
  readonly #logger: Logger;
  readonly #cache = new Map<string, T>();
  readonly #handlers = new Set<InformerHandler<T>>();
  readonly #syncWaiters = new Set<() => void>();
  readonly #stats: InformerStats = { lists: 0, watches: 0, errors: 0, staleRestarts: 0, expiredRelists: 0, bookmarks: 0 };
  #resourceVersion = '';
  #synced = false;
  #watching = false;
  #lastActivity = performance.now();
  #started = false;
  #failure: { status: number | undefined; message: string } | undefined;

  constructor(client: KubeClient, config: InformerConfig, logger: Logger) {
    this.name = config.name;
    this.#client = client;
    this.#config = { staleAfterMs: 150_000, watchTimeoutSeconds: 300, pageSize: 500, ...config };
    this.#logger = logger.child({ [LogKey.informer]: config.name });
  }

  /** Subscribes to add/update/delete; returns an unsubscribe function. */
  onEvent(handler: InformerHandler<T>): () => void {
    this.#handlers.add(handler);
    return () => this.#handlers.delete(handler);
  }

  get(name: string, namespace?: string): T | undefined {
    return this.#cache.get(namespace ? `${namespace}/${name}` : name);
  }

  list(namespace?: string): T[] {
    const all = [...this.#cache.values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata?.namespace === namespace);
  }

  /** True once the first list completed (latches). */
  hasSynced(): boolean {
    return this.#synced;
  }

  /** True while no watch is established, or it has been silent past the bound. */
  isStale(): boolean {
    return !this.#watching || performance.now() - this.#lastActivity > this.#config.staleAfterMs;
  }

  ready(): boolean {
    return this.#synced && !this.isStale();
  }

  get resourceVersion(): string {
    return this.#resourceVersion;
  }

  /**
   * Why the last list or watch attempt failed (`status`: the HTTP status, e.g.
   * 403 when RBAC does not allow it), until a list succeeds again.
   */
  failure(): { status: number | undefined; message: string } | undefined {
    return this.#failure;
  }

  stats(): Readonly<InformerStats> {
    return { ...this.#stats };
  }

  /** Resolves once synced; rejects with the abort reason if `signal` aborts first. */
  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.#syncWaiters.delete(done);
        reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
      };
      const done = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      if (signal?.aborted) {
        onAbort();
        return;
      }
      this.#syncWaiters.add(done);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Runs until `signal` aborts; resolves after the watch is torn down. */
  async start(signal: AbortSignal): Promise<void> {
    if (this.#started) throw new Error(`informer ${this.name} started twice`);
    this.#started = true;
    const backoff = new Backoff({ initialMs: 200, maxMs: 30_000, ...this.#config.backoff });
    let needList = true;
    while (!signal.aborted) {
      try {
        if (needList) {
          await this.#list(signal);
          needList = false;
        }
        const startedAt = performance.now();
        const end = await this.#watchOnce(signal);
        if (end === 'aborted') break;
        if (end === 'expired') {
          this.#stats.expiredRelists++;
          this.#logger.info('watch expired (410), relisting');
          needList = true;
          continue;
        }
        if (end === 'stale') {
          this.#stats.staleRestarts++;
          this.#logger.warn({ [LogKey.staleAfterMs]: this.#config.staleAfterMs }, 'watch silent past bound, restarting it');
        }
        // A server that closes watches at once would otherwise make this a hot loop.
        if (performance.now() - startedAt < 1000) await sleep(backoff.next(), signal);
        else backoff.reset();
      } catch (err) {
        if (signal.aborted) break;
        this.#stats.errors++;
        const status = (err as { statusCode?: unknown; code?: unknown } | null)?.statusCode ?? (err as { code?: unknown } | null)?.code;
        this.#failure = { status: typeof status === 'number' ? status : undefined, message: (err as Error).message };
        if (isExpired(err)) {
          this.#stats.expiredRelists++;
          needList = true;
        }
        const delay = backoff.next();
        this.#logger.warn({ [LogKey.error]: toError(err), [LogKey.retryInMs]: Math.round(delay) }, 'list/watch failed, retrying');
        await sleep(delay, signal);
      }
    }
    this.#watching = false;
  }

  async #list(signal: AbortSignal): Promise<void> {
    this.#stats.lists++;
    const items: T[] = [];
    let resourceVersion = '';
    let cont: string | undefined;
    do {
      const query = new URLSearchParams({ limit: String(this.#config.pageSize) });
      if (this.#config.labelSelector) query.set('labelSelector', this.#config.labelSelector);
      if (this.#config.fieldSelector) query.set('fieldSelector', this.#config.fieldSelector);
      if (cont) query.set('continue', cont);
      const page = await kubeGetJson<ListResponse<T>>(this.#client, `${this.#config.path}?${query}`, signal);
      for (const item of page.items ?? []) items.push(this.#normalise(item));
      resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
      cont = page.metadata?.continue || undefined;
    } while (cont);
    this.#replace(items);
    this.#resourceVersion = resourceVersion;
    this.#failure = undefined;
    if (!this.#synced) {
      this.#synced = true;
      this.#logger.info({ [LogKey.objects]: items.length, [LogKey.resourceVersion]: resourceVersion }, 'informer synced');
      for (const done of [...this.#syncWaiters]) done();
      this.#syncWaiters.clear();
    }
  }

  /** List items lack kind/apiVersion for built-in types; watch objects have them. */
  #normalise(item: T): T {
    const stamped = { apiVersion: this.#config.apiVersion, kind: this.#config.kind, ...item };
    return this.#config.transform ? this.#config.transform(stamped) : stamped;
  }

  /** Replaces the cache with a fresh list, emitting the differences. */
  #replace(items: T[]): void {
    const fresh = new Map(items.map((o) => [objectKey(o), o] as const));
    for (const [key, old] of this.#cache) {
      if (!fresh.has(key)) {
        this.#cache.delete(key);
        this.#emit({ type: 'delete', object: old });
      }
    }
    for (const [key, obj] of fresh) this.#upsert(key, obj);
  }

  #upsert(key: string, obj: T): void {
    const old = this.#cache.get(key);
    this.#cache.set(key, obj);
    if (!old) this.#emit({ type: 'add', object: obj });
    else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.#emit({ type: 'update', object: obj, old });
  }

  #emit(event: InformerEvent<T>): void {
    for (const handler of this.#handlers) {
      try {
        handler(event);
      } catch (err) {
        this.#logger.error({ [LogKey.error]: toError(err) }, 'informer handler threw');
      }
    }
  }

  #watchOnce(signal: AbortSignal): Promise<WatchEnd> {
    // An abort listener added to an already-aborted signal never fires.
    if (signal.aborted) return Promise.resolve('aborted');
    this.#stats.watches++;
    this.#lastActivity = performance.now();
    return new Promise<WatchEnd>((resolve, reject) => {
      let settled = false;
      let controller: AbortController | undefined;
      const staleCheck = setInterval(
        () => {
          if (performance.now() - this.#lastActivity > this.#config.staleAfterMs) finish('stale');
        },
        Math.max(50, Math.min(1000, this.#config.staleAfterMs / 4)),
      );
      const onAbort = () => finish('aborted');
      const finish = (end: WatchEnd | Error) => {
        if (settled) return;
        settled = true;
        this.#watching = false;
        clearInterval(staleCheck);
        signal.removeEventListener('abort', onAbort);
        controller?.abort();
        if (end instanceof Error) reject(end);
        else resolve(end);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      const query: Record<string, string | number | boolean> = {
        resourceVersion: this.#resourceVersion,
        allowWatchBookmarks: true,
        timeoutSeconds: this.#config.watchTimeoutSeconds,
      };
      if (this.#config.labelSelector) query.labelSelector = this.#config.labelSelector;
      if (this.#config.fieldSelector) query.fieldSelector = this.#config.fieldSelector;
      const onEvent = (type: string, obj: T & { code?: number }) => {
        if (settled) return;
        this.#lastActivity = performance.now();
        if (type === 'ERROR') {
          if (obj?.code === 410) finish('expired');
          else finish(new Error(`watch error event: ${JSON.stringify(obj).slice(0, 200)}`));
          return;
        }
        const rv = obj?.metadata?.resourceVersion;
        if (rv) this.#resourceVersion = rv;
        if (type === 'BOOKMARK') {
          this.#stats.bookmarks++;
          return;
        }
        if (this.#config.transform) obj = this.#config.transform(obj);
        const key = objectKey(obj);
        if (type === 'DELETED') {
          const old = this.#cache.get(key);
          this.#cache.delete(key);
          this.#emit({ type: 'delete', object: old ?? obj });
        } else if (type === 'ADDED' || type === 'MODIFIED') {
          this.#upsert(key, obj);
        }
      };
      const onDone = (err: unknown) => {
        if (settled) return;
        if (signal.aborted) finish('aborted');
        else if (err && isExpired(err)) finish('expired');
        else if (err) finish(toError(err));
        else finish('closed');
      };
      new Watch(this.#client.kubeConfig).watch(this.#config.path, query, onEvent, onDone).then(
        (c) => {
          controller = c;
          if (settled) c.abort();
          else {
            // The response headers arrived: the watch is established.
            this.#watching = true;
            this.#failure = undefined;
            this.#lastActivity = performance.now();
          }
        },
        (err: unknown) => finish(toError(err)),
      );
    });
  }
}
