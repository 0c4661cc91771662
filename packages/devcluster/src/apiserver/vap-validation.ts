/**
 * kube-apiserver's defaulting and validation of ValidatingAdmissionPolicy and
 * ValidatingAdmissionPolicyBinding objects: the same checks `portal test`
 * runs (src/policy/vap/validate.ts, expressions compiled with the CEL
 * engine), answered as 422 causes.
 */
import { policyCompileProblems, validateBinding, validatePolicy, type FieldError } from 'portal/dev-api';
import type { StatusCause } from './status.ts';
import { isPlainObject, type Obj } from './types.ts';

/** admissionregistration/v1 defaults: failurePolicy Fail, matchPolicy Equivalent, empty selectors, scope "*". */
function defaultMatch(m: unknown): void {
  if (!isPlainObject(m)) return;
  m['matchPolicy'] ??= 'Equivalent';
  m['namespaceSelector'] ??= {};
  m['objectSelector'] ??= {};
  for (const key of ['resourceRules', 'excludeResourceRules']) {
    const rules = m[key];
    if (Array.isArray(rules)) for (const r of rules) if (isPlainObject(r)) r['scope'] ??= '*';
  }
}

/** Metadata is validated by the generic path (validation.ts); only spec causes here. */
function causesOf(errors: readonly FieldError[]): StatusCause[] {
  return errors.filter((e) => !e.field.startsWith('metadata.')).map((e) => ({ reason: e.reason, field: e.field, message: e.message }));
}

export function vapCauses(resource: string, obj: Obj): StatusCause[] {
  const spec = obj['spec'];
  if (resource === 'validatingadmissionpolicies') {
    if (isPlainObject(spec)) {
      spec['failurePolicy'] ??= 'Fail';
      defaultMatch(spec['matchConstraints']);
    }
    const v = validatePolicy({ ...obj, apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicy' });
    if (!v.ok) return causesOf(v.errors);
    return policyCompileProblems(v.value).map((p) => {
      const colon = p.indexOf(': ');
      return { reason: 'FieldValueInvalid', field: p.slice(0, colon), message: p.slice(colon + 2) };
    });
  }
  if (resource === 'validatingadmissionpolicybindings') {
    if (isPlainObject(spec)) defaultMatch(spec['matchResources']);
    const v = validateBinding({ ...obj, apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicyBinding' });
    if (!v.ok) return causesOf(v.errors);
  }
  return [];
}
