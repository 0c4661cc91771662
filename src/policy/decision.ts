/**
 * From verdicts to the admission answer (DESIGN.md §2, §3): Deny failures and
 * evaluation errors reject (fail closed), Warn violations become warnings,
 * Audit is silent at admission.
 */
import type { RuleVerdict } from './types.ts';

export type AdmissionDecision =
  | { allowed: true; warnings: string[] }
  | { allowed: false; code: 403 | 500; message: string; warnings: string[] };

/** Each warning stays under 120 characters: the apiserver cuts long ones, and
 * kubectl prints each on one line (FACTS.md, AdmissionReview). */
export const MAX_WARNING_LENGTH = 119;

function shorten(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

function warningFor(v: RuleVerdict): string {
  const first = v.violations[0];
  const ruleMessage = v.message.startsWith(`${v.rule}: `) ? v.message.slice(v.rule.length + 2).replace(/ \[.*$/s, '') : v.message;
  const detail = first ? (first.path ? ` (${first.path}: ${first.message})` : ` (${first.message})`) : '';
  return shorten(`${v.rule}: ${ruleMessage}${detail}`, MAX_WARNING_LENGTH);
}

export function decide(verdicts: readonly RuleVerdict[]): AdmissionDecision {
  const warnings = verdicts.filter((v) => v.result === 'warn' && v.enforcement === 'Warn').map(warningFor);
  const blocking = verdicts.filter((v) => v.result === 'error' || (v.result === 'fail' && v.enforcement === 'Deny'));
  if (blocking.length === 0) return { allowed: true, warnings };
  const message =
    blocking.length === 1
      ? (blocking[0] as RuleVerdict).message
      : `denied by ${blocking.length} rules: ${blocking.map((v) => v.message).join('; ')}`;
  return { allowed: false, code: 403, message, warnings };
}
