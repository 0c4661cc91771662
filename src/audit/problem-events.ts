/**
 * Problems of policies (a rule or a ValidatingAdmissionPolicy that does not
 * compile, an evaluation error, a missing param, a cost overrun) as Warning
 * Events on the policy, where `kubectl describe` and `kubectl get events`
 * show them (issue 12 item 5, issue 15 item 3).
 *
 * Every replica notes problems ({@link ProblemEvents.note}) while it admits
 * and audits; only the leader writes them, through the replica's one
 * FencedWriter under its term (this is a leader-only Runnable). Callers
 * count their own metrics; this class only writes Events.
 *
 * One Event per problem and policy generation: the problem's key (policy
 * uid, generation, reason and what tells problems of one reason apart — a
 * binding, a field) names the Event deterministically, so a second create —
 * by this leader after a restart, or by the next leader, whose follower time
 * noted the same problems — answers 409 and writes nothing. A new generation
 * of the policy is a new key, so an edited policy that still fails is
 * reported again. The message is the first occurrence's (e.g. the object that
 * triggered an evaluation error).
 *
 * Namespace of an Event: the policy's own for a namespaced policy, `default`
 * for a cluster-scoped one, as client-go's recorder does and as
 * kube-apiserver requires (a core/v1 Event whose involvedObject has no
 * namespace must be in "" or "default"; otherwise in the object's namespace).
 */
import { createHash } from 'node:crypto';
import type { CoreV1Event } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { apiStatusCode } from '../kube/client.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import type { LeaderTerm } from '../leader/term.ts';
import type { Runnable } from '../manager/runnable.ts';
import { ErrorCode, isPortalError, PortalError, toError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';

/** The policy an Event is about. */
export interface ProblemSubject {
  apiVersion: string;
  kind: string;
  name: string;
  /** Absent for cluster-scoped policies. */
  namespace?: string;
  uid: string;
  generation: number;
}

export interface Problem {
  /** The Event's reason (CamelCase), e.g. `CompileError`. */
  reason: string;
  /** What tells two problems of one reason on one policy generation apart (a binding, a field). */
  discriminator: readonly string[];
  /** The Event's message (cut to 1 KiB). */
  message: string;
}

/** `reportingComponent` of every Event Portal writes about a policy. */
export const PROBLEM_EVENT_CONTROLLER = 'portal.dev/audit';
/** Where Events on cluster-scoped objects go (client-go's choice, and kube-apiserver's rule). */
export const CLUSTER_SCOPED_EVENT_NAMESPACE = 'default';
const RETRY_MS = 5000;
/**
 * A problem already recorded is tried again after this long: kube-apiserver
 * deletes Events after its --event-ttl (1h by default), so a problem that
 * persists gets its Event back; while the Event exists the create is a 409.
 */
const RECHECK_MS_DEFAULT = 30 * 60_000;
/** Event messages are capped by the API server at 1 KiB (as client-go truncates them). */
const MAX_MESSAGE = 1024;
/** Problems waiting for a leader: beyond this, new ones are dropped (and counted) until the queue drains. */
const MAX_PENDING = 10_000;

export function clipEventMessage(text: string): string {
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE - 3)}...` : text;
}

interface Pending {
  key: string;
  subject: ProblemSubject;
  problem: Problem;
}

export interface ProblemEventsDeps {
  writer: FencedWriter;
  logger: Logger;
  /** This replica's identity (`reportingInstance`). */
  identity: string;
  /** Namespace of Events on cluster-scoped policies. @default "default" */
  clusterScopedNamespace?: string;
  /** @default 30 min */
  recheckMs?: number;
}

export class ProblemEvents implements Runnable {
  readonly name = 'problem-events';
  readonly #writer: FencedWriter;
  readonly #log: Logger;
  readonly #identity: string;
  readonly #recheckMs: number;
  readonly #clusterNamespace: string;
  readonly #pending = new Map<string, Pending>();
  /** Keys written (or found written by an earlier leader): not again for this generation until the recheck. */
  readonly #done = new Map<string, number>();
  #wake: (() => void) | undefined;
  /** Events created by this replica (for tests and /debug/vars). */
  written = 0;
  /** Problems not queued because the queue was full. */
  dropped = 0;

  constructor(deps: ProblemEventsDeps) {
    this.#recheckMs = deps.recheckMs ?? RECHECK_MS_DEFAULT;
    this.#clusterNamespace = deps.clusterScopedNamespace ?? CLUSTER_SCOPED_EVENT_NAMESPACE;
    this.#writer = deps.writer;
    this.#log = deps.logger.child({ [LogKey.subcomponent]: 'problem-events' });
    this.#identity = deps.identity;
  }

  needLeaderElection(): boolean {
    return true;
  }

  /** The deterministic key (and Event name suffix) of a problem of one policy generation. */
  static key(subject: Pick<ProblemSubject, 'uid' | 'generation'>, problem: Pick<Problem, 'reason' | 'discriminator'>): string {
    return createHash('sha256').update(JSON.stringify([subject.uid, subject.generation, problem.reason, ...problem.discriminator])).digest('hex').slice(0, 20);
  }

  /** Called on every replica: queues the problem's Event when it is new for this policy generation. Cheap when it is not. */
  note(subject: ProblemSubject, problem: Problem): void {
    if (subject.uid === '') return;
    const key = ProblemEvents.key(subject, problem);
    const recorded = this.#done.get(key);
    if ((recorded !== undefined && Date.now() - recorded < this.#recheckMs) || this.#pending.has(key)) return;
    if (this.#pending.size >= MAX_PENDING) {
      this.dropped++;
      return;
    }
    this.#pending.set(key, { key, subject, problem });
    this.#wake?.();
  }

  /** Writes the queued Events under `term` until the term ends. */
  async start(signal: AbortSignal, term?: LeaderTerm): Promise<void> {
    if (!term) throw new PortalError(ErrorCode.Internal, 'the problem event writer runs only with a leader term (add it to the Manager as leader-only)');
    const termSignal = AbortSignal.any([signal, term.signal]);
    while (!termSignal.aborted) {
      let retry = false;
      for (const p of [...this.#pending.values()]) {
        if (termSignal.aborted) return;
        const ok = await this.#write(p, term, termSignal);
        if (ok) {
          this.#pending.delete(p.key);
          this.#done.set(p.key, Date.now());
        } else retry = true;
      }
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          termSignal.removeEventListener('abort', done);
          this.#wake = undefined;
          resolve();
        };
        const timer = retry ? setTimeout(done, RETRY_MS) : undefined;
        termSignal.addEventListener('abort', done, { once: true });
        this.#wake = done;
        if (this.#pending.size > 0 && !retry) done();
      });
    }
  }

  /** true when the Event exists now (created, or already created by an earlier leader). */
  async #write(p: Pending, term: LeaderTerm, signal: AbortSignal): Promise<boolean> {
    const now = new Date();
    const namespace = p.subject.namespace ?? this.#clusterNamespace;
    const name = `${p.subject.name.slice(0, 200)}.${p.key}`;
    const body: CoreV1Event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name, namespace },
      involvedObject: {
        apiVersion: p.subject.apiVersion,
        kind: p.subject.kind,
        name: p.subject.name,
        ...(p.subject.namespace !== undefined ? { namespace: p.subject.namespace } : {}),
        uid: p.subject.uid,
      },
      reason: p.problem.reason,
      message: clipEventMessage(p.problem.message),
      type: 'Warning',
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component: 'portal' },
      reportingComponent: PROBLEM_EVENT_CONTROLLER,
      reportingInstance: this.#identity,
    };
    try {
      await this.#writer.core.createNamespacedEvent({ namespace, body }, this.#writer.options(term, { signal, timeoutMs: 10_000 }));
      this.written++;
      return true;
    } catch (err) {
      if (apiStatusCode(err) === 409) return true;
      if (isPortalError(err, ErrorCode.TermExpired) || signal.aborted) return false;
      // The policy's namespace is gone (a PortalRule deleted with its namespace): nothing to report on.
      if (apiStatusCode(err) === 404 || apiStatusCode(err) === 403) {
        this.#log.warn({ [LogKey.error]: toError(err), [LogKey.kind]: p.subject.kind, [LogKey.name]: p.subject.name, [LogKey.namespace]: namespace, [LogKey.reason]: p.problem.reason }, 'cannot record a policy problem event; dropping it');
        return true;
      }
      this.#log.warn({ [LogKey.error]: toError(err), [LogKey.kind]: p.subject.kind, [LogKey.name]: p.subject.name, [LogKey.reason]: p.problem.reason }, 'could not record a policy problem event; retrying');
      return false;
    }
  }

  stats(): Record<string, unknown> {
    return { pending: this.#pending.size, recorded: this.#done.size, written: this.written, ...(this.dropped > 0 ? { dropped: this.dropped } : {}) };
  }
}
