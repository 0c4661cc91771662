/**
 * The (rule, object) pairs whose evaluation exhausted an evaluation
 * thread's memory (adr/0018). Such a pair gives `error` at once afterwards,
 * without running the rule again: in admission and in the audit, on every
 * thread (the workers mirror this store like the rules, adr/0013), and —
 * through the state file (poison-file.ts) — after the replica restarts.
 *
 * Keys:
 * - the rule: its RuleSet key and the version in force (generation and a
 *   hash of its spec, RuleSet.version): an edited rule is tried again;
 * - the object: `uid@resourceVersion` for a stored object (the audit), a
 *   hash of its content for an admission request (a create has neither a
 *   uid nor a resourceVersion, and an update carries the old
 *   resourceVersion with new content). A changed object is tried again.
 *
 * Bounded: at most MAX_PAIRS, the oldest dropped first; a pair of a rule
 * version no longer in force is never met again and ages out.
 */
import { createHash } from 'node:crypto';
import { ChangeFeed, type EvaluationInput, type KubeObject, type Replicated } from '../policy/index.ts';

export interface PoisonPair {
  /** RuleSet key of the rule (`PortalRule/ns/name`). */
  rule: string;
  /** RuleSet.version of the rule when it ran out of memory. */
  ruleVersion: string;
  /** The object's identity (objectIdentity). */
  object: string;
  /** The object as people name it: `Pod tenant-a/big`. */
  describe: string;
  /** The thread's heap limit it exceeded, MiB. */
  limitMiB: number;
  /** When (ISO 8601). */
  at: string;
}

export type PoisonChange = { op: 'add'; pair: PoisonPair };

/** Pairs kept at most: each is a few hundred bytes; a tenant that finds more poison than this only re-finds old ones, one thread each. */
export const MAX_PAIRS = 1000;

export class PoisonPairs implements Replicated<PoisonChange> {
  /** By rule key, then `ruleVersion object`; insertion order is age. */
  readonly #byRule = new Map<string, Map<string, PoisonPair>>();
  /** Every pair, oldest first (for the bound). */
  readonly #all = new Map<string, PoisonPair>();
  readonly #feed = new ChangeFeed<PoisonChange>();

  get size(): number {
    return this.#all.size;
  }

  /** Records a pair (again: moves it to the newest); returns false if it was already known. */
  add(pair: PoisonPair): boolean {
    const id = pairId(pair);
    const known = this.#all.has(id);
    this.#all.delete(id);
    this.#all.set(id, pair);
    let rule = this.#byRule.get(pair.rule);
    if (!rule) this.#byRule.set(pair.rule, (rule = new Map()));
    rule.set(`${pair.ruleVersion} ${pair.object}`, pair);
    while (this.#all.size > MAX_PAIRS) this.#drop(this.#all.keys().next().value as string);
    if (!known) this.#feed.emit({ op: 'add', pair });
    return !known;
  }

  /** Whether `rule` has any pair (cheap: the evaluator asks before each rule). */
  hasRule(rule: string): boolean {
    return this.#byRule.has(rule);
  }

  find(rule: string, ruleVersion: string, object: string): PoisonPair | undefined {
    return this.#byRule.get(rule)?.get(`${ruleVersion} ${object}`);
  }

  /** The newest pair of a rule version, for its status. */
  latest(rule: string, ruleVersion: string): PoisonPair | undefined {
    let found: PoisonPair | undefined;
    for (const p of this.#byRule.get(rule)?.values() ?? []) if (p.ruleVersion === ruleVersion) found = p;
    return found;
  }

  pairs(): PoisonPair[] {
    return [...this.#all.values()];
  }

  onChange(listener: (change: PoisonChange) => void): () => void {
    return this.#feed.subscribe(listener);
  }

  snapshot(): PoisonChange[] {
    return this.pairs().map((pair) => ({ op: 'add', pair }));
  }

  apply(change: PoisonChange): void {
    if (change.op === 'add') this.add(change.pair);
  }

  #drop(id: string): void {
    const p = this.#all.get(id);
    this.#all.delete(id);
    if (!p) return;
    const rule = this.#byRule.get(p.rule);
    rule?.delete(`${p.ruleVersion} ${p.object}`);
    if (rule?.size === 0) this.#byRule.delete(p.rule);
  }
}

function pairId(p: Pick<PoisonPair, 'rule' | 'ruleVersion' | 'object'>): string {
  return `${p.rule} ${p.ruleVersion} ${p.object}`;
}

/** The object a rule validates in this input: the old one for a DELETE. */
function targetOf(input: Pick<EvaluationInput, 'operation' | 'object' | 'oldObject'>): KubeObject | null {
  return input.operation === 'DELETE' ? input.oldObject : (input.object ?? input.oldObject);
}

/**
 * The object's identity in a pair: `uid@resourceVersion` of a stored object
 * (the audit), else `sha256:` of its JSON (admission). Computed only for a
 * rule that has pairs.
 */
export function objectIdentity(input: Pick<EvaluationInput, 'operation' | 'object' | 'oldObject'>): string {
  const target = targetOf(input);
  const meta = target?.metadata;
  if (input.operation === 'AUDIT' && meta?.uid && meta.resourceVersion) return `${meta.uid}@${meta.resourceVersion}`;
  return `sha256:${createHash('sha256').update(JSON.stringify(target ?? null)).digest('hex')}`;
}

/** `Pod tenant-a/big` (with its resourceVersion when stored). */
export function describeObject(input: Pick<EvaluationInput, 'kind' | 'namespace' | 'name' | 'operation' | 'object' | 'oldObject'>): string {
  const rv = input.operation === 'AUDIT' ? targetOf(input)?.metadata?.resourceVersion : undefined;
  const at = `${input.kind.kind} ${input.namespace ? `${input.namespace}/` : ''}${input.name || '(unnamed)'}`;
  return rv ? `${at} (resourceVersion ${rv})` : input.operation === 'AUDIT' ? at : `${at} (${input.operation})`;
}

/** The `error` message of a rule on a pair it ran out of memory on. */
export function outOfMemoryMessage(p: Pick<PoisonPair, 'describe' | 'limitMiB'>): string {
  return `evaluating it on ${p.describe} exhausted the evaluation thread's memory (${p.limitMiB} MiB heap); this rule now gives error for this object without running`;
}

/**
 * The check the evaluator makes before each rule (EvaluationBudget.poisoned):
 * the message when (rule, object) is a known pair, else undefined. The
 * object's identity is computed once per input, and only for a rule with pairs.
 */
export function poisonCheck(pairs: PoisonPairs, version: (rule: string) => string | undefined): (rule: string, input: EvaluationInput) => string | undefined {
  let lastInput: EvaluationInput | undefined;
  let lastId = '';
  return (rule, input) => {
    if (pairs.size === 0 || !pairs.hasRule(rule)) return undefined;
    const v = version(rule);
    if (v === undefined) return undefined;
    if (input !== lastInput) {
      lastInput = input;
      lastId = objectIdentity(input);
    }
    const p = pairs.find(rule, v, lastId);
    return p ? outOfMemoryMessage(p) : undefined;
  };
}

/** A rule's MemoryExhausted condition message for the version in force, or undefined when it has no pair. */
export function memoryExhaustedMessage(pairs: PoisonPairs, rule: string, ruleVersion: string | undefined): string | undefined {
  const p = ruleVersion === undefined ? undefined : pairs.latest(rule, ruleVersion);
  return p
    ? `evaluating this rule on ${p.describe} exhausted an evaluation thread's memory (${p.limitMiB} MiB heap) at ${p.at}; it gives error for that object without running until the rule or the object changes`
    : undefined;
}
