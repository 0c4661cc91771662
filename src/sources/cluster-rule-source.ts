/**
 * Cluster mode's RuleSource (rule-source.ts): rules from the PortalClusterRule and
 * PortalRule informers (RuleInformerSource) into a RuleSet, namespace labels
 * from a Namespace informer (NamespaceLabelCache).
 *
 * Ready (and so admitting) only once all three informers have listed at least
 * once. The latch is deliberate: after the first sync a replica keeps
 * answering from its cache while the API server is away (docs/design.md §1:
 * admission never depends on the control plane being reachable); staleness
 * shows up in /debug/vars and the informers' own logs instead.
 */
import type { NamespaceLabelStore } from '../policy/namespace-label-store.ts';
import type { Logger } from 'pino';
import type { Gauge } from 'prom-client';
import { LogKey } from '../observability/log-keys.ts';
import { RuleSet, ruleKey, type ExceptionOptions, type KubeObject, type PortalRuleObject, type RuleState } from '../policy/index.ts';
import type { KubeClient } from '../kube/client.ts';
import { NamespaceLabelCache } from './namespace-labels.ts';
import { RuleInformerSource, type RuleSink } from './rule-informers.ts';
import type { RuleSource } from './rule-source.ts';
import type { Runnable } from '../util/runnable.ts';
import { CompileQueue } from './compile-queue.ts';
import { toError } from '../observability/errors.ts';

/** An informer as the Manager runs it: a Runnable that says when it has listed once. */
export type InformerRunnable = Runnable & Required<Pick<Runnable, 'waitForSync'>>;

export interface ClusterRuleSourceDeps {
  client: KubeClient;
  logger: Logger;
  /** `portal_rules_loaded`, kept equal to the number of rules held. */
  rulesLoaded?: Gauge;
  /** How PortalExceptions are judged (`--exception-namespaces`, `--max-exception-lifetime`). */
  exceptions?: ExceptionOptions;
  /** Sees every rule version with what the RuleSet made of it (e.g. to report a compile error). */
  onRule?: (rule: PortalRuleObject, state: RuleState) => void;
  /** The share of the replica's time rule compiles may take once synced (compile-queue.ts). @default 0.25 */
  compileShare?: number;
}

export class ClusterRuleSource implements RuleSource {
  readonly ruleSet: RuleSet;
  readonly rules: RuleInformerSource;
  readonly namespaces: NamespaceLabelCache;
  readonly namespaceLabels: (namespace: string) => Record<string, string> | undefined;
  /** The same labels as a store the evaluation workers mirror. */
  readonly namespaceStore: NamespaceLabelStore;
  /** Rule upserts waiting for their share of compile time (compile-queue.ts). */
  readonly compiles: CompileQueue;

  constructor(deps: ClusterRuleSourceDeps) {
    const log = deps.logger;
    const ruleSet = (this.ruleSet = new RuleSet(deps.exceptions ?? {}));
    // The RuleSet hands back the same state when a version changed nothing it holds (a status
    // update by the leader, a relist): that is logged once, not again with every such event.
    const logged = new WeakSet<RuleState>();
    // A sink that reports what the RuleSet decided: a rule that fails
    // validation or compilation is logged (the RuleSet keeps its last good
    // version, or denies what it matches if it never compiled).
    const sink: RuleSink = {
      upsert(rule: PortalRuleObject) {
        const state = ruleSet.upsert(rule);
        deps.rulesLoaded?.set(ruleSet.size);
        deps.onRule?.(rule, state);
        if (logged.has(state)) return state;
        logged.add(state);
        if (state.ready) log.info({ [LogKey.name]: state.key, [LogKey.generation]: state.generation }, 'rule in force');
        else {
          log.error(
            { [LogKey.name]: state.key, [LogKey.generation]: state.generation, [LogKey.compiledGeneration]: state.compiledGeneration, [LogKey.reason]: state.message },
            state.compiledGeneration === undefined
              ? 'rule rejected and never compiled: objects it matches are denied until it is fixed'
              : 'rule rejected: keeping its last good version',
          );
        }
        return state;
      },
      remove(key: string) {
        const removed = ruleSet.remove(key);
        if (removed) log.info({ [LogKey.name]: key }, 'rule removed');
        deps.rulesLoaded?.set(ruleSet.size);
        return removed;
      },
      upsertException(exception: KubeObject) {
        const state = ruleSet.upsertException(exception);
        if (state.valid) log.info({ [LogKey.name]: state.display, [LogKey.generation]: state.generation }, 'exception in force');
        else log.error({ [LogKey.name]: state.display, [LogKey.generation]: state.generation, [LogKey.reason]: state.message }, 'exception rejected: it exempts nothing until it is fixed');
        return state;
      },
      removeException(key: string) {
        const removed = ruleSet.removeException(key);
        if (removed) log.info({ [LogKey.name]: key }, 'exception removed');
        return removed;
      },
    };
    this.compiles = new CompileQueue(sink, {
      share: deps.compileShare,
      ruleKey,
      pacing: () => this.rules.hasSynced(),
      onError: (rule, err) => log.error({ [LogKey.error]: toError(err), [LogKey.rule]: ruleKey(rule) }, 'rule set rejected rule'),
    });
    this.rules = new RuleInformerSource(deps.client, this.compiles, log, { ruleKey });
    this.namespaces = new NamespaceLabelCache(deps.client, log);
    const cache = this.namespaces;
    this.namespaceLabels = (namespace) => (namespace === '' ? undefined : cache.labels(namespace));
    this.namespaceStore = cache.store;
  }

  ready(): boolean {
    return this.rules.hasSynced() && this.namespaces.hasSynced();
  }

  notReadyReason(): string {
    const waiting = [
      ...(this.rules.clusterRules.hasSynced() ? [] : ['portalclusterrules']),
      ...(this.rules.namespacedRules.hasSynced() ? [] : ['portalrules']),
      // Also when the PortalException CRD is missing (a Helm upgrade does not install new CRDs: docs/installation.md).
      ...(this.rules.exceptions.hasSynced() ? [] : ['portalexceptions']),
      ...(this.namespaces.hasSynced() ? [] : ['namespaces']),
    ];
    return `waiting for the ${waiting.join(', ')} informer${waiting.length === 1 ? '' : 's'} to sync`;
  }

  async start(signal: AbortSignal): Promise<void> {
    await Promise.all([this.#startRules(signal), this.namespaces.start(signal)]);
  }

  /** The rule informers, and the compile queue until the signal aborts. */
  async #startRules(signal: AbortSignal): Promise<void> {
    signal.addEventListener('abort', () => this.compiles.close(), { once: true });
    await this.rules.start(signal);
  }

  /** The informers as Runnables for the manager's informers group (sync awaited before later groups). */
  runnables(): InformerRunnable[] {
    return [
      { name: 'rule-informers', start: (signal) => this.#startRules(signal), waitForSync: (signal) => this.rules.waitForSync(signal) },
      { name: 'namespace-informer', start: (signal) => this.namespaces.start(signal), waitForSync: (signal) => this.namespaces.waitForSync(signal) },
    ];
  }

  /** For /debug/vars. */
  informerStats(): Record<string, unknown> {
    return {
      portalclusterrules: { synced: this.rules.clusterRules.hasSynced(), stale: this.rules.clusterRules.isStale(), ...this.rules.clusterRules.stats() },
      portalrules: { synced: this.rules.namespacedRules.hasSynced(), stale: this.rules.namespacedRules.isStale(), ...this.rules.namespacedRules.stats() },
      portalexceptions: { synced: this.rules.exceptions.hasSynced(), stale: this.rules.exceptions.isStale(), ...this.rules.exceptions.stats() },
      compilesWaiting: this.compiles.waitingByNamespace(),
      namespaces: { synced: this.namespaces.informer.hasSynced(), stale: this.namespaces.informer.isStale(), ...this.namespaces.informer.stats() },
    };
  }
}
