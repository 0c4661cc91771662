/**
 * Problems of policies (a rule or a ValidatingAdmissionPolicy that does not
 * compile, an evaluation error, a missing param, a cost overrun) as Warning
 * Events on the policy, where `kubectl describe` and `kubectl get events`
 * show them (issue 12 item 5, issue 15 item 3).
 *
 * Every replica notes problems ({@link ProblemEvents.note}) while it admits
 * and audits; only the leader writes them, through the replica's one
 * FencedWriter under its term (this is a leader-only Runnable), through the
 * one leader Event writer (leader-events.ts). Callers count their own
 * metrics; this class only says which Events to write.
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
import type { FencedWriter } from '../kube/fenced-writer.ts';
import type { LeaderTerm } from '../util/leader-term.ts';
import type { Runnable } from '../util/runnable.ts';
import { ErrorCode, PortalError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';
import { eventBody, LeaderEvents } from './leader-events.ts';

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
/**
 * A problem already recorded is tried again after this long: kube-apiserver
 * deletes Events after its --event-ttl (1h by default), so a problem that
 * persists gets its Event back; while the Event exists the create is a 409.
 */
const RECHECK_MS_DEFAULT = 30 * 60_000;
/** Problems waiting for a leader: beyond this, new ones are dropped (and counted) until the queue drains. */
const MAX_PENDING = 10_000;

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
  readonly #identity: string;
  readonly #recheckMs: number;
  readonly #clusterNamespace: string;
  readonly #events: LeaderEvents;
  /** Keys written (or found written by an earlier leader): not again for this generation until the recheck. */
  readonly #done = new Map<string, number>();

  constructor(deps: ProblemEventsDeps) {
    this.#recheckMs = deps.recheckMs ?? RECHECK_MS_DEFAULT;
    this.#clusterNamespace = deps.clusterScopedNamespace ?? CLUSTER_SCOPED_EVENT_NAMESPACE;
    this.#identity = deps.identity;
    this.#events = new LeaderEvents({
      writer: deps.writer,
      logger: deps.logger.child({ [LogKey.subcomponent]: 'problem-events' }),
      maxPending: MAX_PENDING,
      whenFull: 'drop-new',
      onRecorded: (key) => void this.#done.set(key, Date.now()),
    });
  }

  needLeaderElection(): boolean {
    return true;
  }

  /** Events created by this replica (for tests and /debug/vars). */
  get written(): number {
    return this.#events.written;
  }

  /** Problems not queued because the queue was full. */
  get dropped(): number {
    return this.#events.dropped;
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
    if ((recorded !== undefined && Date.now() - recorded < this.#recheckMs) || this.#events.has(key)) return;
    const namespace = subject.namespace ?? this.#clusterNamespace;
    this.#events.enqueue({ key, namespace, body: this.#event(key, namespace, subject, problem) });
  }

  /** Writes the queued Events under `term` until the term ends. */
  async start(signal: AbortSignal, term?: LeaderTerm): Promise<void> {
    if (!term) throw new PortalError(ErrorCode.Internal, 'the problem event writer runs only with a leader term (add it to the Manager as leader-only)');
    await this.#events.run(signal, term);
  }

  #event(key: string, namespace: string, subject: ProblemSubject, problem: Problem): CoreV1Event {
    return eventBody({
      name: `${subject.name.slice(0, 200)}.${key}`,
      namespace,
      involvedObject: {
        apiVersion: subject.apiVersion,
        kind: subject.kind,
        name: subject.name,
        ...(subject.namespace !== undefined ? { namespace: subject.namespace } : {}),
        uid: subject.uid,
      },
      reason: problem.reason,
      message: problem.message,
      type: 'Warning',
      reportingComponent: PROBLEM_EVENT_CONTROLLER,
      reportingInstance: this.#identity,
    });
  }

  stats(): Record<string, unknown> {
    const rateLimited = this.#events.rateLimited;
    return { pending: this.#events.pending, recorded: this.#done.size, written: this.written, ...(this.dropped > 0 ? { dropped: this.dropped } : {}), ...(rateLimited > 0 ? { rateLimited } : {}) };
  }
}
