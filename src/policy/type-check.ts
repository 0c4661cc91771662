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

function describe(field: string, p: FieldProblem): string {
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

function celProblems(cel: NonNullable<RuleSpec['validate']['cel']>, root: Followed): string[] {
  const problems: string[] = [];
  const scope = new Map<string, Followed | undefined>([['object', root], ['oldObject', root]]);
  const variables = new Map<string, Followed | undefined>();
  const check = (field: string, expression: string | undefined): Followed | undefined => {
    if (expression === undefined) return undefined;
    const parsed = parse(expression);
    if (parsed === undefined) return undefined;
    const r = checkFields(parsed.ast, scope, variables);
    for (const p of r.problems) problems.push(describe(`spec.validate.cel.${field}`, p));
    return r.value;
  };
  (cel.matchConditions ?? []).forEach((m, i) => check(`matchConditions[${i}].expression`, m.expression));
  (cel.variables ?? []).forEach((v, i) => variables.set(v.name, check(`variables[${i}].expression`, v.expression)));
  cel.expressions.forEach((e, i) => {
    check(`expressions[${i}].expression`, e.expression);
    check(`expressions[${i}].messageExpression`, e.messageExpression);
  });
  return problems;
}

/** The type check of a (structurally valid) rule's spec. */
export function typeCheckRule(spec: RuleSpec, schemas: KindSchemaSource): TypeCheck {
  const root = rootOf(spec, schemas);
  if ('state' in root) return root;
  const problems: string[] = [];
  if (spec.validate.schema !== undefined) {
    for (const p of requiredProblems(spec.validate.schema, root)) problems.push(describe('spec.validate.schema', { ...p, path: `required ${p.path}` }));
  }
  if (spec.validate.cel !== undefined) problems.push(...celProblems(spec.validate.cel, root));
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
