/**
 * From verdicts to the admission answer (DESIGN.md §2, §3), with VAP's
 * semantics for errors (FACTS.md, "Errors and enforcement"): a rule's `error`
 * is a failure unless its failurePolicy is Ignore, and a failure does what the
 * enforcement says. Deny rejects, Warn admits with one warning per rule, Audit
 * is silent. Portal's own internal errors never reach here: the server turns
 * a throw into a 500 denial.
 */
import type { RuleVerdict } from './types.ts';

/** A rule a PortalException exempted the request from (recorded as the audit annotation `portal.dev/exception`). */
export interface Exempted {
  rule: string;
  exception: string;
}

export type AdmissionDecision =
  | { allowed: true; warnings: string[]; exempted?: Exempted[] }
  | { allowed: false; code: 403 | 500; message: string; warnings: string[]; exempted?: Exempted[]; deniedBy?: string[] };

/** Each warning stays under 120 characters: the apiserver cuts long ones, and
 * kubectl prints each on one line (FACTS.md, AdmissionReview). */
export const MAX_WARNING_LENGTH = 119;

/** `s` cut to at most `max` characters, the cut marked with `…`: the one clipper for warnings and messages. */
export function clipText(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

function warningFor(v: RuleVerdict): string {
  const first = v.violations[0];
  const ruleMessage = v.message.startsWith(`${v.rule}: `) ? v.message.slice(v.rule.length + 2).replace(/ \[.*$/s, '') : v.message;
  const detail = first ? (first.path ? ` (${first.path}: ${first.message})` : ` (${first.message})`) : '';
  return clipText(`${v.rule}: ${ruleMessage}${detail}`, MAX_WARNING_LENGTH);
}

/** An `error` verdict that counts as a failure of its rule (failurePolicy Fail, the default). */
function failedByError(v: RuleVerdict): boolean {
  return v.result === 'error' && v.failurePolicy !== 'Ignore';
}

function warns(v: RuleVerdict): boolean {
  return v.enforcement === 'Warn' && (v.result === 'warn' || failedByError(v));
}

export function blocks(v: RuleVerdict): boolean {
  return v.enforcement === 'Deny' && (v.result === 'fail' || failedByError(v));
}

export function decide(verdicts: readonly RuleVerdict[]): AdmissionDecision {
  const warnings = verdicts.filter(warns).map((v) => (v.result === 'error' ? clipText(v.message, MAX_WARNING_LENGTH) : warningFor(v)));
  const blocking = verdicts.filter(blocks);
  // An exempted rule neither denies nor warns (its verdict is skip); it is only recorded.
  let exempted: Exempted[] | undefined;
  for (const v of verdicts) if (v.exception !== undefined) (exempted ??= []).push({ rule: v.rule, exception: v.exception });
  const extra = exempted ? { exempted } : {};
  if (blocking.length === 0) return { allowed: true, warnings, ...extra };
  const message =
    blocking.length === 1
      ? (blocking[0] as RuleVerdict).message
      : `denied by ${blocking.length} rules: ${blocking.map((v) => v.message).join('; ')}`;
  return { allowed: false, code: 403, message, warnings, deniedBy: blocking.map((v) => v.rule), ...extra };
}
