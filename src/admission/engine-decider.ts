/**
 * The production {@link Decide}: the policy engine's admission path, which
 * equals `decide(evaluate(rules, input))` but skips building the pass and
 * skip verdicts that a decision ignores (a property test holds the two equal).
 */
import { decideAdmission, type RuleSet } from '../policy/index.ts';
import type { Decide } from './decision.ts';

export function engineDecider(rules: RuleSet): Decide {
  return (input) => decideAdmission(rules, input);
}
