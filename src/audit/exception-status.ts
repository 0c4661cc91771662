/**
 * PortalException `.status` (leader-only), written like the rules' status by
 * the fenced status writer (fenced-status-writer.ts).
 *
 * Status: observedGeneration; conditions Ready (Active | Invalid | Expired |
 * LifetimeExceeded) and Expired (NoExpiry | NotExpired | Expired) as
 * exceptionConditions() computes them at the time of the write; `exempted`,
 * the objects the audit finds it exempting now.
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../kube/client.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import { LogKey } from '../observability/log-keys.ts';
import type { ExceptionState } from '../policy/index.ts';
import { exceptionConditions } from '../policy/exceptions.ts';
import type { ExceptionStatus, KubeObject } from '../policy/types.ts';
import { FencedStatusWriter, sameConditions, withTransition } from './fenced-status-writer.ts';

export interface ExceptionStatusInputs {
  states(): ExceptionState[];
  /** Objects the exception (`namespace/name`) exempts now. */
  exempted(display: string): number;
  /** The stored exception (informer cache), for its current status. */
  exceptionObject(state: ExceptionState): KubeObject | undefined;
  maxLifetimeMs: number | undefined;
}

/** The status the exception should have at `now`; unchanged conditions keep their lastTransitionTime. */
export function desiredExceptionStatus(state: ExceptionState, object: KubeObject | undefined, exempted: number, now: Date, maxLifetimeMs: number | undefined): ExceptionStatus {
  const previous = (object as { status?: ExceptionStatus } | undefined)?.status?.conditions ?? [];
  const conditions = exceptionConditions(state, now.getTime(), maxLifetimeMs).map((c) => withTransition(c, previous, now, state.generation));
  return { observedGeneration: state.generation, conditions, exempted };
}

function sameStatus(a: ExceptionStatus | undefined, b: ExceptionStatus): boolean {
  if (!a) return false;
  return a.observedGeneration === b.observedGeneration && a.exempted === b.exempted && sameConditions(a.conditions, b.conditions);
}

/** Exception status writes, keyed by `namespace/name`. */
export class ExceptionStatusWriter extends FencedStatusWriter<ExceptionState, ExceptionStatus> {
  constructor(client: KubeClient, writer: FencedWriter, inputs: ExceptionStatusInputs, logger: Logger, options: { debounceMs?: number } = {}) {
    super(
      client,
      writer,
      {
        noun: 'exception',
        logFields: (key) => ({ [LogKey.exception]: key }),
        subcomponent: 'exception-status',
        current: () => new Map(inputs.states().map((s) => [s.display, s])),
        object: (state) => inputs.exceptionObject(state),
        // Not in the cache (yet): nothing to patch against.
        needsObject: true,
        desired: (state, object, now) => desiredExceptionStatus(state, object, inputs.exempted(state.display), now, inputs.maxLifetimeMs),
        same: sameStatus,
        patch: (state, body, opts) =>
          writer.customObjects.patchNamespacedCustomObjectStatus({ group: 'portal.dev', version: 'v1alpha1', namespace: state.namespace, plural: 'portalexceptions', name: state.name, body }, opts),
      },
      logger,
      options,
    );
  }
}
