/**
 * PortalException `.status` (leader-only), written like the rules' status
 * (status-writer.ts): a JSON merge patch of the status subresource, fenced,
 * conditional on the resourceVersion observed, debounced (~1 s), and skipped
 * when the stored status already says the same thing.
 *
 * Status: observedGeneration; conditions Ready (Active | Invalid | Expired |
 * LifetimeExceeded) and Expired (NoExpiry | NotExpired | Expired) as
 * exceptionConditions() computes them at the time of the write; `exempted`,
 * the objects the audit finds it exempting now.
 */
import type { Logger } from 'pino';
import { apiStatusCode, type KubeClient } from '../kube/client.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import type { LeaderTerm } from '../leader/term.ts';
import { LogKey } from '../observability/log-keys.ts';
import { isPortalError, toError } from '../observability/errors.ts';
import type { ExceptionState } from '../policy/index.ts';
import { exceptionConditions } from '../policy/exceptions.ts';
import type { Condition, ExceptionStatus, KubeObject } from '../policy/types.ts';
import { newerRv } from './status-writer.ts';

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
  const conditions: Condition[] = exceptionConditions(state, now.getTime(), maxLifetimeMs).map((c) => {
    const prev = previous.find((p) => p.type === c.type);
    const lastTransitionTime = prev && prev.status === c.status && prev.lastTransitionTime ? prev.lastTransitionTime : now.toISOString();
    return { ...c, lastTransitionTime, observedGeneration: state.generation };
  });
  return { observedGeneration: state.generation, conditions, exempted };
}

function sameStatus(a: ExceptionStatus | undefined, b: ExceptionStatus): boolean {
  if (!a) return false;
  const c = (s: ExceptionStatus) => (s.conditions ?? []).map((x) => `${x.type}|${x.status}|${x.reason}|${x.message}|${x.observedGeneration ?? ''}`).sort().join('\n');
  return a.observedGeneration === b.observedGeneration && a.exempted === b.exempted && c(a) === c(b);
}

export class ExceptionStatusWriter {
  readonly #client: KubeClient;
  readonly #writer: FencedWriter;
  readonly #inputs: ExceptionStatusInputs;
  readonly #log: Logger;
  readonly #debounceMs: number;
  readonly #dirty = new Set<string>();
  readonly #written = new Map<string, { status: ExceptionStatus; resourceVersion: string | undefined }>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  writes = 0;
  flushes = 0;

  constructor(client: KubeClient, writer: FencedWriter, inputs: ExceptionStatusInputs, logger: Logger, options: { debounceMs?: number } = {}) {
    this.#client = client;
    this.#writer = writer;
    this.#inputs = inputs;
    this.#log = logger.child({ [LogKey.subcomponent]: 'exception-status' });
    this.#debounceMs = options.debounceMs ?? 1000;
  }

  /** Marks exceptions (by `namespace/name`) for a status write; all when omitted. */
  markDirty(displays?: Iterable<string>): void {
    for (const d of displays ?? this.#inputs.states().map((s) => s.display)) this.#dirty.add(d);
  }

  schedule(termOf: () => LeaderTerm | undefined, signal: AbortSignal): void {
    if (this.#timer || this.#dirty.size === 0 || signal.aborted) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      const term = termOf();
      if (!term || !term.isValid()) return;
      this.#flushing = this.flush(term, signal).finally(() => {
        this.flushes++;
        this.#flushing = undefined;
        this.schedule(termOf, signal);
      });
    }, this.#debounceMs);
  }

  async flush(term: LeaderTerm, signal: AbortSignal): Promise<void> {
    const displays = [...this.#dirty];
    this.#dirty.clear();
    const states = new Map(this.#inputs.states().map((s) => [s.display, s]));
    const now = new Date();
    for (const display of displays) {
      const state = states.get(display);
      if (!state) {
        this.#written.delete(display);
        continue;
      }
      const object = this.#inputs.exceptionObject(state);
      // Not in the cache (yet): nothing to patch against.
      if (!object) continue;
      const desired = desiredExceptionStatus(state, object, this.#inputs.exempted(display), now, this.#inputs.maxLifetimeMs);
      const stored = (object as { status?: ExceptionStatus }).status;
      const storedRv = object.metadata?.resourceVersion;
      const written = this.#written.get(display);
      const ownIsCurrent = written !== undefined && !newerRv(storedRv, written.resourceVersion);
      if (sameStatus(stored, desired) || (ownIsCurrent && sameStatus(written.status, desired))) continue;
      const precondition = ownIsCurrent ? written.resourceVersion : storedRv;
      try {
        await this.#client.writeLimiter.take(signal);
        term.assertValid();
        const body = precondition !== undefined ? { metadata: { resourceVersion: precondition }, status: desired } : { status: desired };
        const result = (await this.#writer.customObjects.patchNamespacedCustomObjectStatus(
          { group: 'portal.dev', version: 'v1alpha1', namespace: state.namespace, plural: 'portalexceptions', name: state.name, body },
          this.#writer.mergePatchOptions(term, { signal, timeoutMs: 10_000 }),
        )) as KubeObject | undefined;
        this.#written.set(display, { status: desired, resourceVersion: result?.metadata?.resourceVersion });
        this.writes++;
      } catch (err) {
        if (signal.aborted || isPortalError(err)) {
          this.#dirty.add(display);
          return;
        }
        if (apiStatusCode(err) === 404) continue;
        this.#dirty.add(display);
        if (apiStatusCode(err) === 409) {
          this.#written.delete(display);
          continue;
        }
        this.#log.warn({ [LogKey.exception]: display, [LogKey.error]: toError(err) }, 'exception status write failed, will retry');
      }
    }
  }

  async close(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#flushing;
  }
}
