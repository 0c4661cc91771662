/**
 * The common answer to a review (a plain allow) as it travels back from an
 * evaluation worker: nine strings in an array instead of the nested
 * AnsweredReview (adr/0013, "Reviews read in the worker").
 *
 * Why: the answer is structured cloned, and the main thread deserialises
 * it. Measured with a MessageChannel on the bench machine, the nested
 * outcome (five objects, fifteen properties) cost 1.2–2.4 µs per review to
 * serialise and read back, the array 0.5 µs; the deserialised objects were
 * also about 40% of what the main thread allocated per review (a heap
 * profile of the pool under load), which its garbage collector then pays
 * for. Every other answer (a denial, a warning, an exception applied, an
 * error) travels whole: they are rarer, and carry what the logs need.
 */
import type { AnsweredReview } from '../policy/review/answer.ts';
import type { ReviewVersion } from '../policy/review/codec.ts';
import type { Operation } from '../policy/types.ts';

/** [payload, apiVersion, uid, operation, group, version, kind, namespace, name] of a plain allow. */
export type PackedReview = [string, ReviewVersion, string, Operation, string, string, string, string, string];

/** The answer to send back: packed when it is a plain allow, else as it is. */
export function packReview(a: AnsweredReview): PackedReview | AnsweredReview {
  const o = a.outcome;
  const r = o.request;
  if (
    r === undefined ||
    o.decision !== 'allow' ||
    o.httpStatus !== 200 ||
    o.exempted !== undefined ||
    o.cause !== undefined ||
    a.encodeError !== undefined ||
    a.ruleErrors !== undefined ||
    o.response.status !== undefined ||
    o.response.warnings !== undefined ||
    o.response.auditAnnotations !== undefined ||
    o.response.allowed !== true ||
    o.response.uid !== r.uid
  ) {
    return a;
  }
  return [a.payload, o.apiVersion, r.uid, r.operation, r.kind.group, r.kind.version, r.kind.kind, r.namespace, r.name];
}

/** The AnsweredReview a worker sent, packed or not. */
export function unpackReview(p: PackedReview | AnsweredReview): AnsweredReview {
  if (!Array.isArray(p)) return p;
  const [payload, apiVersion, uid, operation, group, version, kind, namespace, name] = p;
  return {
    outcome: {
      httpStatus: 200,
      apiVersion,
      decision: 'allow',
      request: { uid, operation, kind: { group, version, kind }, namespace, name },
      response: { uid, allowed: true },
    },
    payload,
  };
}
