/**
 * The audit's view of its policies by display key (`name` or
 * `namespace/name`, as reports and alerts name them): the RuleSet's states,
 * cached per revision, and the audit actions of a rule or of another policy
 * source (a VAP's `policies.portal.dev/audit-actions`).
 */
import type { RuleSet, RuleState } from '../policy/index.ts';
import type { RuleAction } from '../policy/types.ts';
import type { AuditPolicySource, ObjectState } from './audit-step.ts';
import { ruleDisplay } from './status-writer.ts';

export interface AuditRule {
  display: string;
  state: RuleState | undefined;
  actions: readonly RuleAction[];
}

export class AuditRules {
  readonly #ruleSet: RuleSet;
  readonly #policies: readonly AuditPolicySource[];
  #revision = -1;
  #byDisplay = new Map<string, RuleState>();
  #known: { revision: string; keys: ReadonlySet<string> | undefined } | undefined;

  constructor(ruleSet: RuleSet, policies: readonly AuditPolicySource[]) {
    this.#ruleSet = ruleSet;
    this.#policies = policies;
  }

  /** Rules with their display key, cached per rule set revision. */
  states(): Map<string, RuleState> {
    if (this.#revision !== this.#ruleSet.revision) {
      this.#byDisplay = new Map(this.#ruleSet.states().map((s) => [ruleDisplay(s), s]));
      this.#revision = this.#ruleSet.revision;
    }
    return this.#byDisplay;
  }

  /**
   * The lookup keys of every policy that exists (`rule:DISPLAY` and the
   * policy sources' keys), as PortalExceptions name them; undefined while a
   * source has not listed yet. Cached per revision of the rules and sources.
   */
  knownKeys(): ReadonlySet<string> | undefined {
    const revision = [this.#ruleSet.revision, ...this.#policies.map((p) => p.revision)].join('/');
    if (this.#known?.revision === revision && this.#known.keys !== undefined) return this.#known.keys;
    let keys: Set<string> | undefined = new Set([...this.states().keys()].map((d) => `rule:${d}`));
    for (const p of this.#policies) {
      if (!p.ruleKeys) continue;
      const more = p.ruleKeys();
      if (more === undefined) {
        keys = undefined;
        break;
      }
      for (const k of more) keys.add(k);
    }
    this.#known = { revision, keys };
    return keys;
  }

  /** The rules an object violates or once violated (whose alert may need resolving), with their audit actions. */
  of(st: ObjectState): AuditRule[] {
    const byDisplay = this.states();
    const names = new Set([...st.seen, ...st.verdicts.map((v) => v.rule)]);
    return [...names].map((display) => {
      const state = byDisplay.get(display);
      return { display, state, actions: state?.actions ?? this.#policyActions(display) };
    });
  }

  #policyActions(display: string): readonly RuleAction[] {
    for (const p of this.#policies) {
      const a = p.actionsFor?.(display);
      if (a) return a;
    }
    return [];
  }
}
