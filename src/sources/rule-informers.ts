/**
 * Feeds PortalClusterRule (cluster), PortalRule and PortalException (all
 * namespaces) objects from three ResilientInformers into a rule set. Ready
 * only once all three have synced, so admission never evaluates against a
 * partial rule list, and the audit never acts on an object whose exception
 * it has not read yet.
 */
import type { Logger } from 'pino';
import { EXCEPTION_KIND, RULE_API_VERSION, RULE_GROUP, RULE_VERSION, type KubeObject, type PortalRuleObject } from '../policy/types.ts';
import { ruleKey as policyRuleKey } from '../policy/rule-entry.ts';
import { exceptionKey } from '../policy/match-keys.ts';
import type { KubeClient } from '../kube/client.ts';
import { ResilientInformer, type InformerConfig, type InformerEvent } from '../kube/informer.ts';
import { LogKey } from '../observability/log-keys.ts';
import { toError } from '../observability/errors.ts';

/** What the source writes into (src/policy's RuleSet satisfies it). */
export interface RuleSink {
  upsert(rule: PortalRuleObject): unknown;
  remove(key: string): unknown;
  /** A PortalException, raw (the sink validates it). */
  upsertException(exception: KubeObject): unknown;
  removeException(key: string): unknown;
}

export interface RuleInformerSourceOptions extends Pick<InformerConfig, 'staleAfterMs' | 'backoff' | 'watchTimeoutSeconds'> {
  /** Key function matching the sink's keys. @default src/policy's ruleKey */
  ruleKey?: (rule: PortalRuleObject) => string;
}

export class RuleInformerSource {
  readonly clusterRules: ResilientInformer<KubeObject>;
  readonly namespacedRules: ResilientInformer<KubeObject>;
  readonly exceptions: ResilientInformer<KubeObject>;
  readonly #sink: RuleSink;
  readonly #key: (rule: PortalRuleObject) => string;
  readonly #logger: Logger;

  constructor(client: KubeClient, sink: RuleSink, logger: Logger, options: RuleInformerSourceOptions = {}) {
    const { ruleKey, ...informerOptions } = options;
    this.#sink = sink;
    this.#key = ruleKey ?? policyRuleKey;
    this.#logger = logger.child({ [LogKey.subcomponent]: 'rule-source' });
    const base = `/apis/${RULE_GROUP}/${RULE_VERSION}`;
    this.clusterRules = new ResilientInformer(
      client,
      { name: 'portalclusterrules', path: `${base}/portalclusterrules`, apiVersion: RULE_API_VERSION, kind: 'PortalClusterRule', ...informerOptions },
      logger,
    );
    this.namespacedRules = new ResilientInformer(
      client,
      { name: 'portalrules', path: `${base}/portalrules`, apiVersion: RULE_API_VERSION, kind: 'PortalRule', ...informerOptions },
      logger,
    );
    this.exceptions = new ResilientInformer(
      client,
      { name: 'portalexceptions', path: `${base}/portalexceptions`, apiVersion: RULE_API_VERSION, kind: EXCEPTION_KIND, ...informerOptions },
      logger,
    );
    this.clusterRules.onEvent((e) => this.#apply(e));
    this.namespacedRules.onEvent((e) => this.#apply(e));
    this.exceptions.onEvent((e) => {
      try {
        if (e.type === 'delete') this.#sink.removeException(exceptionKey(e.object));
        else this.#sink.upsertException(e.object);
      } catch (err) {
        this.#logger.error({ [LogKey.error]: toError(err), [LogKey.exception]: exceptionKey(e.object) }, 'rule set rejected exception');
      }
    });
  }

  #apply(event: InformerEvent<KubeObject>): void {
    const rule = event.object as unknown as PortalRuleObject;
    try {
      if (event.type === 'delete') this.#sink.remove(this.#key(rule));
      else this.#sink.upsert(rule);
    } catch (err) {
      // A rule the sink rejects must not stop the stream of the others.
      this.#logger.error({ [LogKey.error]: toError(err), [LogKey.rule]: this.#key(rule) }, 'rule set rejected rule');
    }
  }

  async start(signal: AbortSignal): Promise<void> {
    await Promise.all([this.clusterRules.start(signal), this.namespacedRules.start(signal), this.exceptions.start(signal)]);
  }

  async waitForSync(signal?: AbortSignal): Promise<void> {
    await Promise.all([this.clusterRules.waitForSync(signal), this.namespacedRules.waitForSync(signal), this.exceptions.waitForSync(signal)]);
  }

  /** All three informers have listed at least once (latches). */
  hasSynced(): boolean {
    return this.clusterRules.hasSynced() && this.namespacedRules.hasSynced() && this.exceptions.hasSynced();
  }

  ready(): boolean {
    return this.clusterRules.ready() && this.namespacedRules.ready() && this.exceptions.ready();
  }
}
