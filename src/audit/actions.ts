/**
 * Leader-only audit actions (`spec.audit.actions`): label / annotate (one
 * JSON merge patch that also carries a provenance annotation with the
 * epoch), evict (Eviction API), alert (Alertmanager via the ledger protocol
 * in idempotency.ts). Every executor calls `term.assertValid()` immediately
 * before it sends, paces API writes through the write limiter, consults the
 * idempotency store first and records what it did.
 *
 * Executors never throw for expected outcomes; they return an
 * {@link ActionOutcome} the controller maps onto the work queue:
 * `retry` → requeueAfterMs (not a failure: a PDB's 429, an eviction budget,
 * an alert re-send that is due later), `error` → a failure with backoff.
 * Only fencing (TermExpired) and aborts are thrown, so leader-only work stops.
 */
import { PatchStrategy, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { apiReason, apiStatusCode, callOptions, describeApiError } from '../kube/client.ts';
import type { TokenBucket } from '../kube/rate-limiter.ts';
import type { LeaderTerm } from '../util/leader-term.ts';
import type { GroupVersionKind, KubeObject, RuleAction } from '../policy/types.ts';
import { actionAnnotation } from './action-annotation.ts';
import type { AlertmanagerClient } from './alertmanager.ts';
import { alertLabels, decideAlert, firingAlert, resolvedAlert, type ViolationAlert } from './alert-scheduler.ts';
import { actionKey, type EmittedAction, type IdempotencyStore } from './idempotency.ts';
import type { LedgerWriter } from './ledger-writer.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import { actionMetrics, type ActionMetrics } from './metrics.ts';
import { ErrorCode, isPortalError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';

export type ActionOutcome =
  /** `requeueAfterMs`: run this object again then (an alert's next re-send). */
  | { status: 'done'; requeueAfterMs?: number }
  | { status: 'skipped'; reason: string }
  | { status: 'retry'; afterMs: number; reason: string }
  | { status: 'error'; reason: string };

export interface ActionTarget {
  gvk: GroupVersionKind;
  /** The object as cached by the informer (plain JSON). */
  object: KubeObject;
}

/** Default label value: the rule key, made a valid label value (`/` → `.`, at most 63 chars). */
export function ruleLabelValue(rule: string): string {
  const v = rule.replace(/[^A-Za-z0-9_.-]/g, '.').slice(0, 63);
  return v.replace(/^[^A-Za-z0-9]+/, '').replace(/[^A-Za-z0-9]+$/, '');
}

/**
 * After a 409 on a mark: a watch event normally follows the write that
 * caused it within milliseconds; 500 ms leaves room for a loaded machine
 * without holding the mark back noticeably.
 */
const CONFLICT_RETRY_MS = 500;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const QUALIFIED_NAME = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/**
 * Problems with a rule's actions for conditions and logs (empty = fine):
 * unknown types, missing or invalid keys, evict on something that is not a Pod.
 */
export function validateActions(actions: readonly RuleAction[], matchesOnlyPods: boolean): string[] {
  const problems: string[] = [];
  actions.forEach((a, i) => {
    const where = `spec.audit.actions[${i}]`;
    switch (a.type) {
      case 'label':
      case 'annotate':
        if (!a.key) problems.push(`${where}: ${a.type} needs a key`);
        else if (!QUALIFIED_NAME.test(a.key)) problems.push(`${where}: "${a.key}" is not a valid ${a.type === 'label' ? 'label' : 'annotation'} key`);
        if (a.type === 'label' && a.value !== undefined && (a.value.length > 63 || !LABEL_VALUE.test(a.value))) problems.push(`${where}: "${a.value}" is not a valid label value`);
        break;
      case 'evict':
        if (!matchesOnlyPods) problems.push(`${where}: evict applies only to Pods, but the rule matches other kinds`);
        break;
      case 'alert':
        break;
      default:
        problems.push(`${where}: unknown action type "${String((a as { type: unknown }).type)}" (label, annotate, evict, alert)`);
    }
  });
  return problems;
}

export interface MarkPatch {
  metadata: { labels?: Record<string, string>; annotations: Record<string, string> };
  /** Action types this patch applies (to record in the idempotency store). */
  types: Array<'label' | 'annotate'>;
}

/**
 * The merge patch for a rule's label/annotate actions on an object, or
 * undefined when the object already carries every key with its value (the
 * effect is visible, so there is nothing to emit).
 */
export function markPatch(object: KubeObject, rule: string, actions: readonly RuleAction[], epoch: string, at: number): MarkPatch | undefined {
  const labels: Record<string, string> = {};
  const annotations: Record<string, string> = {};
  const types = new Set<'label' | 'annotate'>();
  const current = { label: object.metadata?.labels ?? {}, annotate: object.metadata?.annotations ?? {} };
  for (const a of actions) {
    if ((a.type !== 'label' && a.type !== 'annotate') || !a.key) continue;
    const value = a.value ?? ruleLabelValue(rule);
    if (current[a.type][a.key] === value) continue;
    (a.type === 'label' ? labels : annotations)[a.key] = value;
    types.add(a.type);
  }
  if (types.size === 0) return undefined;
  for (const type of types) {
    const [k, v] = actionAnnotation({ rule, actionType: type, epoch, at });
    annotations[k] = v;
  }
  const metadata: MarkPatch['metadata'] = { annotations };
  if (Object.keys(labels).length > 0) metadata.labels = labels;
  return { metadata, types: [...types] };
}

export interface ActionExecutorOptions {
  /**
   * The replica's leader-only writer: label/annotate patches, evictions and
   * alerts go through it, fenced at the socket. Its `objects.resolvePath()`
   * keeps discovery out of the fenced section; reads (a pod, to settle an
   * eviction intent) pass unfenced.
   */
  writer: FencedWriter;
  /** `--kube-api-qps` / `--kube-api-burst`. */
  writeLimiter: TokenBucket;
  /**
   * `--max-evictions-per-minute`: a TokenBucket with qps = N/60 and burst 1,
   * so evictions are spread evenly and no 60 s window sees more than N + 1.
   */
  evictionLimiter: TokenBucket;
  ledger: LedgerWriter;
  alertmanager: AlertmanagerClient;
  store: IdempotencyStore;
  /** Never evict here (kube-system, kube-public, kube-node-lease, Portal's own). */
  exemptNamespaces: ReadonlySet<string>;
  /** `--alert-resend-interval`. @default 3600000 */
  resendIntervalMs?: number;
  /**
   * How long an eviction suppresses another one of the same pod name (a
   * StatefulSet pod comes back under its name). @default 3600000
   */
  evictWindowMs?: number;
  /**
   * Wait after a PDB's 429 before trying again. kubectl drain retries every
   * 5 s; the disruption controller needs about that to update the budget. @default 5000
   */
  pdbRetryMs?: number;
  generatorURL?: string;
  logger?: Logger;
  registry?: Registry;
  /** Wall clock ms. @default Date.now */
  now?: () => number;
}

export class ActionExecutor {
  readonly #o: ActionExecutorOptions;
  readonly #resendMs: number;
  readonly #evictWindowMs: number;
  readonly #pdbRetryMs: number;
  readonly #now: () => number;
  readonly #logger: Logger | undefined;
  readonly #metrics: ActionMetrics | undefined;

  constructor(options: ActionExecutorOptions) {
    this.#o = options;
    this.#resendMs = options.resendIntervalMs ?? 3_600_000;
    this.#evictWindowMs = options.evictWindowMs ?? 3_600_000;
    this.#pdbRetryMs = options.pdbRetryMs ?? 5000;
    this.#now = options.now ?? Date.now;
    this.#logger = options.logger?.child({ [LogKey.subcomponent]: 'audit-actions' });
    this.#metrics = options.registry ? actionMetrics(options.registry) : undefined;
  }

  #key(target: ActionTarget, rule: string, actionType: RuleAction['type']): string {
    const meta = target.object.metadata ?? {};
    return actionKey({ rule, gvk: target.gvk, namespace: meta.namespace ?? '', name: meta.name ?? '', actionType });
  }

  #count(action: string, outcome: ActionOutcome): ActionOutcome {
    this.#metrics?.actions.inc({ action, outcome: outcome.status });
    if (outcome.status === 'error') this.#logger?.warn({ [LogKey.action]: action, [LogKey.reason]: outcome.reason }, 'audit action failed');
    return outcome;
  }

  /** label + annotate actions of one rule, in one merge patch. */
  async mark(target: ActionTarget, rule: string, actions: readonly RuleAction[], term: LeaderTerm, signal: AbortSignal): Promise<ActionOutcome> {
    const wanted = actions.filter((a) => a.type === 'label' || a.type === 'annotate');
    if (wanted.length === 0) return { status: 'skipped', reason: 'no label/annotate actions' };
    const pending = wanted.filter((a) => !this.#o.store.has(this.#key(target, rule, a.type)));
    const at = this.#now();
    const patch = markPatch(target.object, rule, pending, term.epochString, at);
    if (!patch) return this.#count('mark', { status: 'skipped', reason: 'already applied' });
    const meta = target.object.metadata ?? {};
    const spec: KubernetesObject = {
      apiVersion: target.object.apiVersion ?? (target.gvk.group ? `${target.gvk.group}/${target.gvk.version}` : target.gvk.version),
      kind: target.object.kind ?? target.gvk.kind,
      // The resourceVersion makes the patch conditional on the object being as observed: a
      // second mark racing this one (a request a paused predecessor sent as it woke, or a
      // decision taken on a cache that lags) fails with 409 instead of repeating the effect.
      metadata: { name: meta.name ?? '', ...(meta.namespace ? { namespace: meta.namespace } : {}), ...(meta.resourceVersion ? { resourceVersion: meta.resourceVersion } : {}), ...patch.metadata },
    };
    // Discovery before the fence: patch() must do no I/O between term.assertValid() and its request (see object-api.ts).
    try {
      await this.#o.writer.objects.resolvePath(spec);
    } catch (err) {
      return this.#count('mark', { status: 'error', reason: describeApiError(err) });
    }
    await this.#o.writeLimiter.take(signal);
    term.assertValid();
    try {
      // Fenced at the socket as well as here: the resourceVersion precondition alone would not stop a
      // paused leader's patch on an object nobody changed since.
      await this.#o.writer.objects.patch(spec, undefined, undefined, 'portal', undefined, PatchStrategy.MergePatch, this.#o.writer.objectOptions(term, { signal }));
    } catch (err) {
      if (isPortalError(err, ErrorCode.TermExpired)) throw err; // fenced at the socket: nothing was sent
      if (apiStatusCode(err) === 404) return this.#count('mark', { status: 'skipped', reason: 'object is gone' });
      // Decide again on the object as it is now, once the informer has delivered the change.
      if (apiStatusCode(err) === 409) return this.#count('mark', { status: 'retry', afterMs: CONFLICT_RETRY_MS, reason: 'the object changed since it was observed' });
      return this.#count('mark', { status: 'error', reason: describeApiError(err) });
    }
    for (const type of patch.types) this.#o.store.record(this.#key(target, rule, type), { epoch: term.epochString, at, state: 'done' });
    return this.#count('mark', { status: 'done' });
  }

  /** Evicts a violating Pod through the Eviction API (policy/v1). */
  async evict(target: ActionTarget, rule: string, term: LeaderTerm, signal: AbortSignal): Promise<ActionOutcome> {
    const meta = target.object.metadata ?? {};
    const namespace = meta.namespace ?? '';
    if (target.gvk.group !== '' || target.gvk.kind !== 'Pod') return this.#count('evict', { status: 'error', reason: `evict applies only to Pods, not ${target.gvk.kind}` });
    if (this.#o.exemptNamespaces.has(namespace)) return this.#count('evict', { status: 'skipped', reason: `namespace ${namespace} is exempt` });
    if (meta.deletionTimestamp) return this.#count('evict', { status: 'skipped', reason: 'pod is already terminating' });
    const key = this.#key(target, rule, 'evict');
    const record = this.#o.store.get(key);
    if (record?.state === 'intent') {
      // Unconfirmed (its leader died or was fenced between the ledger intent
      // and the Eviction call, or right after it): the pod itself tells.
      const settled = await this.#settleEviction(target, key, record, term, signal);
      if (settled !== 'evict') return settled;
    } else if (record) return this.#count('evict', { status: 'skipped', reason: 'evicted within its window' });
    if (!this.#o.evictionLimiter.tryTake()) {
      return this.#count('evict', { status: 'retry', afterMs: Math.ceil(this.#o.evictionLimiter.delayMs()), reason: '--max-evictions-per-minute reached' });
    }
    const at = this.#now();
    const intent: EmittedAction = { state: 'intent', epoch: term.epochString, at, until: at + this.#evictWindowMs };
    if (meta.uid) intent.uid = meta.uid;
    await this.#o.ledger.write({ [key]: intent }, [], term, signal);
    this.#o.store.record(key, intent);
    await this.#o.writeLimiter.take(signal);
    term.assertValid();
    try {
      await this.#o.writer.core.createNamespacedPodEviction(
        { name: meta.name ?? '', namespace, body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: meta.name ?? '', namespace } } },
        this.#o.writer.options(term, { signal }),
      );
    } catch (err) {
      // Fenced at the socket: nothing was sent; the ledger's intent is settled by whoever leads next (from the pod).
      if (isPortalError(err, ErrorCode.TermExpired)) throw err;
      // Not evicted: close the window again so the next attempt is not suppressed.
      this.#o.store.forget(key);
      await this.#o.ledger.write({}, [key], term, signal);
      const code = apiStatusCode(err);
      if (code === 404) return this.#count('evict', { status: 'skipped', reason: 'pod is gone' });
      if (code === 429) {
        const reason = apiReason(err) === 'TooManyRequests' ? 'a PodDisruptionBudget does not allow the eviction now' : describeApiError(err);
        return this.#count('evict', { status: 'retry', afterMs: this.#pdbRetryMs, reason });
      }
      return this.#count('evict', { status: 'error', reason: describeApiError(err) });
    }
    const done: EmittedAction = { ...intent, state: 'done' };
    this.#o.store.record(key, done);
    await this.#o.ledger.write({ [key]: done }, [], term, signal);
    return this.#count('evict', { status: 'done' });
  }

  /**
   * Settles an eviction `intent` nobody confirmed by reading the pod now
   * (not the informer cache, which may lag behind an eviction):
   * gone, terminating, or another UID under the same name (evicted and
   * re-created) → the eviction happened: mark it done, keep its window;
   * the same pod, still running → it never happened: 'evict' (now).
   * Evicting one pod twice is impossible: a first eviction would have
   * removed it. Without a recorded UID (an older entry) a pod created after
   * the intent counts as re-created.
   */
  async #settleEviction(target: ActionTarget, key: string, record: EmittedAction, term: LeaderTerm, signal: AbortSignal): Promise<ActionOutcome | 'evict'> {
    const meta = target.object.metadata ?? {};
    let evicted: string | undefined;
    try {
      const live = await this.#o.writer.core.readNamespacedPod({ name: meta.name ?? '', namespace: meta.namespace ?? '' }, callOptions({ signal }));
      const ct = live.metadata?.creationTimestamp as Date | string | undefined;
      // creationTimestamp has second precision: compare with the intent's second.
      const created = ct instanceof Date ? ct.getTime() : Date.parse(ct ?? '');
      if (live.metadata?.deletionTimestamp) evicted = 'the pod is terminating';
      else if (record.uid !== undefined ? live.metadata?.uid !== record.uid : created >= Math.floor(record.at / 1000) * 1000) evicted = 'the pod was re-created under its name';
    } catch (err) {
      if (apiStatusCode(err) !== 404) return this.#count('evict', { status: 'error', reason: `cannot settle an unconfirmed eviction: ${describeApiError(err)}` });
      evicted = 'the pod is gone';
    }
    if (evicted === undefined) {
      this.#logger?.info({ [LogKey.epoch]: record.epoch, [LogKey.namespace]: meta.namespace, [LogKey.name]: meta.name }, 'unconfirmed eviction never happened: evicting now');
      this.#o.store.forget(key);
      return 'evict';
    }
    const done: EmittedAction = { ...record, state: 'done' };
    this.#o.store.record(key, done);
    await this.#o.ledger.write({ [key]: done }, [], term, signal);
    return this.#count('evict', { status: 'skipped', reason: `unconfirmed eviction settled as done: ${evicted}` });
  }

  /**
   * Fires, re-sends or resolves the alert of one (rule, object). A `retry`
   * outcome carries when the next re-send is due.
   */
  async alert(target: ActionTarget, violation: ViolationAlert, violating: boolean, term: LeaderTerm, signal: AbortSignal): Promise<ActionOutcome> {
    if (!this.#o.alertmanager.configured) return this.#count('alert', { status: 'error', reason: 'no --alertmanager-url configured' });
    const key = this.#key(target, violation.rule, 'alert');
    const now = this.#now();
    const v = { ...violation, epoch: term.epochString };
    let record = this.#o.store.get(key);
    if (record?.state === 'intent' && violating) {
      // An intent nobody confirmed (a leader died or was fenced between the
      // ledger write and the send, or right after the send): Alertmanager
      // itself knows whether it arrived. Sent → confirm it; not sent → send now.
      const active = await this.#o.alertmanager.isActive(alertLabels(v), AbortSignal.any([signal, term.signal]));
      if (active === undefined) return this.#count('alert', { status: 'error', reason: 'cannot settle an unconfirmed alert: no Alertmanager answered' });
      if (active) {
        const done: EmittedAction = { ...record, state: 'done' };
        this.#o.store.record(key, done);
        await this.#o.ledger.write({ [key]: done }, [], term, signal);
        record = done;
      } else {
        this.#o.store.forget(key);
        record = undefined;
      }
    }
    const decision = decideAlert(record, violating, now, this.#resendMs);
    switch (decision.type) {
      case 'none':
        return { status: 'skipped', reason: 'no violation, no alert' };
      case 'wait':
        return { status: 'retry', afterMs: decision.dueAt - now, reason: 're-send not due yet' };
      case 'resolve': {
        term.assertValid();
        const result = await this.#o.alertmanager.send([resolvedAlert(v, decision.startsAt, now, this.#o.generatorURL)], AbortSignal.any([signal, term.signal]), term);
        if (!result.delivered) return this.#count('alert', { status: 'error', reason: `resolve not delivered: ${result.outcomes.map((o) => `${o.url}: ${o.error}`).join('; ')}` });
        this.#o.store.forget(key);
        await this.#o.ledger.write({}, [key], term, signal);
        return this.#count('alert', { status: 'done' });
      }
      case 'fire': {
        const intent: EmittedAction = { state: 'intent', epoch: term.epochString, at: now, until: decision.endsAt, startsAt: decision.startsAt };
        await this.#o.ledger.write({ [key]: intent }, [], term, signal);
        this.#o.store.record(key, intent);
        term.assertValid();
        const result = await this.#o.alertmanager.send([firingAlert(v, decision.startsAt, decision.endsAt, this.#o.generatorURL)], AbortSignal.any([signal, term.signal]), term);
        if (!result.delivered) {
          this.#o.store.forget(key);
          await this.#o.ledger.write({}, [key], term, signal);
          return this.#count('alert', { status: 'error', reason: `alert not delivered: ${result.outcomes.map((o) => `${o.url}: ${o.error}`).join('; ')}` });
        }
        const done: EmittedAction = { ...intent, state: 'done' };
        this.#o.store.record(key, done);
        await this.#o.ledger.write({ [key]: done }, [], term, signal);
        return this.#count('alert', { status: 'done', requeueAfterMs: this.#resendMs });
      }
    }
  }
}
