// Reviews for the evaluation pool's tests: the pool answers admission only as
// the server hands it requests (`review(body)`, the AdmissionReview's text),
// so the tests build that text from an evaluation input and read the answer
// back as the decision `decideAdmission` gives for the same input.
import type { EvaluationPool } from '../../src/evaluation/pool.ts';
import type { AdmissionDecision, EvaluationInput, KubeObject, PortalRuleObject } from '../../src/policy/index.ts';
import { pod } from '../policy/support.ts';
import { addSlowLists, SLOW_SCHEMA } from '../support/slow-schema.ts';

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
  const deniedBy = outcome.deniedBy !== undefined ? { deniedBy: outcome.deniedBy } : {};
  return { allowed: false, code: (r.status?.code ?? 500) as 403 | 500, message: r.status?.message ?? '', warnings, ...deniedBy, ...exempted };
}

/**
 * A rule whose single evaluation takes far longer than any deadline of the
 * pool's tests, with no point inside one schema where a cooperative deadline
 * could be checked. Since issue 31 a schema's work is bounded at apply
 * (keywords × the values they apply to) and evaluation stops at the first
 * error, so the slow case is the heaviest work the bounds still admit (as in
 * test/hostile/eval-deadline.test.ts): `uniqueItems` beside `maxItems: 256`
 * compares every pair of items, each comparison walking the items, ten times
 * over through `$ref`s, on {@link hugePod}'s 4 MB of lists (seconds on a
 * quiet machine; the tests use 1 s deadlines).
 */
export function slowRule(name: string, enforcement: 'Deny' | 'Warn'): PortalRuleObject {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalClusterRule',
    metadata: { name, generation: 1 },
    spec: { enforcement, match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, validate: { message: 'Lists must hold distinct items.', schema: SLOW_SCHEMA } },
  } as unknown as PortalRuleObject;
}

/**
 * A Pod carrying eight lists of 256 items, each item a list whose first
 * element tells it apart (the deep comparison walks from the end, so every
 * pair costs the whole item): {@link slowRule} runs for seconds on it.
 */
export function hugePod(privileged: boolean): KubeObject {
  const p = pod({ privileged });
  addSlowLists(p.spec as Record<string, unknown>);
  return p;
}
