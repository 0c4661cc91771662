/**
 * The seam between the admission server and the policy engine: the whole
 * review, as text, to its answer, given by the evaluation pool. The server
 * treats a rejection as Portal's own error and denies with code 500 (429 for
 * overload).
 */
import type { AnsweredReview } from '../policy/review/answer.ts';

/**
 * The whole review answered elsewhere (the evaluation pool, adr/0013): the
 * body goes as text, the answer comes back as text with what the
 * bookkeeping needs, so the main thread does not parse the review at all.
 * Called only while the replica is ready; a rejection is Portal's own
 * error (a denial with code 500, e.g. the pool's queue is full).
 */
/** `peer`: the remote address the review came from (its flow is scoped to it: evaluation/flows.ts). */
export type AnswerReview = (body: string, peer?: string) => Promise<AnsweredReview>;
