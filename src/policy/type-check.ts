/**
 * A rule type-checked against the schemas of the kinds it matches (issue 33
 * item 1; docs/cel.md "Type checking"): every CEL expression's field
 * references (cel/field-check.ts) and the `required` properties of its JSON
 * Schema (schema-required-check.ts). A reference no matched kind can have is
 * a problem: the rules webhook and `portal test` refuse it for Deny and Warn
 * rules; for Audit rules, and on every rule's status, it is the
 * `TypeChecked` condition.
 *
 * The check is not done (and says why) when a matched kind's schema is not
 * known (a CRD not served yet), when the rule matches `*` kinds or groups
 * (every schema of the cluster: not walked), or more than MAX_CHECKED_KINDS.
 *
 * Pure: no I/O.
 */
import type { ParseResult } from '@marcbachmann/cel-js';
import { env } from './cel/environment.ts';
import { checkFields, MAX_TYPES, type FieldProblem, type Followed, type Typed } from './cel/field-check.ts';
import { rewriteNamespacedCalls } from './cel/source.ts';
import { kindLabel, type KindSchemaSource } from './kind-schemas/catalogue.ts';
import { requiredProblems } from './schema-required-check.ts';
import type { RuleSpec } from './types.ts';

/** More matched kinds than this: not checked (each is a schema walked per expression). */
export const MAX_CHECKED_KINDS = 32;

export type TypeCheckReason = 'Checked' | 'FieldNotFound' | 'SchemaUnknown' | 'WildcardKinds' | 'TooManyKinds';

export type TypeCheck =
  /** `problems`: each names the rule's field, the object's field and the kinds. */
  | { state: 'checked'; problems: string[]; kinds: string[] }
  | { state: 'not-checked'; reason: Exclude<TypeCheckReason, 'Checked' | 'FieldNotFound'>; message: string };

/** The matched kinds' schemas as the root a walk starts from, or why there is none. */
function rootOf(spec: RuleSpec, schemas: KindSchemaSource): Followed | Extract<TypeCheck, { state: 'not-checked' }> {
  const pairs = new Set<string>();
  for (const k of spec.match.kinds) {
    for (const g of k.apiGroups) {
      for (const kind of k.kinds) {
        if (g === '*' || kind === '*') {
          return { state: 'not-checked', reason: 'WildcardKinds', message: 'the rule matches "*" kinds or groups: field references are not checked against every schema; name the kinds to have them checked' };
        }
        pairs.add(`${g}/${kind}`);
      }
    }
  }
  if (pairs.size > MAX_CHECKED_KINDS) {
    return { state: 'not-checked', reason: 'TooManyKinds', message: `the rule matches ${pairs.size} kinds, more than the ${MAX_CHECKED_KINDS} checked: field references are not checked` };
  }
  const types: Typed[] = [];
  const unknown: string[] = [];
  for (const pair of pairs) {
    const slash = pair.indexOf('/');
    const group = pair.slice(0, slash);
    const kind = pair.slice(slash + 1);
    const found = schemas.schemasOf(group, kind);
    if (found === undefined || found.length === 0) unknown.push(group === '' ? kind : `${kind}.${group}`);
    else for (const s of found) types.push({ label: kindLabel(s), type: s.root, components: s.components });
  }
  if (unknown.length > 0) {
    return { state: 'not-checked', reason: 'SchemaUnknown', message: `no schema is known for ${unknown.join(', ')} (not served yet?): field references were not checked` };
  }
  if (types.length > MAX_TYPES) {
    return { state: 'not-checked', reason: 'TooManyKinds', message: `the rule matches ${types.length} kind versions, more than the ${MAX_TYPES} checked: field references are not checked` };
  }
  return { path: '', types };
}

export function problemText(field: string, p: FieldProblem): string {
  return `${field}: ${p.path}: no such field in ${p.kinds.join(' or ')}`;
}

function parse(expression: string): ParseResult | undefined {
  try {
    return env.parse(rewriteNamespacedCalls(expression));
  } catch {
    // Not this check's business: the compiler reports it.
    return undefined;
  }
}

/** One CEL expression to check, in evaluation order; `variable`: the name its value is bound to. */
export interface CheckedExpression {
  /** The field that holds it, e.g. `spec.validate.cel.expressions[0].expression`. */
  field: string;
  expression: string | undefined;
  variable?: string;
}

/** The field problems of expressions (composition variables first, as they are declared), against `root`. */
export function celFieldProblems(expressions: readonly CheckedExpression[], root: Followed): { field: string; problem: FieldProblem }[] {
  const out: { field: string; problem: FieldProblem }[] = [];
  const scope = new Map<string, Followed | undefined>([['object', root], ['oldObject', root]]);
  const variables = new Map<string, Followed | undefined>();
  for (const e of expressions) {
    const parsed = e.expression === undefined ? undefined : parse(e.expression);
    if (parsed === undefined) continue;
    const r = checkFields(parsed.ast, scope, variables);
    for (const problem of r.problems) out.push({ field: e.field, problem });
    if (e.variable !== undefined) variables.set(e.variable, r.value);
  }
  return out;
}

function ruleExpressions(cel: NonNullable<RuleSpec['validate']['cel']>): CheckedExpression[] {
  const at = 'spec.validate.cel';
  return [
    ...(cel.matchConditions ?? []).map((m, i) => ({ field: `${at}.matchConditions[${i}].expression`, expression: m.expression })),
    ...(cel.variables ?? []).map((v, i) => ({ field: `${at}.variables[${i}].expression`, expression: v.expression, variable: v.name })),
    ...cel.expressions.flatMap((e, i) => [
      { field: `${at}.expressions[${i}].expression`, expression: e.expression },
      { field: `${at}.expressions[${i}].messageExpression`, expression: e.messageExpression },
    ]),
  ];
}

/** The type check of a (structurally valid) rule's spec. */
export function typeCheckRule(spec: RuleSpec, schemas: KindSchemaSource): TypeCheck {
  const root = rootOf(spec, schemas);
  if ('state' in root) return root;
  const problems: string[] = [];
  if (spec.validate.schema !== undefined) {
    for (const p of requiredProblems(spec.validate.schema, root)) problems.push(problemText('spec.validate.schema', { ...p, path: `required ${p.path}` }));
  }
  if (spec.validate.cel !== undefined) problems.push(...celFieldProblems(ruleExpressions(spec.validate.cel), root).map((p) => problemText(p.field, p.problem)));
  return { state: 'checked', problems, kinds: [...new Set(root.types.map((t) => t.label))] };
}

/** True when the rule's problems refuse it at apply (Deny and Warn; Audit rules only warn). */
export function refusesAtApply(spec: RuleSpec): boolean {
  return (spec.enforcement ?? 'Deny') !== 'Audit';
}

/** The rule's `TypeChecked` condition. */
export function typeCheckCondition(check: TypeCheck): { status: 'True' | 'False' | 'Unknown'; reason: TypeCheckReason; message: string } {
  if (check.state === 'not-checked') return { status: 'Unknown', reason: check.reason, message: check.message };
  if (check.problems.length > 0) return { status: 'False', reason: 'FieldNotFound', message: check.problems.join('; ') };
  return { status: 'True', reason: 'Checked', message: `field references checked against ${check.kinds.join(', ')}` };
}
