/**
 * What the audit keeps of an object's verdicts: which rules it violates,
 * which exceptions exempt it, whether a report's content changed, and one
 * shared frozen copy of each verdict that says nothing object-specific.
 */
import type { RuleVerdict } from '../policy/types.ts';

/** The exceptions in a verdict list, with the rules each exempts. */
export function exemptionsOf(verdicts: readonly RuleVerdict[]): Map<string, string[]> | undefined {
  let out: Map<string, string[]> | undefined;
  for (const v of verdicts) {
    if (v.exception === undefined) continue;
    out ??= new Map();
    const rules = out.get(v.exception);
    const name = v.reportRule && v.reportRule !== v.rule ? `${v.rule}/${v.reportRule}` : v.rule;
    if (rules) rules.push(name);
    else out.set(v.exception, [name]);
  }
  return out;
}

export const isViolation = (v: RuleVerdict): boolean => v.result === 'fail' || v.result === 'warn';

/** Same report content: the verdict fields a report carries, in the same order (evaluation order is deterministic). */
export function sameVerdicts(a: readonly RuleVerdict[], b: readonly RuleVerdict[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (
      x.rule !== y.rule ||
      x.reportRule !== y.reportRule ||
      x.result !== y.result ||
      x.message !== y.message ||
      x.severity !== y.severity ||
      x.category !== y.category ||
      x.enforcement !== y.enforcement ||
      x.ruleKind !== y.ruleKind ||
      x.exception !== y.exception
    ) {
      return false;
    }
  }
  return true;
}

/**
 * One shared, frozen copy of each verdict that carries no violations (every
 * `pass`, most `skip`s): the audit keeps every object's verdicts, and the
 * evaluation pool hands back a fresh clone for each object, so at 50,000
 * Pods × 19 rules identical verdicts would hold ~140 MB (issue 20). Bounded:
 * the table starts over past {@link INTERNED_MAX} distinct verdicts.
 */
export class VerdictInterner {
  readonly #table = new Map<string, RuleVerdict>();

  intern(v: RuleVerdict): RuleVerdict {
    if (v.violations.length > 0 || v.error !== undefined || v.result === 'fail' || v.result === 'warn') return v;
    // Every field but the two excluded above: a field added to RuleVerdict fails to typecheck here until it is keyed.
    const fields: Record<Exclude<keyof RuleVerdict, 'violations' | 'error'>, string | undefined> = {
      result: v.result,
      rule: v.rule,
      reportRule: v.reportRule,
      ruleKind: v.ruleKind,
      enforcement: v.enforcement,
      failurePolicy: v.failurePolicy,
      severity: v.severity,
      category: v.category,
      message: v.message,
      // A skip names the PortalException that exempted the object: skips by different exceptions are different verdicts.
      exception: v.exception,
    };
    const key = JSON.stringify(Object.values(fields));
    const known = this.#table.get(key);
    if (known) return known;
    if (this.#table.size >= INTERNED_MAX) this.#table.clear();
    const frozen = Object.freeze({ ...v, violations: NO_VIOLATIONS });
    this.#table.set(key, frozen);
    return frozen;
  }
}

/** Distinct pass/skip verdicts kept: rules × kinds × (for skips) namespaces, with room. */
const INTERNED_MAX = 50_000;
const NO_VIOLATIONS = Object.freeze([]) as unknown as RuleVerdict['violations'];

