/** The production {@link Decide}: the policy engine's evaluate() then decide(). */
import { decide, evaluate, type RuleSet } from '../policy/index.ts';
import type { Decide } from './decision.ts';

export function engineDecider(rules: RuleSet): Decide {
  return (input) => decide(evaluate(rules, input));
}
