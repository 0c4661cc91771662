/**
 * The type-checking warnings of a ValidatingAdmissionPolicy that Portal
 * audits (issue 33 item 1), as the API server writes them to the policy's
 * `status.typeChecking.expressionWarnings` (`{fieldRef, warning}`): a field
 * reference no matched kind can have. Portal does not own a VAP's status
 * (the API server does); the audit shows these as Warning Events on the
 * policy and in /debug/vars. The same check as Portal's own rules
 * (type-check.ts), over the kinds of `matchConstraints.resourceRules`.
 *
 * Not checked (no warnings): rules with `*` or a subresource (the object is
 * then not the kind's), resources whose schema is unknown, more kinds than
 * MAX_CHECKED_KINDS. Pure: no I/O.
 */
import { kindLabel, type KindSchemaSource } from '../kind-schemas/catalogue.ts';
import type { Typed } from '../cel/field-check.ts';
import { MAX_TYPES } from '../cel/field-check.ts';
import { celFieldProblems, MAX_CHECKED_KINDS, problemText, type CheckedExpression } from '../type-check.ts';
import type { ValidatingAdmissionPolicy } from './types.ts';

/** One entry of `status.typeChecking.expressionWarnings`. */
export interface ExpressionWarning {
  fieldRef: string;
  warning: string;
}

function matchedTypes(policy: ValidatingAdmissionPolicy, schemas: KindSchemaSource): Typed[] | undefined {
  const types: Typed[] = [];
  let pairs = 0;
  for (const r of policy.spec.matchConstraints?.resourceRules ?? []) {
    const versions = r.apiVersions ?? ['*'];
    for (const group of r.apiGroups ?? []) {
      for (const resource of r.resources ?? []) {
        if (group === '*' || resource.includes('*') || resource.includes('/')) return undefined;
        if (++pairs > MAX_CHECKED_KINDS) return undefined;
        const found = schemas.kindsOfResource(group, resource)?.filter((s) => versions.includes('*') || versions.includes(s.version));
        if (found === undefined || found.length === 0) return undefined;
        for (const s of found) types.push({ label: kindLabel(s), type: s.root, components: s.components });
      }
    }
  }
  return types.length === 0 || types.length > MAX_TYPES ? undefined : types;
}

function policyExpressions(policy: ValidatingAdmissionPolicy): CheckedExpression[] {
  const spec = policy.spec;
  return [
    ...(spec.matchConditions ?? []).map((m, i) => ({ field: `spec.matchConditions[${i}].expression`, expression: m.expression })),
    ...(spec.variables ?? []).map((v, i) => ({ field: `spec.variables[${i}].expression`, expression: v.expression, variable: v.name })),
    ...(spec.validations ?? []).flatMap((v, i) => [
      { field: `spec.validations[${i}].expression`, expression: v.expression },
      { field: `spec.validations[${i}].messageExpression`, expression: v.messageExpression },
    ]),
    ...(spec.auditAnnotations ?? []).map((a, i) => ({ field: `spec.auditAnnotations[${i}].valueExpression`, expression: a.valueExpression })),
  ];
}

/** The policy's expression warnings (empty when none, or when its kinds cannot be checked). */
export function vapTypeWarnings(policy: ValidatingAdmissionPolicy, schemas: KindSchemaSource): ExpressionWarning[] {
  const types = matchedTypes(policy, schemas);
  if (types === undefined) return [];
  return celFieldProblems(policyExpressions(policy), { path: '', types }).map(({ field, problem }) => ({
    fieldRef: field,
    warning: problemText(field, problem).slice(field.length + 2),
  }));
}
