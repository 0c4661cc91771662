// Reviews for the evaluation pool's tests: the pool answers admission only as
// the server hands it requests (`review(body)`, the AdmissionReview's text),
// so the tests build that text from an evaluation input and read the answer
// back as the decision `decideAdmission` gives for the same input.
import type { EvaluationPool } from '../../src/evaluation/pool.ts';
import type { AdmissionDecision, EvaluationInput } from '../../src/policy/index.ts';

let uids = 0;

/** The AdmissionReview (v1) an API server sends for `input`. */
export function reviewOf(input: EvaluationInput, uid = `uid-${++uids}`): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: input.kind,
      subResource: input.subResource,
      namespace: input.namespace,
      name: input.name,
      operation: input.operation,
      userInfo: { username: 'alice' },
      object: input.object,
      oldObject: input.oldObject,
    },
  });
}

/**
 * The pool's answer to the review of `input`, as the decision it carries
 * (allowed, code, message, warnings, the exceptions applied). Rejects as
 * `review()` does (queue full, closed); an internal error (500) is an
 * assertion failure here.
 */
export async function decideByReview(pool: EvaluationPool, input: EvaluationInput): Promise<AdmissionDecision> {
  const { outcome } = await pool.review(reviewOf(input));
  if (outcome.decision === 'error' || outcome.decision === 'invalid') throw new Error(`the pool answered ${outcome.decision}: ${outcome.response.status?.message}`);
  const r = outcome.response;
  const exempted = outcome.exempted !== undefined ? { exempted: outcome.exempted } : {};
  const warnings = r.warnings ?? [];
  if (r.allowed) return { allowed: true, warnings, ...exempted };
  return { allowed: false, code: (r.status?.code ?? 500) as 403 | 500, message: r.status?.message ?? '', warnings, ...exempted };
}
