/**
 * The Lease resource lock: Get / Create / Update of one coordination.k8s.io/v1
 * Lease, and the LeaderElectionRecord view of it (client-go's LeaseLock).
 */
import { V1MicroTime, type V1Lease, type V1LeaseSpec } from '@kubernetes/client-node';
import { callOptions, type KubeClient } from '../kube/client.ts';

export interface LeaseRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  /** MicroTime strings (six fractional digits). */
  acquireTime: string;
  renewTime: string;
  leaseTransitions: number;
}

/** Plain lease shape as held by the elector (from a read, a write or a watch). */
export interface ObservedLease {
  metadata: { name: string; namespace: string; uid: string; resourceVersion: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  record: LeaseRecord;
}

/** `2006-01-02T15:04:05.000000Z`: exactly six fractional digits (docs/design.md §4). */
export function microTime(date: Date): string {
  return new V1MicroTime(date).toISOString();
}

function timeString(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  return typeof value === 'string' ? value : '';
}

/** Accepts a client-node model instance or plain watch JSON. */
export function observeLease(lease: V1Lease | Record<string, unknown>): ObservedLease {
  const l = lease as V1Lease;
  const spec = l.spec ?? {};
  return {
    metadata: {
      name: l.metadata?.name ?? '',
      namespace: l.metadata?.namespace ?? '',
      uid: l.metadata?.uid ?? '',
      resourceVersion: l.metadata?.resourceVersion ?? '',
      ...(l.metadata?.labels ? { labels: l.metadata.labels } : {}),
      ...(l.metadata?.annotations ? { annotations: l.metadata.annotations } : {}),
    },
    record: {
      holderIdentity: spec.holderIdentity ?? '',
      leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
      acquireTime: timeString(spec.acquireTime),
      renewTime: timeString(spec.renewTime),
      leaseTransitions: spec.leaseTransitions ?? 0,
    },
  };
}

export function sameRecord(a: LeaseRecord | undefined, b: LeaseRecord | undefined): boolean {
  if (!a || !b) return a === b;
  return (
    a.holderIdentity === b.holderIdentity &&
    a.leaseDurationSeconds === b.leaseDurationSeconds &&
    a.acquireTime === b.acquireTime &&
    a.renewTime === b.renewTime &&
    a.leaseTransitions === b.leaseTransitions
  );
}

/** resourceVersion a is newer than b (integers here and in kube-apiserver's etcd; unknown → true). */
export function newerResourceVersion(a: string, b: string): boolean {
  if (!/^\d+$/.test(a) || !/^\d+$/.test(b)) return a !== b;
  return BigInt(a) > BigInt(b);
}

function spec(record: LeaseRecord): V1LeaseSpec {
  // The serializer passes MicroTime strings through untouched.
  return {
    holderIdentity: record.holderIdentity,
    leaseDurationSeconds: record.leaseDurationSeconds,
    acquireTime: record.acquireTime as unknown as V1MicroTime,
    renewTime: record.renewTime as unknown as V1MicroTime,
    leaseTransitions: record.leaseTransitions,
  };
}

export class LeaseLock {
  readonly #client: KubeClient;
  readonly namespace: string;
  readonly name: string;

  constructor(client: KubeClient, namespace: string, name: string) {
    this.#client = client;
    this.namespace = namespace;
    this.name = name;
  }

  async get(signal: AbortSignal): Promise<ObservedLease> {
    const lease = await this.#client.coordination.readNamespacedLease({ name: this.name, namespace: this.namespace }, callOptions({ signal }));
    return observeLease(lease);
  }

  async create(record: LeaseRecord, signal: AbortSignal): Promise<ObservedLease> {
    const body: V1Lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.name, namespace: this.namespace }, spec: spec(record) };
    return observeLease(await this.#client.coordination.createNamespacedLease({ namespace: this.namespace, body }, callOptions({ signal })));
  }

  /** PUT with the observed resourceVersion: a concurrent change is a 409. */
  async update(current: ObservedLease, record: LeaseRecord, signal: AbortSignal): Promise<ObservedLease> {
    const body: V1Lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { ...current.metadata }, spec: spec(record) };
    return observeLease(
      await this.#client.coordination.replaceNamespacedLease({ name: this.name, namespace: this.namespace, body }, callOptions({ signal })),
    );
  }
}
