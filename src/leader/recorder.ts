/**
 * Kubernetes Events on the Lease for leadership changes (what client-go's
 * resourcelock records: reason "LeaderElection", message "<id> became leader"
 * / "<id> stopped leading"). Best effort: a failure is logged, never thrown.
 */
import { randomBytes } from 'node:crypto';
import type { CoreV1Event } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { callOptions, type KubeClient } from '../kube/client.ts';
import type { LeaderEventBus } from './events.ts';
import { LogKey } from '../observability/log-keys.ts';
import { toError } from '../observability/errors.ts';

export interface LeaderEventRecorder {
  record(event: { reason: string; message: string; type?: 'Normal' | 'Warning'; leaseUid?: string }): void;
  /** Waits (bounded) for events still being sent. */
  flush(timeoutMs: number): Promise<void>;
}

export class LeaseEventRecorder implements LeaderEventRecorder {
  readonly #client: KubeClient;
  readonly #lease: { namespace: string; name: string };
  readonly #identity: string;
  readonly #logger: Logger;
  readonly #pending = new Set<Promise<void>>();

  constructor(client: KubeClient, lease: { namespace: string; name: string }, identity: string, logger: Logger) {
    this.#client = client;
    this.#lease = lease;
    this.#identity = identity;
    this.#logger = logger;
  }

  record(event: { reason: string; message: string; type?: 'Normal' | 'Warning'; leaseUid?: string }): void {
    const now = new Date();
    const body: CoreV1Event = {
      apiVersion: 'v1',
      kind: 'Event',
      // client-go names events `<object>.<hex nanotime>`; add randomness for replicas on one clock.
      metadata: { name: `${this.#lease.name}.${Date.now().toString(16)}${randomBytes(3).toString('hex')}`, namespace: this.#lease.namespace },
      involvedObject: {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        name: this.#lease.name,
        namespace: this.#lease.namespace,
        ...(event.leaseUid ? { uid: event.leaseUid } : {}),
      },
      reason: event.reason,
      message: event.message,
      type: event.type ?? 'Normal',
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component: 'portal' },
      reportingComponent: 'portal',
      reportingInstance: this.#identity,
    };
    const p = this.#client.core
      .createNamespacedEvent({ namespace: this.#lease.namespace, body }, callOptions({ timeoutMs: 5000 }))
      .then(
        () => undefined,
        (err: unknown) => this.#logger.warn({ [LogKey.error]: toError(err), [LogKey.reason]: event.reason }, 'could not record leader election event'),
      )
      .finally(() => this.#pending.delete(p));
    this.#pending.add(p);
  }

  async flush(timeoutMs: number): Promise<void> {
    if (this.#pending.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all([...this.#pending]), new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
  }
}

/** Records "<id> became leader" / "<id> stopped leading" from the elector's channel; returns unsubscribe. */
export function subscribeRecorder(events: LeaderEventBus, recorder: LeaderEventRecorder): () => void {
  const offs = [
    events.on('BecameLeader', (e) => recorder.record({ reason: 'LeaderElection', message: `${e.identity} became leader`, leaseUid: e.leaseUid })),
    events.on('LostLeadership', (e) => recorder.record({ reason: 'LeaderElection', message: `${e.identity} stopped leading`, leaseUid: e.leaseUid })),
  ];
  return () => offs.forEach((off) => off());
}
