/**
 * What the pool does with an evaluation it abandoned (pool.ts): the warning
 * that names it, and, when its thread died of its memory, the (rule, object)
 * pair it remembers (poison-pairs.ts, adr/0018).
 */
import type { Logger } from 'pino';
import { LogKey } from '../observability/log-keys.ts';
import type { EvaluationInput } from '../policy/index.ts';
import { readReview } from '../policy/review/answer.ts';
import type { Attempt } from './batch-items.ts';
import { describeObject, objectIdentity, type PoisonPairs } from './poison-pairs.ts';
import type { ThreadMemory } from './thread-memory.ts';

type Identifiers = Pick<EvaluationInput, 'kind' | 'namespace' | 'name'>;
type Body = { kind: 'review'; body: string } | { kind: 'audit'; input: EvaluationInput } | { kind: 'vap' } | { kind: 'rule' };

/** One warning per abandoned evaluation, naming the object and the rule that was running. */
export function logAbandoned(log: Logger, what: Identifiers, a: Extract<Attempt, { ok: false }>, timeoutMs: number, memory: ThreadMemory | undefined): void {
  log.warn(
    {
      [LogKey.kind]: what.kind.kind,
      [LogKey.namespace]: what.namespace,
      [LogKey.name]: what.name,
      [LogKey.rule]: a.running,
      [LogKey.deadlineMs]: timeoutMs,
    },
    a.outOfMemory
      ? `evaluation exhausted its thread's memory (${memory?.maxOldGenerationSizeMb ?? '?'} MiB heap): thread replaced, the pair remembered`
      : a.running !== undefined
        ? 'evaluation deadline passed while a rule ran: abandoned, worker replaced'
        : 'no evaluation worker started the evaluation in time',
  );
}

/**
 * Remembers (rule, the body's object) as a pair that exhausted a thread's
 * memory; false when it cannot be keyed (a VAP, a rule no longer in force,
 * an unreadable review) or is no evaluation (a rule's apply-time check).
 */
export function rememberPoison(poison: PoisonPairs, version: string | undefined, body: Body, rule: string, limitMiB: number): boolean {
  if (version === undefined || body.kind === 'vap' || body.kind === 'rule') return false;
  let input: Parameters<typeof objectIdentity>[0] & Parameters<typeof describeObject>[0];
  if (body.kind === 'audit') input = body.input;
  else {
    const read = readReview(body.body);
    if (!read.ok) return false;
    input = read.request;
  }
  poison.add({ rule, ruleVersion: version, object: objectIdentity(input), describe: describeObject(input), limitMiB, at: new Date().toISOString() });
  return true;
}

/** A review's identifiers for the log of an abandoned evaluation (rare: read again here). */
export function reviewWhat(body: string): Identifiers {
  const read = readReview(body);
  if (read.ok) return read.request;
  return { kind: { group: '', version: '', kind: '(unreadable review)' }, namespace: '', name: '' };
}
