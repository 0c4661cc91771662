/**
 * Namespace name → labels, for namespaceSelector matching at admission and in
 * the audit. A thin view over a ResilientInformer of core/v1 Namespaces.
 */
import type { Logger } from 'pino';
import type { KubeObject } from '../types/kubernetes.ts';
import type { KubeClient } from './client.ts';
import { ResilientInformer, type InformerConfig } from './informer.ts';

export class NamespaceLabelCache {
  readonly informer: ResilientInformer<KubeObject>;

  constructor(client: KubeClient, logger: Logger, options: Pick<InformerConfig, 'staleAfterMs' | 'backoff' | 'watchTimeoutSeconds'> = {}) {
    this.informer = new ResilientInformer<KubeObject>(
      client,
      { name: 'namespaces', path: '/api/v1/namespaces', apiVersion: 'v1', kind: 'Namespace', ...options },
      logger,
    );
  }

  /**
   * Labels of a namespace, or `undefined` when it is not (yet) known: callers
   * must treat unknown as "cannot decide" rather than "no labels".
   */
  labels(namespace: string): Record<string, string> | undefined {
    const ns = this.informer.get(namespace);
    if (!ns) return undefined;
    return { ...(ns.metadata?.labels ?? {}) };
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
