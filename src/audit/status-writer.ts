/**
 * Rule `.status` (leader-only), written through the status subresource with a
 * JSON merge patch: observedGeneration, conditions (Ready: Compiled /
 * CompileError; ActionsValid: problems with spec.audit.actions; Covered:
 * whether admission and the audit see what the rule matches, coverage.ts),
 * violations (objects violating the rule now) and lastAuditTime (the end of
 * the last full pass that evaluated the rule and ended while leading;
 * docs/architecture.md).
 *
 * Writes are debounced (`debounceMs`, ~1 s): a burst of object changes costs
 * one status write per rule, and the count is still current within a second.
 * A write is skipped when the stored status already says the same thing, so
 * a new leader does not rewrite every rule's status after a failover.
 */
import type { Logger } from 'pino';
import { apiStatusCode, type KubeClient } from '../kube/client.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import type { LeaderTerm } from '../leader/term.ts';
import { isPortalError, toError } from '../observability/errors.ts';
import { matchesPods, type RuleState } from '../policy/index.ts';
import type { Condition, KubeObject, RuleSpec, RuleStatus } from '../policy/types.ts';
import { validateActions } from './actions.ts';
import type { Coverage } from './coverage.ts';
import { LogKey } from '../observability/log-keys.ts';

export interface StatusInputs {
  states(): RuleState[];
  /** Violating objects of a rule (display key: `name` or `namespace/name`). */
  violations(display: string): number;
  /** The stored rule object (for its spec and current status), if cached. */
  ruleObject(state: RuleState): KubeObject | undefined;
  /** When the last full pass that evaluated the rule and ended while leading (takeover drained) finished. */
  lastAuditTime(state: RuleState): Date | undefined;
  /** The last full pass that evaluated the rule, also as a follower: used only when the rule has no lastAuditTime yet. */
  lastPassTime(state: RuleState): Date | undefined;
  /** The rule's coverage, once known. */
  coverage?(state: RuleState): Coverage | undefined;
}

export function ruleDisplay(state: Pick<RuleState, 'name' | 'namespace'>): string {
  return state.namespace !== undefined ? `${state.namespace}/${state.name}` : state.name;
}

function actionProblems(state: RuleState, object: KubeObject | undefined): string[] {
  const spec = (object as { spec?: RuleSpec } | undefined)?.spec;
  const onlyPods = spec?.match?.kinds ? matchesPods(spec) && spec.match.kinds.every((k) => k.kinds.every((x) => x === 'Pod')) : true;
  return validateActions(state.actions, onlyPods);
}

/** The status the rule should have now; `previous` supplies lastTransitionTime of unchanged conditions. */
export function desiredStatus(state: RuleState, object: KubeObject | undefined, violations: number, lastAudit: Date | undefined, now: Date, anyPass?: Date, coverage?: Coverage): RuleStatus {
  const previous = ((object as { status?: RuleStatus } | undefined)?.status?.conditions ?? []);
  const cond = (c: Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>): Condition => {
    const prev = previous.find((p) => p.type === c.type);
    const lastTransitionTime = prev && prev.status === c.status && prev.lastTransitionTime ? prev.lastTransitionTime : now.toISOString();
    return { ...c, lastTransitionTime, observedGeneration: state.generation };
  };
  const problems = actionProblems(state, object);
  const status: RuleStatus = {
    observedGeneration: state.generation,
    conditions: [
      cond({ type: 'Ready', status: state.ready ? 'True' : 'False', reason: state.reason, message: state.message }),
      problems.length === 0
        ? cond({ type: 'ActionsValid', status: 'True', reason: 'Valid', message: `${state.actions.length} audit action(s)` })
        : cond({ type: 'ActionsValid', status: 'False', reason: 'InvalidAction', message: problems.join('; ') }),
      ...(coverage ? [cond({ type: 'Covered', status: coverage.covered ? 'True' : 'False', reason: coverage.reason, message: coverage.message })] : []),
    ],
    violations,
  };
  const stored = (object as { status?: RuleStatus } | undefined)?.status?.lastAuditTime;
  if (lastAudit) status.lastAuditTime = lastAudit.toISOString();
  else if (stored) status.lastAuditTime = stored;
  else if (anyPass) status.lastAuditTime = anyPass.toISOString();
  return status;
}

/** resourceVersions are opaque, but every real server uses integers: `a` is newer than `b` when both are and a > b. */
export function newerRv(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || b === undefined || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return false;
  return BigInt(a) > BigInt(b);
}

function sameStatus(a: RuleStatus | undefined, b: RuleStatus): boolean {
  if (!a) return false;
  const c = (s: RuleStatus) => (s.conditions ?? []).map((x) => `${x.type}|${x.status}|${x.reason}|${x.message}|${x.observedGeneration ?? ''}`).sort().join('\n');
  return a.observedGeneration === b.observedGeneration && a.violations === b.violations && a.lastAuditTime === b.lastAuditTime && c(a) === c(b);
}

export class StatusWriter {
  readonly #client: KubeClient;
  readonly #writer: FencedWriter;
  readonly #inputs: StatusInputs;
  readonly #logger: Logger;
  readonly #debounceMs: number;
  readonly #dirty = new Set<string>();
  /** What this replica last wrote and the resourceVersion that write produced, by rule key (the informer may lag behind it). */
  readonly #written = new Map<string, { status: RuleStatus; resourceVersion: string | undefined }>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  writes = 0;
  /** Completed flushes, also those that found nothing to write (tests wait on it instead of sleeping past the debounce). */
  flushes = 0;

  /** `writer`: the replica's leader-only writer, which sends the status patches. */
  constructor(client: KubeClient, writer: FencedWriter, inputs: StatusInputs, logger: Logger, options: { debounceMs?: number } = {}) {
    this.#client = client;
    this.#writer = writer;
    this.#inputs = inputs;
    this.#logger = logger.child({ [LogKey.subcomponent]: 'status-writer' });
    // ~1 s: violations stay current within a second, and a burst of changes costs one write per rule.
    this.#debounceMs = options.debounceMs ?? 1000;
  }

  /** Marks rules (by RuleState key) for a status write; all rules when omitted. */
  markDirty(keys?: Iterable<string>): void {
    for (const k of keys ?? this.#inputs.states().map((s) => s.key)) this.#dirty.add(k);
  }

  /** Starts the debounce timer if there is work; flush runs only with a valid term. */
  schedule(termOf: () => LeaderTerm | undefined, signal: AbortSignal): void {
    if (this.#timer || this.#dirty.size === 0 || signal.aborted) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      const term = termOf();
      if (!term || !term.isValid()) return; // followers keep the dirty set: a new leader writes it at once
      this.#flushing = this.flush(term, signal).finally(() => {
        this.flushes++;
        this.#flushing = undefined;
        this.schedule(termOf, signal);
      });
    }, this.#debounceMs);
  }

  async flush(term: LeaderTerm, signal: AbortSignal): Promise<void> {
    const keys = [...this.#dirty];
    this.#dirty.clear();
    const states = new Map(this.#inputs.states().map((s) => [s.key, s]));
    const now = new Date();
    for (const key of keys) {
      const state = states.get(key);
      if (!state) {
        this.#written.delete(key);
        continue;
      }
      const object = this.#inputs.ruleObject(state);
      const desired = desiredStatus(state, object, this.#inputs.violations(ruleDisplay(state)), this.#inputs.lastAuditTime(state), now, this.#inputs.lastPassTime(state), this.#inputs.coverage?.(state));
      const stored = (object as { status?: RuleStatus } | undefined)?.status;
      const storedRv = object?.metadata?.resourceVersion;
      // Our own write counts only while the cache has not caught up with it: once the stored object is newer
      // (someone else wrote, e.g. a late request of a paused predecessor), what is stored decides.
      const written = this.#written.get(key);
      const ownIsCurrent = written !== undefined && !newerRv(storedRv, written.resourceVersion);
      if (sameStatus(stored, desired) || (ownIsCurrent && sameStatus(written.status, desired))) continue;
      const precondition = ownIsCurrent ? written.resourceVersion : storedRv;
      try {
        await this.#client.writeLimiter.take(signal);
        term.assertValid();
        const resourceVersion = await this.#patch(state, desired, precondition, term, signal);
        this.#written.set(key, { status: desired, resourceVersion });
        this.writes++;
      } catch (err) {
        if (signal.aborted || isPortalError(err)) {
          this.#dirty.add(key);
          if (signal.aborted) return;
          this.#logger.info({ [LogKey.rule]: key, [LogKey.error]: toError(err) }, 'status write fenced');
          return;
        }
        if (apiStatusCode(err) === 404) continue; // rule deleted meanwhile
        this.#dirty.add(key);
        if (apiStatusCode(err) === 409) {
          // Changed since observed (a spec edit, another writer): decide again on the next flush, on the newer object.
          this.#written.delete(key);
          this.#logger.debug({ [LogKey.rule]: key }, 'rule changed since observed; status write retried');
          continue;
        }
        this.#logger.warn({ [LogKey.rule]: key, [LogKey.error]: toError(err) }, 'rule status write failed, will retry');
      }
    }
  }

  /**
   * Merge patch of the status subresource, fenced again at the socket and
   * conditional on the rule's resourceVersion as observed: a write delayed
   * across a pause fails with 409 if the rule changed since. A stale status
   * is low-harm anyway (it is derived state: the current leader recomputes
   * it and overwrites a stored status that differs), but a stale write
   * would go unnoticed until the next change of that rule. Returns the new
   * resourceVersion.
   */
  async #patch(state: RuleState, status: RuleStatus, resourceVersion: string | undefined, term: LeaderTerm, signal: AbortSignal): Promise<string | undefined> {
    const co = this.#writer.customObjects;
    const opts = this.#writer.mergePatchOptions(term, { signal, timeoutMs: 10_000 });
    const body = resourceVersion !== undefined ? { metadata: { resourceVersion }, status } : { status };
    const stored = (state.namespace !== undefined
      ? await co.patchNamespacedCustomObjectStatus({ group: 'portal.dev', version: 'v1alpha1', namespace: state.namespace, plural: 'portalrules', name: state.name, body }, opts)
      : await co.patchClusterCustomObjectStatus({ group: 'portal.dev', version: 'v1alpha1', plural: 'portalclusterrules', name: state.name, body }, opts)) as KubeObject | undefined;
    return stored?.metadata?.resourceVersion;
  }

  /** Cancels the timer and waits for a running flush. */
  async close(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#flushing;
  }
}
