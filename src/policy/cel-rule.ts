/**
 * `validate.cel` in a PortalRule / PortalClusterRule (DESIGN.md §8): compiled
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
  compileComposition,
  evaluateComposition,
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

/** `spec.validate.cel.expressions[0].expression (line 1, column 5): message` */
export function formatCelCompileError(e: FieldCompileError): string {
  const field = e.field.replace(/^validations/, 'expressions');
  return `spec.validate.cel.${field} (line ${e.position.line}, column ${e.position.column}): ${e.message}`;
}

export function compileCelRule(cel: CelValidation): { ok: true; rule: CelRule } | { ok: false; errors: string[] } {
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
export function isCostOverrun(message: string): boolean {
  return /validate\.cel\.[a-zA-Z]+\[\d+\] failed: evaluation exceeded|matchCondition "[^"]*" failed: evaluation exceeded/.test(message);
}

export type CelRuleResult =
  | { kind: 'skip'; why: string }
  | { kind: 'error'; why: string }
  | { kind: 'checked'; violations: SchemaViolation[] };

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

/**
 * The activation of one input (and template path), built once and shared by
 * every CEL rule evaluated on that input: the engine converts each object to
 * CEL values once per identity, so handing every rule the same objects is what
 * keeps that conversion to once per request.
 */
const activations = new WeakMap<EvaluationInput, Map<string, Activation>>();

export function activationFor(input: EvaluationInput, template: { path: readonly string[]; prefix: string } | undefined): Activation {
  let byTemplate = activations.get(input);
  if (!byTemplate) {
    byTemplate = new Map();
    activations.set(input, byTemplate);
  }
  const key = template?.prefix ?? '';
  let a = byTemplate.get(key);
  if (!a) {
    const asTemplate = (o: KubeObject | null): KubeObject | null => (o && template ? templatePod(o, template.path) : o);
    a = {
      object: input.operation === 'DELETE' ? null : asTemplate(input.object),
      oldObject: asTemplate(input.oldObject),
      request: requestFor(input),
      params: null,
      namespaceObject: namespaceObject(input),
    };
    byTemplate.set(key, a);
  }
  return a;
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
  const out = evaluateComposition(rule.composition, activationFor(input, template), budget);
  if (out.matched === false) return { kind: 'skip', why: `matchCondition "${out.condition}" is false` };
  if (out.matched === 'error') return { kind: 'error', why: `matchCondition "${out.condition}" failed: ${out.message}` };
  const violations: SchemaViolation[] = [];
  for (const v of out.validations) {
    if (v.result === 'error') return { kind: 'error', why: `validate.cel.expressions[${v.index}] failed: ${v.message}` };
    if (v.result === 'fail') violations.push({ path: template?.prefix ?? '', message: v.message });
  }
  return { kind: 'checked', violations };
}
