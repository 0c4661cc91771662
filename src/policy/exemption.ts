/**
 * Applying the RuleSet's PortalExceptions to a verdict: the first exception
 * (in key order) that covers the (input, rule) pair ({@link judge}) turns the
 * verdict into `skip`, naming the exception. evaluate() and decideAdmission()
 * do it for Portal rules; {@link exemptVerdicts} does it for verdicts of other
 * policy kinds (ValidatingAdmissionPolicies in the audit and `portal test`).
 */
import { judge, type CompiledException, type CoverageContext, type RuleRef } from './exceptions.ts';
import type { RuleSet } from './rule-set.ts';
import type { EvaluationInput, RuleVerdict } from './types.ts';

/** Finds exceptions for one input; the clock is read once, only if an exception is consulted. */
export class Exemptions {
  readonly #rules: RuleSet;
  readonly #input: EvaluationInput;
  readonly #deadline: CoverageContext['deadline'];
  #ctx: CoverageContext | undefined;

  constructor(rules: RuleSet, input: EvaluationInput, deadline?: CoverageContext['deadline']) {
    this.#rules = rules;
    this.#input = input;
    this.#deadline = deadline;
  }

  /** The exception that covers `rule` for this input, if any. */
  find(rule: RuleRef, template: { path: readonly string[]; prefix: string } | undefined): CompiledException | undefined {
    const input = this.#input;
    const candidates = this.#rules.exceptionsFor(rule, input.namespace);
    if (candidates.length === 0) return undefined;
    this.#ctx ??= { now: input.now ?? Date.now(), maxLifetimeMs: this.#rules.options.maxLifetimeMs, deadline: this.#deadline };
    for (const ex of candidates) if (judge(ex, rule, input, template, this.#ctx) === 'covers') return ex;
    return undefined;
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
