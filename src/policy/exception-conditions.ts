/**
 * The status conditions of a PortalException (exceptions.ts), as the
 * leader writes them (src/audit/exception-status.ts): pure, time comes in
 * as `now`, the rules that exist as the names that did not resolve.
 */
import { lifetimeProblem } from './exception-shape.ts';

export interface ExceptionCondition {
  type: 'Ready' | 'Expired';
  status: 'True' | 'False';
  reason: string;
  message: string;
}

/** How many unknown rule names a status message lists (spec.rules holds up to 64). */
const SHOWN_UNRESOLVED = 3;

function quotedList(names: readonly string[]): string {
  const shown = names.slice(0, SHOWN_UNRESOLVED).map((n) => `"${n}"`).join(', ');
  return names.length > SHOWN_UNRESOLVED ? `${shown} and ${names.length - SHOWN_UNRESOLVED} more` : shown;
}

/**
 * The Ready and Expired conditions of an exception at `now` (what the
 * leader writes into its status). Ready: True (Active) while it exempts;
 * False with Invalid, Expired, LifetimeExceeded or RuleNotFound otherwise.
 * `unresolved`: the entries of spec.rules that name no existing rule
 * (unresolvedRules in exceptions.ts; undefined while the rules are not all known).
 * When none of its rules exists it exempts nothing: RuleNotFound, until one
 * is created. When some exist it is Active, and the message names the rest.
 */
export function exceptionConditions(
  s: { valid: boolean; message: string; expiresAt: number | undefined; createdAt: number | undefined; rules?: readonly string[] },
  now: number,
  maxLifetimeMs: number | undefined,
  unresolved?: readonly string[],
): ExceptionCondition[] {
  const at = (ms: number): string => new Date(ms).toISOString();
  const expired: ExceptionCondition =
    s.expiresAt === undefined
      ? { type: 'Expired', status: 'False', reason: 'NoExpiry', message: 'it has no spec.expiresAt' }
      : now >= s.expiresAt
        ? { type: 'Expired', status: 'True', reason: 'Expired', message: `expired at ${at(s.expiresAt)}` }
        : { type: 'Expired', status: 'False', reason: 'NotExpired', message: `expires at ${at(s.expiresAt)}` };
  let ready: ExceptionCondition;
  const missing = unresolved ?? [];
  if (!s.valid) ready = { type: 'Ready', status: 'False', reason: 'Invalid', message: s.message };
  else if (expired.status === 'True') ready = { type: 'Ready', status: 'False', reason: 'Expired', message: `it exempts nothing since it expired at ${at(s.expiresAt as number)}` };
  else {
    const refused = lifetimeProblem(s, maxLifetimeMs, now);
    if (refused) ready = { type: 'Ready', status: 'False', reason: 'LifetimeExceeded', message: `refused: ${refused}` };
    else if (missing.length > 0 && missing.length >= (s.rules?.length ?? 0)) {
      ready = {
        type: 'Ready',
        status: 'False',
        reason: 'RuleNotFound',
        message: `it exempts nothing: spec.rules names no rule that exists (${quotedList(missing)}: no PortalClusterRule, PortalRule or ValidatingAdmissionPolicy of that name); it takes effect when one is created`,
      };
    } else {
      const inForce = s.expiresAt === undefined ? 'in force, with no expiry' : `in force until ${at(s.expiresAt)}`;
      const note = missing.length > 0 ? `; spec.rules also names ${quotedList(missing)}, which no rule has (yet)` : '';
      ready = { type: 'Ready', status: 'True', reason: 'Active', message: `${inForce}${note}` };
    }
  }
  return [ready, expired];
}
