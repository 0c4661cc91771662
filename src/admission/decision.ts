/**
 * The seam between the admission server and the policy engine: a function
 * from an evaluation input to an allow/deny decision. The server treats a
 * throw (or rejection) as an internal error and denies with code 500.
 */
import type { EvaluationInput } from '../policy/types.ts';
import type { AnsweredReview, Decision } from '../policy/review/answer.ts';

export {
  EXCEPTION_AUDIT_ANNOTATION,
  nameOnlyNamespaceLabels,
  type Decision,
  type Exemption,
  type NamespaceLabels,
} from '../policy/review/answer.ts';

export type Decide = (input: EvaluationInput) => Decision | Promise<Decision>;

/**
 * The whole review answered elsewhere (the evaluation pool, adr/0013): the
 * body goes as text, the answer comes back as text with what the
 * bookkeeping needs, so the main thread does not parse the review at all.
 * Called only while the replica is ready; a rejection is Portal's own
 * error (a denial with code 500, e.g. the pool's queue is full).
 */
export type AnswerReview = (body: string) => Promise<AnsweredReview>;
