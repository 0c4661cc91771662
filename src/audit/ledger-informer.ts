/**
 * Every replica watches the ledger ConfigMaps (ledger.ts) and feeds them to
 * its idempotency store, so a follower that becomes leader knows which side
 * effects its predecessor already made.
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../kube/client.ts';
import { ResilientInformer } from '../kube/informer.ts';
import type { KubeObject } from '../policy/types.ts';
import type { IdempotencyStore } from './idempotency.ts';
import { LEDGER_LABELS } from './ledger.ts';

export function ledgerInformer(client: KubeClient, installNamespace: string, store: IdempotencyStore, logger: Logger, options: { staleAfterMs?: number } = {}): ResilientInformer<KubeObject> {
  const informer = new ResilientInformer<KubeObject>(
    client,
    {
      name: 'audit-ledger',
      path: `/api/v1/namespaces/${encodeURIComponent(installNamespace)}/configmaps`,
      apiVersion: 'v1',
      kind: 'ConfigMap',
      labelSelector: Object.entries(LEDGER_LABELS).map(([k, v]) => `${k}=${v}`).join(','),
      ...options,
    },
    logger,
  );
  informer.onEvent((e) => {
    const data = (o: KubeObject | undefined) => (o as { data?: Record<string, string> } | undefined)?.data;
    if (e.type === 'add') store.observeLedger(data(e.object));
    else if (e.type === 'update') store.observeLedger(data(e.object), data(e.old));
    else store.observeLedger(undefined, data(e.object));
  });
  return informer;
}
