/**
 * From verdicts to the admission answer (docs/design.md §2, §3), with VAP's
 * semantics for errors (docs/design.md §10.3): a rule's `error`
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

/**
 * How an admission request ended: the `decision` label of metrics and logs.
 * Bounded set. `overloaded`: denied because its flow's queue was full or it
 * could not start in time (evaluation/pool.ts), neither a verdict nor an
 * internal error.
 */
export type AdmissionOutcome = 'allow' | 'warn' | 'deny' | 'exempt' | 'not_ready' | 'overloaded' | 'error' | 'invalid';

export type AdmissionDecision =
  | { allowed: true; warnings: string[]; exempted?: Exempted[] }
  | { allowed: false; code: 403 | 500; message: string; warnings: string[]; exempted?: Exempted[]; deniedBy?: string[] };

/** Each warning stays under 120 characters: the apiserver cuts long ones, and
 * kubectl prints each on one line (docs/design.md §10.1). */
export const MAX_WARNING_LENGTH = 119;

/**
 * `s` cut to at most `max` characters, the cut marked with `…`: the one
 * clipper for warnings and messages. It cuts at a word (the last space that
 * keeps at least half of the room), never inside one, and drops the
 * punctuation left dangling before the `…`; only a text whose first half is
 * one unbroken token is cut inside it.
 */
export function clipText(s: string, max: number): string {
  if (s.length <= max) return s;
  const room = max - 1;
  const space = s.lastIndexOf(' ', room);
  const cut = space >= room / 2 ? space : room;
  return `${s.slice(0, cut).replace(/[\s,;:([]+$/, '')}…`;
}

/** The remedy of a rule message written "what is wrong; what to do" (the Pod Security messages): the part after the first "; ". */
function remedyOf(message: string): string | undefined {
  const i = message.indexOf('; ');
  return i > 0 && i + 2 < message.length ? message.slice(i + 2) : undefined;
}

/**
 * One rule's warning, under MAX_WARNING_LENGTH: the first that fits of
 * `rule: message (first violation)`, `rule: message`, `rule: remedy` (the
 * rule's name says what is wrong, the remedy says what to change); else the
 * remedy (or the message) cut at a word. So the fix a message describes
 * survives: `disallow-privilege-escalation: set
 * securityContext.allowPrivilegeEscalation to false in every container.`
 * rather than a line cut off in the middle of that field's name.
 */
function warningFor(v: RuleVerdict): string {
  const first = v.violations[0];
  const ruleMessage = v.message.startsWith(`${v.rule}: `) ? v.message.slice(v.rule.length + 2).replace(/ \[.*$/s, '') : v.message;
  const detail = first ? (first.path ? ` (${first.path}: ${first.message})` : ` (${first.message})`) : '';
  const remedy = remedyOf(ruleMessage);
  const candidates = [`${v.rule}: ${ruleMessage}${detail}`, `${v.rule}: ${ruleMessage}`, ...(remedy ? [`${v.rule}: ${remedy}`] : [])];
  return candidates.find((c) => c.length <= MAX_WARNING_LENGTH) ?? clipText(candidates.at(-1)!, MAX_WARNING_LENGTH);
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
