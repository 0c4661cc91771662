/**
 * The common answer to a review (a plain allow) as it travels back from an
 * evaluation worker: one string, its nine fields joined by NUL, instead of
 * the nested AnsweredReview (adr/0013, "Reviews read in the worker").
 *
 * Why: the answer is structured cloned, and the main thread deserialises
 * it. Measured with a MessageChannel on the bench machine, the nested
 * outcome (five objects, fifteen properties) cost 1.2–2.4 µs per review to
 * serialise and read back, an array of nine strings 0.5 µs. Session 7: the
 * objects a piscina answer carries are what the main thread's young
 * collections promoted — about a tenth of everything it allocated, so its
 * young generation grew to 64 MB and each scavenge copied and promoted
 * 2.5–5 MB (`--trace-gc-nvp`; a bare Worker with the same messages promoted
 * nothing, one string per answer instead of eleven objects promoted 7×
 * less). So the answer is one string, split on this thread. Every other answer (a denial, a warning, an exception applied, an
 * error) travels whole: they are rarer, and carry what the logs need.
 */
import type { AnsweredReview } from '../policy/review/answer.ts';
import type { ReviewVersion } from '../policy/review/codec.ts';
import type { Operation } from '../policy/types.ts';

/**
 * payload, apiVersion, uid, operation, group, version, kind, namespace, name
 * of a plain allow, joined by NUL. The payload is JSON text, which never
 * holds a raw control character (JSON escapes them); a review whose other
 * fields hold NUL or \u0001 is not packed.
 */
export type PackedReview = string;

const SEP = '\u0000';
/**
 * Separates packed answers when a whole batch's answers are packed allows
 * and travel as one string (worker.ts, joinPacked): one deserialised object
 * per batch instead of one per review. No packed answer holds it.
 */
const RECORD = '\u0001';

/** A batch's results as one string when every one is a packed allow; undefined otherwise. */
export function joinPacked(results: readonly unknown[]): string | undefined {
  for (const r of results) if (typeof r !== 'string') return undefined;
  return results.join(RECORD);
}

/** The results joinPacked joined. */
export function splitPacked(joined: string): string[] {
  return joined.split(RECORD);
}

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
  const fields = [a.payload, o.apiVersion, r.uid, r.operation, r.kind.group, r.kind.version, r.kind.kind, r.namespace, r.name];
  // A uid or a name may hold a NUL or \u0001 (JSON allows them in strings): that answer travels whole.
  for (let i = 1; i < fields.length; i++) if ((fields[i] as string).includes(SEP) || (fields[i] as string).includes(RECORD)) return a;
  return fields.join(SEP);
}

/** The AnsweredReview a worker sent, packed or not. */
export function unpackReview(p: PackedReview | AnsweredReview): AnsweredReview {
  if (typeof p !== 'string') return p;
  const [payload = '', apiVersion, uid = '', operation, group = '', version = '', kind = '', namespace = '', name = ''] = p.split(SEP) as [string, ReviewVersion, string, Operation, ...string[]];
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
