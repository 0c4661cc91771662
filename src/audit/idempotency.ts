/**
 * The idempotency store: which audit side effects have been emitted, so that
 * none is emitted twice within its window — across leader changes too.
 *
 * ## Design (issue 5 part 3; mirrored in adr/0005)
 *
 * Key: `sha256(rule, group/version/kind, namespace, name, actionType)` in hex
 * ({@link actionKey}). Fields are joined with NUL, which no Kubernetes name
 * contains, so distinct tuples never collide textually. The object UID is not
 * part of the key (the issue fixes the tuple): a StatefulSet pod recreated
 * under the same name inherits the window of its predecessor, which is what
 * stops an evict → recreate → evict loop.
 *
 * The store is an lru-cache (bounded `max`, per-entry TTL = the action's
 * window). It is WARM ON EVERY REPLICA: the leader records what it emits, and
 * followers learn the same keys from what they already watch, so a new leader
 * starts with the same knowledge and does not repeat its predecessor:
 *
 * (a) label / annotate: the effect is visible on the object itself, and the
 *     same merge patch also sets a provenance annotation
 *     `actions.portal.dev/<type>.<hash(rule)>` = `{rule, epoch, at}` (see
 *     action-annotation.ts). Followers feed every informer object to
 *     {@link IdempotencyStore.observeObject}. One atomic patch carries effect
 *     and record, so there is no crash window at all.
 * (b) Reports are NOT keyed here: a report is idempotent by content.
 *     Every replica watches the reports, and the writer compares the desired
 *     report with the observed one (`reportContentEqual`), ignoring
 *     timestamps and the epoch, so a new leader rewrites nothing that is
 *     already right. The epoch property still tells which term wrote it.
 * (c) alert / evict: effects outside the object (Alertmanager) or that make
 *     it disappear. They go through a ledger ConfigMap `portal-audit-ledger`
 *     in the install namespace (ledger.ts): data key = action key, value =
 *     `{s: intent|done, e: epoch, t: at, u: until, st: startsAt}`. Followers
 *     watch it and feed it to {@link IdempotencyStore.observeLedger}.
 *
 * The crash window for (c): the leader (1) calls `term.assertValid()` and
 * writes the ledger entry `intent` (a merge patch of one data key, so
 * concurrent workers never clobber each other), (2) calls
 * `term.assertValid()` again immediately before the send and sends, (3) marks
 * the entry `done` (or removes it when the send definitively failed). A
 * successor treats `intent` exactly like `done`: "probably sent". So a crash
 * between (1) and (2) loses at most one send until the window `u` expires —
 * for alerts that is the re-send interval, and the alert is then sent by the
 * new leader — while a crash between (2) and (3) never causes a second send.
 * This is at-most-once inside the window and at-least-once across windows.
 * Both alerts and evictions do better, by asking the world. Evictions: an
 * unconfirmed `intent` for a pod that is still violating is settled by
 * reading the pod (ActionExecutor.evict): gone, terminating, or a different
 * UID (re-created under its name) → it was evicted: mark it done; the same
 * pod still running → it never was: evict now. Evicting one pod twice is
 * impossible (the first eviction would have removed it). For alerts: it settles an unconfirmed `intent`
 * by asking Alertmanager (`GET /api/v2/alerts`) whether the alert is active —
 * active: mark it done; absent: send it now (ActionExecutor.alert). So a crash
 * or a fenced term between intent and send neither loses nor repeats an alert
 * or an eviction.
 *
 * Wall-clock time is used for windows (`at`, `until`) because they cross
 * processes via the ledger; fencing never uses it (LeaderTerm is monotonic).
 * Clock skew between replicas shifts a re-send by the skew, which the alert
 * `endsAt` margin (one full re-send interval) absorbs.
 */
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { ActionType, GroupVersionKind, KubeObject } from '../policy/types.ts';
import { parseActionAnnotations } from './action-annotation.ts';
import { decodeLedgerEntry, type EmittedAction } from './ledger.ts';

export type { EmittedAction };

export interface ActionKeyParts {
  /** Rule key as in RuleVerdict.rule (`name` or `namespace/name`). */
  rule: string;
  gvk: GroupVersionKind;
  /** "" for cluster-scoped objects. */
  namespace: string;
  name: string;
  actionType: ActionType;
}

export function actionKey(p: ActionKeyParts): string {
  const gvk = `${p.gvk.group}/${p.gvk.version}/${p.gvk.kind}`;
  return createHash('sha256').update([p.rule, gvk, p.namespace, p.name, p.actionType].join('\0')).digest('hex');
}

export interface IdempotencyStoreOptions {
  /**
   * Most keys kept. 10,000 objects × up to 4 action types is the issue-5
   * sizing point; an entry costs ~300 bytes, so 50,000 is ~15 MB. @default 50000
   */
  max?: number;
  /** Window for entries that carry no `until`. @default 86400000 (24 h) */
  ttlMs?: number;
  /** Wall clock in ms (injectable for tests). @default Date.now */
  now?: () => number;
}

export class IdempotencyStore {
  readonly #cache: LRUCache<string, EmittedAction>;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(options: IdempotencyStoreOptions = {}) {
    this.#ttlMs = options.ttlMs ?? 86_400_000;
    this.#now = options.now ?? Date.now;
    this.#cache = new LRUCache({ max: options.max ?? 50_000, ttl: this.#ttlMs,
      // ttlResolution 0: read the clock on every check instead of caching it
      // for a millisecond, so an injected clock is honoured exactly.
      ttlResolution: 0,
      perf: { now: this.#now },
    });
  }

  get size(): number {
    return this.#cache.size;
  }

  /** True while the key's window is open: do not emit it again. */
  has(key: string): boolean {
    return this.#cache.has(key);
  }

  get(key: string): EmittedAction | undefined {
    return this.#cache.get(key);
  }

  /**
   * Records an emission (or intent). The window ends at `until` when given,
   * else after the default TTL. A record never shortens a newer one: an older
   * observation arriving late (a lagging watch) does not reopen a window.
   */
  record(key: string, action: EmittedAction): void {
    const existing = this.#cache.get(key);
    if (existing && existing.at > action.at) return;
    const ttl = action.until !== undefined ? action.until - this.#now() : this.#ttlMs;
    if (ttl <= 0) {
      // Already expired: it tells us nothing except that the old window is over.
      if (existing && existing.at <= action.at) this.#cache.delete(key);
      return;
    }
    this.#cache.set(key, action, { ttl });
  }

  /** Closes a window early (violation resolved, send definitively failed). */
  forget(key: string): void {
    this.#cache.delete(key);
  }

  /**
   * Learns the label/annotate actions recorded on an object by its
   * provenance annotations. Returns how many keys were recorded.
   */
  observeObject(gvk: GroupVersionKind, object: KubeObject): number {
    const meta = object.metadata;
    if (!meta?.name) return 0;
    let n = 0;
    for (const mark of parseActionAnnotations(meta.annotations)) {
      const key = actionKey({ rule: mark.rule, gvk, namespace: meta.namespace ?? '', name: meta.name, actionType: mark.actionType });
      this.record(key, { epoch: mark.epoch, at: mark.at, state: 'done' });
      n++;
    }
    return n;
  }

  /**
   * Learns from the ledger ConfigMap's data. Keys that were in `previous`
   * and are gone from `current` were closed by the leader (alert resolved,
   * send failed) and are forgotten. Returns how many keys were recorded.
   */
  observeLedger(current: Record<string, string> | undefined, previous?: Record<string, string>): number {
    let n = 0;
    for (const [key, value] of Object.entries(current ?? {})) {
      const entry = decodeLedgerEntry(value);
      if (!entry) continue;
      this.record(key, entry);
      n++;
    }
    for (const key of Object.keys(previous ?? {})) {
      if (!current || !(key in current)) this.forget(key);
    }
    return n;
  }
}
