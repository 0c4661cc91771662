/**
 * `validate.cel` in a PortalRule / PortalClusterRule (docs/design.md §8): compiled
 * once per rule generation with the CEL engine, evaluated per request against
 * the activation Kubernetes gives a ValidatingAdmissionPolicy.
 *
 * - `object` / `oldObject` are the request's (null on CREATE / DELETE), or,
 *   under pod-template autogen, the Pod that stands in for the template
 *   (`metadata` and `spec` of the template); violations then carry the
 *   template's path.
 * - `request` is the AdmissionRequest when the caller has it, else one built
 *   from the evaluation input (the audit: operation "AUDIT").
 * - `namespaceObject` carries the namespace's name and labels when known.
 * - `params` is null (Portal rules take no params).
 */
import {
  celContext,
  checkComposition,
  compileComposition,
  failureMessage,
  type Activation,
  type Budget,
  type Composition,
  type FieldCompileError,
} from './cel/index.ts';
import { templatePod } from './pod-templates.ts';
import type { CelValidation, EvaluationInput, KubeObject, SchemaViolation } from './types.ts';

export interface CelRule {
  readonly composition: Composition;
}

/**
 * `spec.validate.cel.expressions[0].expression: compilation failed: line 1, column 5: message`,
 * in the words kube-apiserver uses for a ValidatingAdmissionPolicy
 * ("compilation failed: ..."), with the position people can act on.
 */
export function formatCelCompileError(e: FieldCompileError): string {
  const field = e.field.replace(/^validations/, 'expressions');
  return `spec.validate.cel.${field}: compilation failed: line ${e.position.line}, column ${e.position.column}: ${e.message}`;
}

/**
 * 64 Ki characters of CEL per rule (every expression, messageExpression,
 * matchCondition and variable together), like MAX_SCHEMA_BYTES for a schema.
 * The CRD alone allows 192 expressions of 10 KiB: 2.5 MB, which took ~7 s of
 * one thread to compile here (2 cores at load ~30), also when anyone who can
 * reach the webhook port posts such a rule to /validate-portal-kinds. 64 Ki
 * took 0.9-2.1 s under the same load; real rules are a few hundred
 * characters.
 */
export const MAX_CEL_SOURCE_LENGTH = 64 * 1024;

/** The total CEL source of a rule, over MAX_CEL_SOURCE_LENGTH: the problem, checked before anything compiles. */
export function celSizeProblem(cel: CelValidation): string | undefined {
  let total = 0;
  for (const m of cel.matchConditions ?? []) total += m.expression.length;
  for (const v of cel.variables ?? []) total += v.expression.length;
  for (const e of cel.expressions) total += e.expression.length + (e.messageExpression?.length ?? 0);
  return total > MAX_CEL_SOURCE_LENGTH ? `spec.validate.cel: ${total} characters of expressions, more than the ${MAX_CEL_SOURCE_LENGTH} allowed per rule; split the rule` : undefined;
}

export function compileCelRule(cel: CelValidation): { ok: true; rule: CelRule } | { ok: false; errors: string[] } {
  const tooLarge = celSizeProblem(cel);
  if (tooLarge !== undefined) return { ok: false, errors: [tooLarge] };
  const c = compileComposition({
    ...(cel.matchConditions ? { matchConditions: cel.matchConditions } : {}),
    ...(cel.variables ? { variables: cel.variables } : {}),
    validations: cel.expressions,
  });
  if (!c.ok) return { ok: false, errors: c.errors.map(formatCelCompileError) };
  return { ok: true, rule: Object.freeze({ composition: c }) };
}

/**
 * True for the message of an `error` verdict caused by a CEL cost limit: a
 * defect of the rule (an unbounded loop), not of the object, which `portal
 * test` reports as bad input.
 */
/** One compiled expression of a rule, as /debug/vars shows it. */
export interface CelExpressionCost {
  /** The rule's field, e.g. `spec.validate.cel.expressions[0].expression`. */
  field: string;
  /** Estimated worst-case cost (src/policy/cel/estimate.ts), against the 1,000,000 per-expression limit. */
  estimatedCost: number;
  /** Present when the expression runs on cel-js's evaluation instead of generated JavaScript: why. */
  fallback?: string;
}

/** The estimated costs of a compiled rule's expressions. */
export function celExpressionCosts(rule: CelRule): CelExpressionCost[] {
  const c = rule.composition;
  const one = (field: string, p: { estimatedCost: number; fallback: string | undefined }): CelExpressionCost => ({
    field: `spec.validate.cel.${field}`,
    estimatedCost: p.estimatedCost,
    ...(p.fallback !== undefined ? { fallback: p.fallback } : {}),
  });
  return [
    ...c.matchConditions.map((m, i) => one(`matchConditions[${i}].expression`, m.program)),
    ...c.variables.map((v, i) => one(`variables[${i}].expression`, v.program)),
    ...c.validations.flatMap((v, i) => [
      one(`expressions[${i}].expression`, v.program),
      ...(v.messageProgram !== undefined ? [one(`expressions[${i}].messageExpression`, v.messageProgram)] : []),
    ]),
  ];
}

export function isCostOverrun(message: string): boolean {
  return /validate\.cel\.[a-zA-Z]+\[\d+\] failed: evaluation exceeded|matchCondition "[^"]*" failed: evaluation exceeded/.test(message);
}

export type CelRuleResult =
  | { kind: 'skip'; why: string }
  /** `field`: the rule's field that failed; `cost`: a cost limit, not a runtime error. */
  | { kind: 'error'; why: string; field: string; cost: boolean }
  | { kind: 'checked'; violations: SchemaViolation[] };

/** The result of a rule whose validations all passed (shared: callers never change it). */
const NO_VIOLATIONS: CelRuleResult = Object.freeze({ kind: 'checked' as const, violations: Object.freeze([]) as unknown as SchemaViolation[] });

function requestFor(input: EvaluationInput): Readonly<Record<string, unknown>> {
  if (input.request) {
    // `object` and `oldObject` are variables of their own, as in the API server.
    const { object: _o, oldObject: _p, ...rest } = input.request;
    return rest;
  }
  return {
    kind: input.kind,
    operation: input.operation,
    name: input.name,
    namespace: input.namespace,
    subResource: input.subResource ?? '',
    dryRun: false,
  };
}

function namespaceObject(input: EvaluationInput): KubeObject | null {
  const ns = input.kind.group === '' && input.kind.kind === 'Namespace' ? input.name : input.namespace;
  if (ns === '' || input.namespaceLabels === undefined) return null;
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, labels: input.namespaceLabels } };
}

function asTemplate(o: KubeObject | null, template: { path: readonly string[] } | undefined): KubeObject | null {
  return o && template ? templatePod(o, template.path) : o;
}

/** The activation of one input (and template path): what its CEL expressions see. */
export function activationFor(input: EvaluationInput, template: { path: readonly string[]; prefix: string } | undefined): Activation {
  return {
    object: input.operation === 'DELETE' ? null : asTemplate(input.object, template),
    oldObject: asTemplate(input.oldObject, template),
    request: requestFor(input),
    params: null,
    namespaceObject: namespaceObject(input),
  };
}

/**
 * The CEL context of one input (and template path), built once per request
 * and shared by every CEL rule evaluated on it (kept in the request's
 * budget): rules then also share the values of their common variables.
 */
function contextOf(input: EvaluationInput, template: { path: readonly string[]; prefix: string } | undefined, budget: Budget): Record<string, unknown> {
  const key = template?.prefix ?? '';
  const last = budget.last;
  if (last !== undefined && last.key === input && last.template === key) return last.context;
  const context = lookupContext(input, template, key, budget);
  budget.last = { key: input, template: key, context };
  return context;
}

function lookupContext(input: EvaluationInput, template: { path: readonly string[]; prefix: string } | undefined, key: string, budget: Budget): Record<string, unknown> {
  const last = budget.last;
  // The request's first context (often its only one): no table yet.
  if (last === undefined) return celContext(activationFor(input, template));
  budget.contexts ??= new Map();
  byTemplateOf(budget.contexts, last.key).set(last.template, last.context);
  const byTemplate = byTemplateOf(budget.contexts, input);
  let context = byTemplate.get(key);
  if (context === undefined) byTemplate.set(key, (context = celContext(activationFor(input, template))));
  return context;
}

function byTemplateOf(contexts: Map<object, unknown>, input: object): Map<string, Record<string, unknown>> {
  let byTemplate = contexts.get(input) as Map<string, Record<string, unknown>> | undefined;
  if (byTemplate === undefined) contexts.set(input, (byTemplate = new Map()));
  return byTemplate;
}

/**
 * Evaluates a CEL rule on one input. `budget` is the request's CEL budget,
 * shared by every CEL rule evaluated for the same input.
 */
export function evaluateCelRule(
  rule: CelRule,
  input: EvaluationInput,
  template: { path: readonly string[]; prefix: string } | undefined,
  budget: Budget,
): CelRuleResult {
  let out: ReturnType<typeof checkComposition>;
  try {
    out = checkComposition(rule.composition, contextOf(input, template, budget), budget);
  } catch (e) {
    // Building the activation walks the objects (a hostile one can be
    // nested too deeply for that): the rule cannot be evaluated, an `error`.
    return { kind: 'error', why: `evaluation failed: ${failureMessage(e)}`, field: 'spec.validate.cel', cost: false };
  }
  if (out === undefined) return NO_VIOLATIONS;
  if (out.matched === false) return { kind: 'skip', why: `matchCondition "${out.condition}" is false` };
  if (out.matched === 'error') {
    const i = rule.composition.matchConditions.findIndex((m) => m.name === out.condition);
    return { kind: 'error', why: `matchCondition "${out.condition}" failed: ${out.message}`, field: `spec.validate.cel.matchConditions[${i}].expression`, cost: out.kind === 'cost' };
  }
  if (out.validations.length === 0) return NO_VIOLATIONS;
  const violations: SchemaViolation[] = [];
  for (const v of out.validations) {
    if (v.result === 'error') {
      return { kind: 'error', why: `validate.cel.expressions[${v.index}] failed: ${v.message}`, field: `spec.validate.cel.expressions[${v.index}].expression`, cost: v.kind === 'cost' };
    }
    if (v.result === 'fail') violations.push({ path: template?.prefix ?? '', message: v.message });
  }
  return { kind: 'checked', violations };
}
