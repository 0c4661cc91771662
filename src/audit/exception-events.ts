/**
 * Normal Events on a PortalException when it starts and when it stops
 * exempting an object (issue 18): `Exempting` / `ExemptionEnded`, in the
 * exception's namespace, so `kubectl describe portalexception` shows them.
 *
 * Every replica notes the transitions its audit evaluation sees (the
 * evaluator compares each object's exemptions before and after); only the
 * leader writes them, fenced and deduplicated by leader-events.ts. The key
 * (exception uid and generation, object uid, transition) names the Event,
 * so the same transition seen by two replicas, or by the next leader, is
 * one Event. An object that is deleted while exempted gets no Event (the
 * exemption did not end; the object went).
 */
import { createHash } from 'node:crypto';
import type { CoreV1Event } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import type { LeaderTerm } from '../util/leader-term.ts';
import type { Runnable } from '../util/runnable.ts';
import { ErrorCode, PortalError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';
import { EXCEPTION_KIND, RULE_API_VERSION, type GroupVersionKind } from '../policy/types.ts';
import { eventBody, LeaderEvents } from './leader-events.ts';

export const EXCEPTION_EVENT_CONTROLLER = 'portal.dev/audit';
/** Transitions noted this long before a replica starts leading were written by the leader of the time. */
const MAX_AGE_MS = 10 * 60_000;

export interface ExemptionTransition {
  exception: { namespace: string; name: string; uid: string | undefined; generation: number };
  object: { gvk: GroupVersionKind; namespace: string; name: string; uid: string | undefined };
  /** The rules it exempts (started) or exempted (ended) the object from. */
  rules: readonly string[];
  started: boolean;
  /** Why it ended (expired, no longer matches, exception deleted or changed). */
  why?: string;
}

export class ExceptionEvents implements Runnable {
  readonly name = 'exception-events';
  readonly #identity: string;
  readonly #events: LeaderEvents;

  constructor(deps: { writer: FencedWriter; logger: Logger; identity: string; writeLimiter?: { take(signal?: AbortSignal): Promise<void> } }) {
    this.#identity = deps.identity;
    this.#events = new LeaderEvents({
      writer: deps.writer,
      logger: deps.logger.child({ [LogKey.subcomponent]: 'exception-events' }),
      maxAgeMs: MAX_AGE_MS,
      ...(deps.writeLimiter ? { writeLimiter: deps.writeLimiter } : {}),
    });
  }

  needLeaderElection(): boolean {
    return true;
  }

  get written(): number {
    return this.#events.written;
  }

  /** Every replica: queues the Event of a transition (an exception without uid, as from files, has none). */
  note(t: ExemptionTransition): void {
    if (!t.exception.uid || !t.object.uid) return;
    const key = createHash('sha256').update(JSON.stringify([t.exception.uid, t.exception.generation, t.object.uid, t.started])).digest('hex').slice(0, 20);
    this.#events.enqueue({ key, namespace: t.exception.namespace, body: this.#event(key, t) });
  }

  async start(signal: AbortSignal, term?: LeaderTerm): Promise<void> {
    if (!term) throw new PortalError(ErrorCode.Internal, 'the exception event writer runs only with a leader term (add it to the Manager as leader-only)');
    await this.#events.run(signal, term);
  }

  #event(key: string, t: ExemptionTransition): CoreV1Event {
    const o = t.object;
    const what = `${o.gvk.kind} ${o.namespace ? `${o.namespace}/` : ''}${o.name}`;
    const rules = t.rules.join(', ');
    const text = t.started ? `exempts ${what} from ${rules}` : `no longer exempts ${what} from ${rules}${t.why ? `: ${t.why}` : ''}`;
    return eventBody({
      name: `${t.exception.name.slice(0, 200)}.${key}`,
      namespace: t.exception.namespace,
      involvedObject: { apiVersion: RULE_API_VERSION, kind: EXCEPTION_KIND, name: t.exception.name, namespace: t.exception.namespace, ...(t.exception.uid ? { uid: t.exception.uid } : {}) },
      related: { apiVersion: o.gvk.group ? `${o.gvk.group}/${o.gvk.version}` : o.gvk.version, kind: o.gvk.kind, name: o.name, ...(o.namespace ? { namespace: o.namespace } : {}), ...(o.uid ? { uid: o.uid } : {}) },
      reason: t.started ? 'Exempting' : 'ExemptionEnded',
      message: text,
      type: 'Normal',
      reportingComponent: EXCEPTION_EVENT_CONTROLLER,
      reportingInstance: this.#identity,
    });
  }

  stats(): Record<string, unknown> {
    return { pending: this.#events.pending, written: this.#events.written, dropped: this.#events.dropped, rateLimited: this.#events.rateLimited };
  }
}
