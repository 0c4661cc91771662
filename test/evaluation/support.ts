// Reviews for the evaluation pool's tests: the pool answers admission only as
// the server hands it requests (`review(body)`, the AdmissionReview's text),
// so the tests build that text from an evaluation input and read the answer
// back as the decision `decideAdmission` gives for the same input.
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import type { EvaluationPool } from '../../src/evaluation/pool.ts';
import type { AdmissionDecision, EvaluationInput, KubeObject, PortalRuleObject } from '../../src/policy/index.ts';
import { pod } from '../policy/support.ts';

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
 * pool's tests: the shipped require-run-as-nonroot schema is superlinear in
 * the number of containers (issue 16: 50k containers 6.7 s; with
 * {@link hugePod}'s 40k from ~8 s on a quiet machine to over a minute on a
 * loaded one, so those tests use 1 s deadlines), and no cooperative check
 * runs inside one schema. (uniqueItems, the other case of the issue, is now
 * refused at compile without maxItems.)
 */
const NONROOT = parse(readFileSync(new URL('../../policies/pod-security/require-run-as-nonroot.yaml', import.meta.url), 'utf8')) as PortalRuleObject;
export function slowRule(name: string, enforcement: 'Deny' | 'Warn'): PortalRuleObject {
  return { ...NONROOT, metadata: { name, generation: 1 }, spec: { ...NONROOT.spec, enforcement } };
}

/** A Pod of 40k containers, on which {@link slowRule} runs for seconds. */
export function hugePod(privileged: boolean): KubeObject {
  const p = pod({ privileged });
  const spec = p.spec as { containers: Record<string, unknown>[] };
  for (let i = 0; i < 40_000; i++) spec.containers.push({ name: `c${i}`, image: 'busybox', securityContext: { runAsNonRoot: false } });
  return p;
}
