/**
 * What the evaluations of the VAPs mean for the API client, worded as
 * kube-apiserver writes it:
 *
 * - Deny: the first denied decision becomes the error. Its message is
 *   `ValidatingAdmissionPolicy 'P' with binding 'B' denied request: MSG`
 *   (without a binding for a policy-level configuration error), its reason
 *   the validation's `reason` (default Invalid) and its code from the reason
 *   (Invalid 422, Forbidden 403, Unauthorized 401, RequestEntityTooLarge
 *   413); the API server wraps it as `<resource> "<name>" is forbidden: ...`
 *   and adds the message as the one cause.
 * - Warn: `Validation failed for ValidatingAdmissionPolicy 'P' with binding
 *   'B': MSG` per failure.
 * - Audit: the audit annotation
 *   `validation.policy.admission.k8s.io/validation_failure`, a JSON list of
 *   {message, policy, binding, expressionIndex, validationActions}.
 */
import type { BindingEvaluation } from './compiled.ts';
import type { ValidationReason } from './types.ts';

export const VALIDATION_FAILURE_ANNOTATION = 'validation.policy.admission.k8s.io/validation_failure';

export interface VapDenial {
  policy: string;
  binding: string | undefined;
  /** `ValidatingAdmissionPolicy 'P' with binding 'B' denied request: MSG`. */
  message: string;
  reason: ValidationReason;
  code: number;
}

export interface VapAdmissionOutcome {
  denial: VapDenial | undefined;
  warnings: string[];
  /** Audit annotations: the policies' own (`<policy>/<key>`) and the validation_failure list. */
  auditAnnotations: Record<string, string>;
}

/** kube's reasonToCode. */
export function reasonToCode(reason: ValidationReason): number {
  switch (reason) {
    case 'Forbidden':
      return 403;
    case 'Unauthorized':
      return 401;
    case 'RequestEntityTooLarge':
      return 413;
    case 'Invalid':
    default:
      return 422;
  }
}

export function denialMessage(policy: string, binding: string | undefined, message: string): string {
  return binding
    ? `ValidatingAdmissionPolicy '${policy}' with binding '${binding}' denied request: ${message}`
    : `ValidatingAdmissionPolicy '${policy}' denied request: ${message}`;
}

export function warningMessage(policy: string, binding: string, message: string): string {
  return `Validation failed for ValidatingAdmissionPolicy '${policy}' with binding '${binding}': ${message}`;
}

export function admissionOutcome(results: readonly BindingEvaluation[]): VapAdmissionOutcome {
  const denials: VapDenial[] = [];
  const warnings: string[] = [];
  const audit: { message: string; policy: string; binding: string; expressionIndex: number; validationActions: string[] }[] = [];
  const annotations: Record<string, string> = {};
  for (const r of results) {
    // Most results admit and annotate nothing (often a binding's shared pass result).
    if (r.denyErrors.length === 0 && r.failures.length === 0) {
      for (const key in r.auditAnnotations) annotations[key] = r.auditAnnotations[key] as string;
      continue;
    }
    const binding = r.binding === '' ? undefined : r.binding;
    for (const e of r.denyErrors) {
      denials.push({ policy: r.policy, binding, message: denialMessage(r.policy, binding, e), reason: 'Invalid', code: 422 });
    }
    for (const f of r.failures) {
      for (const action of r.actions) {
        if (action === 'Deny') {
          const reason = f.reason ?? 'Invalid';
          denials.push({ policy: r.policy, binding, message: denialMessage(r.policy, binding, f.message), reason, code: reasonToCode(reason) });
        } else if (action === 'Warn') {
          warnings.push(warningMessage(r.policy, r.binding, f.message));
        } else {
          audit.push({
            message: f.message,
            policy: r.policy,
            binding: r.binding,
            expressionIndex: f.expressionIndex ?? 0,
            validationActions: [...r.actions],
          });
        }
      }
    }
    Object.assign(annotations, r.auditAnnotations);
  }
  if (audit.length > 0) annotations[VALIDATION_FAILURE_ANNOTATION] = JSON.stringify(audit);
  return { denial: denials[0], warnings, auditAnnotations: annotations };
}

/**
 * The verdict of one evaluation for `portal test`, the audit and reports:
 * fail (a Deny binding denies), warn (only Warn / Audit), error (an
 * evaluation or configuration error, whatever failurePolicy did with it),
 * skip, pass.
 */
export function verdictOf(r: BindingEvaluation): { result: 'pass' | 'fail' | 'warn' | 'skip' | 'error'; message: string } {
  const binding = r.binding === '' ? undefined : r.binding;
  const on = r.param ? ` (params ${r.param})` : '';
  if (r.result === 'error') {
    const errors = [...r.denyErrors, ...r.failures.filter((f) => f.error).map((f) => f.message), ...r.ignoredErrors];
    const what = errors[0] ?? 'evaluation error';
    const handled = r.ignoredErrors.length > 0 && r.denyErrors.length === 0 && r.failures.every((f) => !f.error) ? ' (ignored: failurePolicy Ignore)' : '';
    return { result: 'error', message: `${denialMessage(r.policy, binding, what)}${on}${handled}` };
  }
  if (r.result === 'skip') return { result: 'skip', message: `ValidatingAdmissionPolicy '${r.policy}'${binding ? ` with binding '${binding}'` : ''}: skipped: ${r.skipReason ?? 'not matched'}${on}` };
  const first = r.failures[0];
  if (r.result === 'fail' && first) {
    if (r.actions.includes('Deny')) return { result: 'fail', message: `${denialMessage(r.policy, binding, first.message)}${on}` };
    return { result: 'warn', message: `${warningMessage(r.policy, r.binding, first.message)}${on}` };
  }
  return { result: 'pass', message: `ValidatingAdmissionPolicy '${r.policy}' with binding '${r.binding}': passed${on}` };
}
