/**
 * Applying the RuleSet's PortalExceptions to a verdict: the first exception
 * (in key order) that covers the (input, rule) pair ({@link judge}) turns the
 * verdict into `skip`, naming the exception. evaluate() and decideAdmission()
 * do it for Portal rules; {@link exemptVerdicts} does it for verdicts of other
 * policy kinds (ValidatingAdmissionPolicies in the audit and `portal test`).
 */
import { judgeObject, type CompiledException, type CoverageContext } from './exceptions.ts';
import { refKeys, type RuleRef } from './match-keys.ts';
import type { RuleSet } from './rule-set.ts';
import type { EvaluationInput, RuleVerdict } from './types.ts';

/**
 * Finds exceptions for one input. Whether an exception selects the object
 * (judgeObject) does not depend on the rule, so it is decided once per
 * exception for the input (and per pod template path), on first need; each
 * rule then only looks for a covering exception that names it. A namespace
 * whose exceptions all miss the object costs one pass over them, not one per
 * rule. The clock is read once, only if an exception is consulted.
 */
export class Exemptions {
  readonly #rules: RuleSet;
  readonly #input: EvaluationInput;
  readonly #deadline: CoverageContext['deadline'];
  /** Exceptions that cover the object, in key order, per template prefix ('' = the object itself). */
  readonly #covering = new Map<string, readonly CompiledException[]>();

  constructor(rules: RuleSet, input: EvaluationInput, deadline?: CoverageContext['deadline']) {
    this.#rules = rules;
    this.#input = input;
    this.#deadline = deadline;
  }

  /** The exception that covers `rule` for this input, if any (the first in key order). */
  find(rule: RuleRef, template: { path: readonly string[]; prefix: string } | undefined): CompiledException | undefined {
    const covering = this.#coveringFor(template);
    if (covering.length === 0) return undefined;
    const keys = refKeys(rule);
    for (const ex of covering) {
      for (const k of keys) if (ex.ruleKeys.has(k)) return ex;
    }
    return undefined;
  }

  #coveringFor(template: { path: readonly string[]; prefix: string } | undefined): readonly CompiledException[] {
    const slot = template?.prefix ?? '';
    let covering = this.#covering.get(slot);
    if (covering === undefined) {
      const input = this.#input;
      const ctx: CoverageContext = { now: input.now ?? Date.now(), maxLifetimeMs: this.#rules.options.maxLifetimeMs, deadline: this.#deadline };
      const found = this.#rules.exceptionsIn(input.namespace).filter((ex) => judgeObject(ex, input, template, ctx) === 'covers');
      covering = found.length > 1 ? found.sort((a, b) => a.key.localeCompare(b.key)) : found;
      this.#covering.set(slot, covering);
    }
    return covering;
  }
}

/** The `skip` verdict an exception gives in place of the rule's own. */
export function exemptedVerdict(v: Omit<RuleVerdict, 'result' | 'message' | 'violations' | 'exception'>, ex: CompiledException): RuleVerdict {
  return { ...v, result: 'skip', message: `${v.rule}: skipped: exempted by PortalException ${ex.display} (${ex.reason})`, violations: [], exception: ex.display };
}

/**
 * Verdicts of ValidatingAdmissionPolicies (or any policy kind named like
 * one) with the exceptions applied: a matched verdict (anything but `skip`)
 * that an exception covers becomes `skip` naming it. Verdicts of Portal
 * rules pass through: evaluate() already applied exceptions to them.
 */
export function exemptVerdicts(rules: RuleSet, input: EvaluationInput, verdicts: readonly RuleVerdict[]): RuleVerdict[] {
  if (!rules.mayExempt(input.namespace)) return [...verdicts];
  const exemptions = new Exemptions(rules, input);
  return verdicts.map((v) => {
    if (v.ruleKind !== 'ValidatingAdmissionPolicy' || v.result === 'skip') return v;
    const ex = exemptions.find({ kind: 'vap', policy: v.rule, binding: v.reportRule ?? '' }, undefined);
    return ex ? exemptedVerdict(v, ex) : v;
  });
}
