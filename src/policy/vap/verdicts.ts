/**
 * VAP evaluations as Portal verdicts (the rows of `portal test`, the audit's
 * PolicyReport results): `rule` = the policy's name, `reportRule` = the
 * binding's name, severity and category from the policy's annotations
 * `policies.portal.dev/severity` / `policies.portal.dev/category`.
 */
import type { Enforcement, RuleVerdict, Severity } from '../types.ts';
import type { BindingEvaluation } from './compiled.ts';
import { verdictOf } from './outcome.ts';
import type { ValidatingAdmissionPolicy } from './types.ts';

export const SEVERITY_ANNOTATION = 'policies.portal.dev/severity';
export const CATEGORY_ANNOTATION = 'policies.portal.dev/category';
const SEVERITIES: readonly string[] = ['critical', 'high', 'medium', 'low', 'info'];

function enforcementOf(actions: readonly string[]): Enforcement {
  return actions.includes('Deny') ? 'Deny' : actions.includes('Warn') ? 'Warn' : 'Audit';
}

export function vapVerdicts(results: readonly BindingEvaluation[], policies: ReadonlyMap<string, ValidatingAdmissionPolicy>): RuleVerdict[] {
  return results.map((r) => {
    const policy = policies.get(r.policy);
    const a = policy?.metadata.annotations ?? {};
    const sev = a[SEVERITY_ANNOTATION];
    const v = verdictOf(r);
    const out: RuleVerdict = {
      rule: r.policy,
      ruleKind: 'ValidatingAdmissionPolicy',
      enforcement: enforcementOf(r.actions),
      failurePolicy: policy?.spec.failurePolicy === 'Ignore' ? 'Ignore' : 'Fail',
      severity: (sev !== undefined && SEVERITIES.includes(sev) ? sev : 'medium') as Severity,
      category: a[CATEGORY_ANNOTATION] ?? 'ValidatingAdmissionPolicy',
      result: v.result,
      message: v.message,
      violations: [],
    };
    if (r.binding !== '') out.reportRule = r.binding;
    return out;
  });
}
