/** Core v1 Events as the controllers' event recorders write them (`kubectl describe` and `get events` show these). */
import { EVENTS, type Host } from './host.ts';
import { meta, nowTimestamp, type Obj, type UserInfo } from '../apiserver/types.ts';

export type Recorder = (involved: Obj, type: 'Normal' | 'Warning', reason: string, message: string) => void;

export function recorder(host: Host, as: UserInfo, component: string, log: (err: unknown) => void): Recorder {
  return (involved, type, reason, message) => {
    const m = meta(involved);
    const namespace = m.namespace ?? 'default';
    const t = nowTimestamp();
    const ev: Obj = {
      metadata: { generateName: `${m.name ?? 'object'}.`, namespace },
      involvedObject: {
        apiVersion: involved['apiVersion'], kind: involved['kind'], name: m.name, namespace, uid: m.uid, resourceVersion: m.resourceVersion,
      },
      reason, message, type, count: 1, firstTimestamp: t, lastTimestamp: t,
      source: { component }, reportingComponent: component, reportingInstance: '',
    };
    // Events are best effort, as in client-go's recorder: a failed write is logged, never fatal.
    host.create(as, EVENTS, namespace, ev).catch(log);
  };
}
