/**
 * An in-process {@link Decide} (tests and tools; `portal serve` decides in the
 * evaluation pool, adr/0013): the policy engine's admission path, which
 * equals `decide(evaluate(rules, input))` but skips building the pass and
 * skip verdicts that a decision ignores (a property test holds the two equal).
 */
import { decideAdmission, type EvaluationInput, type RuleSet, type RuleVerdict } from '../policy/index.ts';
import type { Decide } from './decision.ts';

export interface EngineDeciderOptions {
  /**
   * Time budget of one evaluation, from the moment the decider is called
   * (after the body was received and parsed). Past it, the remaining matched
   * rules give `error` verdicts, so the request is denied rather than
   * answered late (see EvaluationBudget for how the bound holds).
   */
  evaluationTimeoutMs: number;
  /** @default performance.now */
  now?: () => number;
  /** Sees each rule's `error` verdict (metrics, Events); a throw is Portal's own error and denies with 500. */
  onRuleError?: (verdict: RuleVerdict, input: EvaluationInput) => void;
}

export function engineDecider(rules: RuleSet, opts: EngineDeciderOptions): Decide {
  const now = opts.now ?? (() => performance.now());
  const ms = opts.evaluationTimeoutMs;
  const onRuleError = opts.onRuleError;
  if (onRuleError === undefined) return (input) => decideAdmission(rules, input, { deadline: now() + ms, now, ms });
  return (input) => decideAdmission(rules, input, { deadline: now() + ms, now, ms }, (v) => onRuleError(v, input));
}
