/**
 * One ResilientInformer per audited kind, started and stopped as the set of
 * matched kinds changes (rules come and go). Each informer runs under its own
 * AbortController, a child of the controller's signal, so removing a kind
 * tears down exactly its watch; `stopAll()` resolves after every watch ended.
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../kube/client.ts';
import { ResilientInformer, stripManagedFields, type InformerEvent } from '../kube/informer.ts';
import type { KubeObject } from '../policy/types.ts';
import { apiVersionOf, collectionPath, type KindResource } from './kind-resources.ts';

interface Running {
  resource: KindResource;
  informer: ResilientInformer<KubeObject>;
  controller: AbortController;
  done: Promise<void>;
}

export type KindEventHandler = (resource: KindResource, event: InformerEvent<KubeObject>) => void;

/**
 * What the audit can see of a kind: `listed` (its informer has listed once),
 * `forbidden` (the list got 403: RBAC does not let Portal list or watch it),
 * `pending` (not listed yet, or failing for another reason), `absent` (no
 * informer: no rule matches it, or it is not resolved).
 */
export type KindAccess = { state: 'listed' } | { state: 'forbidden'; message: string } | { state: 'pending'; message?: string } | { state: 'absent' };

export class KindInformers {
  readonly #client: KubeClient;
  readonly #logger: Logger;
  readonly #onEvent: KindEventHandler;
  readonly #running = new Map<string, Running>();
  /** Watch bookkeeping overrides for tests (short stale bounds). */
  readonly #staleAfterMs: number | undefined;

  readonly #onSynced: ((resource: KindResource) => void) | undefined;

  /** `onSynced`: a kind's informer listed for the first time (e.g. after RBAC was granted). */
  constructor(client: KubeClient, logger: Logger, onEvent: KindEventHandler, options: { staleAfterMs?: number; onSynced?: (resource: KindResource) => void } = {}) {
    this.#client = client;
    this.#logger = logger;
    this.#onEvent = onEvent;
    this.#staleAfterMs = options.staleAfterMs;
    this.#onSynced = options.onSynced;
  }

  static key(group: string, kind: string): string {
    return `${group}/${kind}`;
  }

  /** Starts informers for new kinds and stops those no longer wanted. Returns the kinds started. */
  sync(wanted: readonly KindResource[], signal: AbortSignal): { started: KindResource[]; stopped: KindResource[] } {
    const want = new Map(wanted.map((r) => [KindInformers.key(r.group, r.kind), r]));
    const stopped: KindResource[] = [];
    for (const [key, r] of this.#running) {
      if (want.has(key)) continue;
      r.controller.abort();
      this.#running.delete(key);
      stopped.push(r.resource);
    }
    const started: KindResource[] = [];
    for (const [key, resource] of want) {
      if (this.#running.has(key) || signal.aborted) continue;
      const informer = new ResilientInformer<KubeObject>(
        this.#client,
        {
          name: `audit-${resource.resource}${resource.group ? `.${resource.group}` : ''}`,
          path: collectionPath(resource),
          apiVersion: apiVersionOf(resource),
          kind: resource.kind,
          // The audit holds every object of every matched kind; managedFields are half of a Pod's bytes (issue 20).
          transform: stripManagedFields,
          ...(this.#staleAfterMs !== undefined ? { staleAfterMs: this.#staleAfterMs } : {}),
        },
        this.#logger,
      );
      informer.onEvent((e) => this.#onEvent(resource, e));
      const controller = new AbortController();
      const onParentAbort = () => controller.abort();
      signal.addEventListener('abort', onParentAbort, { once: true });
      const done = informer.start(controller.signal).finally(() => signal.removeEventListener('abort', onParentAbort));
      const onSynced = this.#onSynced;
      if (onSynced) informer.waitForSync(controller.signal).then(() => onSynced(resource), () => undefined);
      this.#running.set(key, { resource, informer, controller, done });
      started.push(resource);
    }
    return { started, stopped };
  }

  informer(group: string, kind: string): ResilientInformer<KubeObject> | undefined {
    return this.#running.get(KindInformers.key(group, kind))?.informer;
  }

  resource(group: string, kind: string): KindResource | undefined {
    return this.#running.get(KindInformers.key(group, kind))?.resource;
  }

  all(): Array<{ resource: KindResource; informer: ResilientInformer<KubeObject> }> {
    return [...this.#running.values()].map((r) => ({ resource: r.resource, informer: r.informer }));
  }

  access(group: string, kind: string): KindAccess {
    const informer = this.#running.get(KindInformers.key(group, kind))?.informer;
    if (!informer) return { state: 'absent' };
    // The latest attempt first: RBAC revoked after the first list shows too.
    const failure = informer.failure();
    if (failure?.status === 403) return { state: 'forbidden', message: failure.message };
    if (informer.hasSynced()) return { state: 'listed' };
    return failure ? { state: 'pending', message: failure.message } : { state: 'pending' };
  }

  /** Every running informer has listed once. */
  synced(): boolean {
    return [...this.#running.values()].every((r) => r.informer.hasSynced());
  }

  async waitForSync(signal: AbortSignal): Promise<void> {
    await Promise.all([...this.#running.values()].map((r) => r.informer.waitForSync(signal)));
  }

  async stopAll(): Promise<void> {
    const all = [...this.#running.values()];
    this.#running.clear();
    for (const r of all) r.controller.abort();
    await Promise.allSettled(all.map((r) => r.done));
  }
}
