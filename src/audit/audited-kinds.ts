/**
 * Which kinds the audit watches (evaluator.ts): every kind some rule or other
 * policy matches, resolved to its resource through discovery, with one
 * informer each (kind-informers.ts); and each rule's coverage (coverage.ts),
 * recomputed when one of its inputs moved — rules, kinds listed or
 * forbidden, the webhook configuration.
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../kube/client.ts';
import type { WebhookConfigurationView } from '../kube/webhook-config-source.ts';
import { LogKey } from '../observability/log-keys.ts';
import type { RuleSet } from '../policy/index.ts';
import type { AuditPolicySource } from './audit-step.ts';
import { ruleCoverage, type Coverage, type CoverageInputs } from './coverage.ts';
import { KindInformers } from './kind-informers.ts';
import { KindResolver, type KindResource, type Resolution } from './kind-resources.ts';

export class AuditedKinds {
  readonly #informers: KindInformers;
  readonly #resolver: KindResolver;
  readonly #ruleSet: RuleSet;
  readonly #policies: readonly AuditPolicySource[];
  readonly #log: Logger;
  readonly #resolutions = new Map<string, Resolution>();
  #coverage = new Map<string, Coverage>();
  #coverageSignature = '';
  #unresolved: string[] = [];

  constructor(client: KubeClient, informers: KindInformers, ruleSet: RuleSet, policies: readonly AuditPolicySource[], logger: Logger) {
    this.#informers = informers;
    this.#resolver = new KindResolver(client);
    this.#ruleSet = ruleSet;
    this.#policies = policies;
    this.#log = logger;
  }

  /** Why matched kinds are not audited (not served, not resolvable). */
  get unresolved(): readonly string[] {
    return this.#unresolved;
  }

  /** The rule's coverage (RuleState key), once computed. */
  coverage(key: string): Coverage | undefined {
    return this.#coverage.get(key);
  }

  /** Starts and stops informers for the kinds matched now; returns the kinds no longer watched. */
  async sync(signal: AbortSignal): Promise<KindResource[]> {
    const wanted: KindResource[] = [];
    const unresolved: string[] = [];
    const kinds = new Map<string, { group: string; kind: string }>();
    for (const k of [this.#ruleSet.matchedKinds(), ...this.#policies.map((p) => p.matchedKinds())].flatMap((i) => [...i])) kinds.set(`${k.group}/${k.kind}`, k);
    for (const { group, kind } of kinds.values()) {
      const r = await this.#resolver.resolve(group, kind, signal);
      this.#resolutions.set(KindInformers.key(group, kind), r);
      if (r.ok) wanted.push(r.resource);
      else unresolved.push(r.reason);
    }
    if (unresolved.join() !== this.#unresolved.join()) {
      for (const reason of unresolved) this.#log.warn({ [LogKey.reason]: reason }, 'a matched kind is not audited');
      this.#unresolved = unresolved;
    }
    if (unresolved.length > 0) this.#resolver.forget();
    const { started, stopped } = this.#informers.sync(wanted, signal);
    if (started.length || stopped.length) this.#log.info({ [LogKey.started]: started.map((r) => r.kind), [LogKey.stopped]: stopped.map((r) => r.kind) }, 'audited kinds changed');
    return stopped;
  }

  /** Recomputes every rule's coverage when one of its inputs moved; returns the rules (RuleState keys) whose coverage changed. */
  updateCoverage(webhook: WebhookConfigurationView | 'unchecked' | undefined): string[] {
    const informers = this.#informers;
    const access = informers.all().map(({ resource }) => `${resource.group}/${resource.kind}=${informers.access(resource.group, resource.kind).state}`);
    const signature = [this.#ruleSet.revision, webhook === 'unchecked' ? 'unchecked' : webhook === undefined ? 'pending' : `${webhook.config ? 'present' : 'absent'}:${webhook.resourceVersion}`, ...access].join('|');
    if (signature === this.#coverageSignature) return [];
    this.#coverageSignature = signature;
    const inputs: CoverageInputs = {
      resolve: (group, kind) => this.#resolutions.get(KindInformers.key(group, kind)),
      access: (group, kind) => informers.access(group, kind),
      webhook,
    };
    const next = new Map<string, Coverage>();
    const changed: string[] = [];
    for (const state of this.#ruleSet.states()) {
      const m = this.#ruleSet.matchOf(state.key);
      if (!m) continue;
      const c = ruleCoverage({ enforcement: m.enforcement, kinds: m.match.kinds, operations: m.match.operations }, inputs);
      next.set(state.key, c);
      const before = this.#coverage.get(state.key);
      if (!before || before.reason !== c.reason || before.message !== c.message) changed.push(state.key);
    }
    this.#coverage = next;
    return changed;
  }
}
