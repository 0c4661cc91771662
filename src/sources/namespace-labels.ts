/**
 * Namespace name → labels, for namespaceSelector matching at admission and in
 * the audit. A ResilientInformer of core/v1 Namespaces feeding a
 * NamespaceLabelStore, which the evaluation workers mirror.
 */
import type { Logger } from 'pino';
import { NamespaceLabelStore } from '../policy/namespace-label-store.ts';
import type { KubeObject } from '../types/kubernetes.ts';
import type { KubeClient } from '../kube/client.ts';
import { ResilientInformer, type InformerConfig } from '../kube/informer.ts';

export class NamespaceLabelCache {
  readonly informer: ResilientInformer<KubeObject>;
  /** The labels of every namespace the informer holds. */
  readonly store = new NamespaceLabelStore();

  constructor(client: KubeClient, logger: Logger, options: Pick<InformerConfig, 'staleAfterMs' | 'backoff' | 'watchTimeoutSeconds'> = {}) {
    this.informer = new ResilientInformer<KubeObject>(
      client,
      { name: 'namespaces', path: '/api/v1/namespaces', apiVersion: 'v1', kind: 'Namespace', ...options },
      logger,
    );
    this.informer.onEvent((event) => {
      const name = event.object.metadata?.name;
      if (name === undefined) return;
      this.store.set(name, event.type === 'delete' ? null : (event.object.metadata?.labels ?? {}));
    });
  }

  /**
   * Labels of a namespace, or `undefined` when it is not (yet) known: callers
   * must treat unknown as "cannot decide" rather than "no labels".
   */
  labels(namespace: string): Record<string, string> | undefined {
    return this.store.labels(namespace);
  }

  start(signal: AbortSignal): Promise<void> {
    return this.informer.start(signal);
  }

  waitForSync(signal?: AbortSignal): Promise<void> {
    return this.informer.waitForSync(signal);
  }

  hasSynced(): boolean {
    return this.informer.hasSynced();
  }

  ready(): boolean {
    return this.informer.ready();
  }
}
