/**
 * Core v1 Events as the controllers' event recorders write them (`kubectl
 * describe` and `get events` show these), aggregated as client-go's
 * EventCorrelator does: the same Event again (same involved object, type,
 * reason, message and source) updates the one already written, count+1 and
 * a new lastTimestamp, instead of adding another. So a ReplicaSet whose Pods
 * the webhook keeps denying shows one FailedCreate Event whose count grows.
 */
import { EVENTS, type Host } from './host.ts';
import { meta, nowTimestamp, type Obj, type UserInfo } from '../apiserver/types.ts';

export type Recorder = (involved: Obj, type: 'Normal' | 'Warning', reason: string, message: string) => void;

/** Events remembered for aggregation, per recorder (client-go's LRU holds 4096). */
const REMEMBERED = 4096;

export function recorder(host: Host, as: UserInfo, component: string, log: (err: unknown) => void): Recorder {
  /** Aggregation key → the name of the Event written for it (once its write settles). */
  const written = new Map<string, Promise<string | undefined>>();
  return (involved, type, reason, message) => {
    const m = meta(involved);
    const namespace = m.namespace ?? 'default';
    const key = JSON.stringify([m.uid ?? `${namespace}/${m.name ?? ''}`, type, reason, message]);
    const previous = written.get(key);
    const t = nowTimestamp();
    const write = async (): Promise<string | undefined> => {
      // In order: a repeat waits for the write of the Event it updates.
      const name = previous ? await previous : undefined;
      const current = name !== undefined ? host.get(EVENTS, namespace, name) : undefined;
      if (current) {
        const count = typeof current['count'] === 'number' ? current['count'] : 1;
        return meta(await host.update(as, EVENTS, { ...current, count: count + 1, lastTimestamp: t })).name;
      }
      const ev: Obj = {
        metadata: { generateName: `${m.name ?? 'object'}.`, namespace },
        involvedObject: {
          apiVersion: involved['apiVersion'], kind: involved['kind'], name: m.name, namespace, uid: m.uid, resourceVersion: m.resourceVersion,
        },
        reason, message, type, count: 1, firstTimestamp: t, lastTimestamp: t,
        source: { component }, reportingComponent: component, reportingInstance: '',
      };
      return meta(await host.create(as, EVENTS, namespace, ev)).name;
    };
    // Events are best effort, as in client-go's recorder: a failed write is logged, never fatal.
    const next = write().catch((err: unknown) => {
      log(err);
      return undefined;
    });
    written.delete(key);
    written.set(key, next);
    if (written.size > REMEMBERED) written.delete(written.keys().next().value as string);
  };
}
