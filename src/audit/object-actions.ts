/**
 * The leader's side effects on one evaluated object (actuator.ts): its
 * report marked dirty, label/annotate/evict for each rule it violates, and
 * the alert fired or resolved — and, at a takeover, whether any of them is
 * still owed as far as this replica has observed.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { KubeClient } from '../kube/client.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import { TokenBucket } from '../kube/rate-limiter.ts';
import type { LeaderTerm } from '../util/leader-term.ts';
import { ActionExecutor, type ActionOutcome, type ActionTarget } from './actions.ts';
import { decideAlert } from './alert-scheduler.ts';
import { AlertmanagerClient } from './alertmanager.ts';
import type { ObjectState } from './audit-step.ts';
import type { AuditEvaluator } from './evaluator.ts';
import { actionKey } from './idempotency.ts';
import { LedgerWriter } from './ledger-writer.ts';
import type { HandlerResult } from './worker-pool.ts';

export interface ObjectActionsOptions {
  client: KubeClient;
  writer: FencedWriter;
  evaluator: AuditEvaluator;
  installNamespace: string;
  exemptNamespaces: readonly string[];
  /** `--max-evictions-per-minute` (0 disables evictions). */
  maxEvictionsPerMinute: number;
  alertmanagerUrls: readonly string[];
  /** `--alert-resend-interval`. */
  resendIntervalMs: number;
  /** Marks the object's report dirty when what it says about the object changed. */
  touchReport(key: string, st: ObjectState): void;
  /** A side effect was made (bench/failover figures). */
  onSideEffect(): void;
  logger: Logger;
  registry: Registry;
}

export class ObjectActions {
  readonly #o: ObjectActionsOptions;
  readonly #executor: ActionExecutor;
  readonly #alertmanager: AlertmanagerClient;

  constructor(o: ObjectActionsOptions) {
    this.#o = o;
    const { client, writer } = o;
    this.#alertmanager = new AlertmanagerClient({ urls: o.alertmanagerUrls, writer, logger: o.logger, registry: o.registry });
    this.#executor = new ActionExecutor({
      writer,
      writeLimiter: client.writeLimiter,
      // N per minute, burst 1: evictions spread evenly (see ActionExecutorOptions).
      evictionLimiter: new TokenBucket({ qps: Math.max(o.maxEvictionsPerMinute, 1e-6) / 60, burst: 1 }),
      ledger: new LedgerWriter({ writer, namespace: o.installNamespace, writeLimiter: client.writeLimiter }),
      alertmanager: this.#alertmanager,
      store: o.evaluator.store,
      exemptNamespaces: new Set([...o.exemptNamespaces, o.installNamespace]),
      resendIntervalMs: o.resendIntervalMs,
      logger: o.logger,
      registry: o.registry,
    });
  }

  /** Does this object still need an action (as far as this replica has observed)? Reports: {@link #reconcileReports}. */
  pending(key: string, st: ObjectState): boolean {
    const store = this.#o.evaluator.store;
    const now = Date.now();
    for (const rule of this.#o.evaluator.rulesOf(st)) {
      const violating = st.violating.has(rule.display);
      const k = (type: 'label' | 'annotate' | 'alert' | 'evict') => actionKey({ rule: rule.display, gvk: st.gvk, namespace: st.object.metadata?.namespace ?? '', name: st.object.metadata?.name ?? '', actionType: type });
      for (const a of rule.actions) {
        if (!violating || st.deleted) continue;
        if ((a.type === 'label' || a.type === 'annotate') && !store.has(k(a.type))) return true;
        // An unconfirmed eviction intent is settled by the executor (it reads the pod).
        if (a.type === 'evict' && this.#o.maxEvictionsPerMinute > 0 && store.get(k('evict'))?.state !== 'done') return true;
      }
      if (this.#alertmanager.configured) {
        const wants = violating && !st.deleted && rule.actions.some((a) => a.type === 'alert');
        const record = store.get(k('alert'));
        // An unconfirmed intent (its sender died or was fenced) is settled with Alertmanager by the executor.
        if (wants && record?.state === 'intent') return true;
        const d = decideAlert(record, wants, now, this.#o.resendIntervalMs);
        if (d.type === 'fire' || d.type === 'resolve') return true;
        if (d.type === 'wait') this.#o.evaluator.enqueueAfter(key, d.dueAt - now);
      }
    }
    return false;
  }

  /**
   * The side effects for one freshly evaluated object, under `term`. Throws
   * what the term's end throws (the caller tells it apart); an action that
   * failed for this object throws once all were tried.
   */
  async act(key: string, st: ObjectState, term: LeaderTerm, signal: AbortSignal): Promise<HandlerResult> {
    const store = this.#o.evaluator.store;
    const outcomes: ActionOutcome[] = [];
    // 1. The report: marked dirty when what it says about the object changed (the flusher writes it).
    this.#o.touchReport(key, st);
    // 2. Actions of every rule the object violates; alert resolution for the others.
    const target: ActionTarget = { gvk: st.gvk, object: st.object };
    const states = this.#o.evaluator.ruleStates();
    const meta = st.object.metadata ?? {};
    for (const { display, actions } of this.#o.evaluator.rulesOf(st)) {
      const verdict = st.verdicts.find((v) => v.rule === display);
      const violating = !st.deleted && st.violating.has(display);
      if (violating && verdict) {
        if (actions.some((a) => a.type === 'label' || a.type === 'annotate')) outcomes.push(await this.#counted(this.#executor.mark(target, display, actions, term, signal)));
        if (actions.some((a) => a.type === 'evict') && this.#o.maxEvictionsPerMinute > 0) outcomes.push(await this.#counted(this.#executor.evict(target, display, term, signal)));
      }
      const wantsAlert = actions.some((a) => a.type === 'alert');
      const alertKey = actionKey({ rule: display, gvk: st.gvk, namespace: meta.namespace ?? '', name: meta.name ?? '', actionType: 'alert' });
      if ((wantsAlert && violating) || store.has(alertKey)) {
        if (!this.#alertmanager.configured) {
          if (wantsAlert && violating) outcomes.push({ status: 'skipped', reason: 'no --alertmanager-url configured' });
          continue;
        }
        const violation = {
          rule: display,
          severity: verdict?.severity ?? states.get(display)?.severity ?? 'medium',
          kind: st.gvk.kind,
          namespace: meta.namespace ?? '',
          name: meta.name ?? '',
          message: verdict?.message ?? `${display}: violation resolved`,
          epoch: term.epochString,
        };
        outcomes.push(await this.#counted(this.#executor.alert(target, violation, wantsAlert && violating, term, signal)));
      }
    }
    this.#o.evaluator.prune(key, st);
    const errors = outcomes.filter((o): o is Extract<ActionOutcome, { status: 'error' }> => o.status === 'error');
    if (errors.length > 0) throw new Error(errors.map((e) => e.reason).join('; '));
    let after: number | undefined;
    for (const o of outcomes) {
      const ms = o.status === 'retry' ? o.afterMs : o.status === 'done' ? o.requeueAfterMs : undefined;
      if (ms !== undefined && (after === undefined || ms < after)) after = ms;
    }
    return after !== undefined ? { requeueAfterMs: Math.max(0, after) } : undefined;
  }

  async #counted(p: Promise<ActionOutcome>): Promise<ActionOutcome> {
    const o = await p;
    if (o.status === 'done') this.#o.onSideEffect();
    return o;
  }
}
