/**
 * PortalException `.status` (leader-only), written like the rules' status by
 * the fenced status writer (fenced-status-writer.ts): debounced, one write
 * per exception per flush at most, each through the client's write limiter,
 * so a flood of exceptions costs paced writes and a dirty set bounded by the
 * exceptions that exist.
 *
 * Status: observedGeneration; conditions Ready (Active | Invalid | Expired |
 * LifetimeExceeded | RuleNotFound) and Expired (NoExpiry | NotExpired | Expired) as
 * exceptionConditions() computes them at the time of the write; `exempted`,
 * the objects the audit finds it exempting now.
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../kube/client.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import { LogKey } from '../observability/log-keys.ts';
import type { ExceptionState } from '../policy/index.ts';
import { unresolvedRules } from '../policy/exceptions.ts';
import { exceptionConditions } from '../policy/exception-conditions.ts';
import type { ExceptionStatus, KubeObject } from '../policy/types.ts';
import { FencedStatusWriter, sameConditions, withTransition } from './fenced-status-writer.ts';

export interface ExceptionStatusInputs {
  states(): ExceptionState[];
  /** Objects the exception (`namespace/name`) exempts now. */
  exempted(display: string): number;
  /** The stored exception (informer cache), for its current status. */
  exceptionObject(state: ExceptionState): KubeObject | undefined;
  maxLifetimeMs: number | undefined;
  /**
   * Lookup keys of every rule that exists now (`rule:DISPLAY`, `vap:POLICY`,
   * `vap:POLICY/BINDING`), or undefined while they are not all known (an
   * informer not synced yet): then no exception is called RuleNotFound.
   */
  knownRules?: () => ReadonlySet<string> | undefined;
}

/** The status the exception should have at `now`; unchanged conditions keep their lastTransitionTime. */
export function desiredExceptionStatus(
  state: ExceptionState,
  object: KubeObject | undefined,
  exempted: number,
  now: Date,
  maxLifetimeMs: number | undefined,
  knownRules?: ReadonlySet<string>,
): ExceptionStatus {
  const previous = (object as { status?: ExceptionStatus } | undefined)?.status?.conditions ?? [];
  const unresolved = knownRules ? unresolvedRules(state.rules, state.namespace, knownRules) : undefined;
  const conditions = exceptionConditions(state, now.getTime(), maxLifetimeMs, unresolved).map((c) => withTransition(c, previous, now, state.generation));
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
        desired: (state, object, now) => desiredExceptionStatus(state, object, inputs.exempted(state.display), now, inputs.maxLifetimeMs, inputs.knownRules?.()),
        same: sameStatus,
        patch: (state, body, opts) =>
          writer.customObjects.patchNamespacedCustomObjectStatus({ group: 'portal.dev', version: 'v1alpha1', namespace: state.namespace, plural: 'portalexceptions', name: state.name, body }, opts),
      },
      logger,
      options,
    );
  }
}
