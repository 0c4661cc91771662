/**
 * The apply-time check of PortalRules and PortalClusterRules
 * (`POST /validate-portal-kinds`, adr/0011) on a thread of its own, not on
 * the main thread (issue 31 item 5, adr/0020). A 62 KB rule's check
 * (validateRule: ajv compiles its schema, its CEL compiles, both are
 * type-checked) costs 0.2-0.9 s; on the main thread, a tenant applying such
 * rules back to back held the event loop that answers every namespace's
 * reviews.
 *
 * A small pool built from the evaluation pool's parts (an EvaluationPool
 * named `rule-check`, with the same worker module, holding no rules):
 * - fair: checks wait in the flow of Portal's kinds of the rule's namespace
 *   (flows.ts), per sender, taken by deficit round robin charged with their
 *   measured time (fair-queue.ts): a tenant applying 100 rules waits behind
 *   its own applies, and another namespace's rule waits for at most the
 *   check that is running;
 * - bounded: past its flow's share or the queue, or when it could not start
 *   in time, a check is refused as overload (QueueFull: the webhook answers
 *   429 naming the rule and saying to retry; not an internal error, not in
 *   the readiness window);
 * - within the webhook's timeout: the check's deadline is 40% of it and the
 *   whole answer (queue included) 90%, as admission's (pool-config.ts);
 * - a check that passes its deadline or exhausts its thread's memory
 *   (resourceLimits, thread-memory.ts) ends with its thread, which is
 *   replaced: the rule is refused with the reason (fail closed for that
 *   apply), the replica and the other checks go on.
 *
 * The main thread decodes the review (admission/portal-kinds.ts) and sends
 * its text, with the schemas of the custom kinds the rule matches
 * (policy/rule-check.ts), each serialised once per CRD change.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { RuleSet, ruleKey, type PortalRuleObject } from '../policy/index.ts';
import type { KindSchema, KindSchemaSource } from '../policy/kind-schemas/catalogue.ts';
import type { KindValidation, RuleCheck } from '../policy/portal-kinds.ts';
import { kindSchemaText, schemasToSend } from '../policy/rule-check.ts';
import type { Attempt } from './batch-items.ts';
import { flowOf, fromPeer } from './flows.ts';
import { EvaluationPool } from './pool.ts';
import { describeThreadMemory, type ThreadMemory } from './thread-memory.ts';

/** Threads that check rules: one. Checks are rare beside reviews; one thread leaves the other cores to admission. */
export const RULE_CHECK_THREADS = 1;

export interface RuleCheckConfig {
  /** The webhook's timeoutSeconds (`--webhook-timeout`), ms: a check is answered within 90% of it. */
  webhookTimeoutMs: number;
  /** Each thread's V8 limits (the evaluation threads'); undefined: V8's defaults (tests). */
  memory?: ThreadMemory | undefined;
  /** One check's deadline, ms. @default 40% of webhookTimeoutMs */
  timeoutMs?: number;
  /** Checks one flow may have waiting or running. @default the pool's (pool-config.ts) */
  flowQueue?: number;
}

export interface RuleCheckDeps {
  logger: Logger;
  registry?: Registry | undefined;
  /** Where the rules' matched kinds' schemas come from (a replica: the built-in catalogue, then the cluster's CRDs). */
  schemas: KindSchemaSource;
}

/** A check's deadline and the time for its whole answer, for a webhook timeout: admission's shares (pool-config.ts, admissionRequestMs). */
export function ruleCheckTimes(webhookTimeoutMs: number): { timeoutMs: number; requestMs: number } {
  return { timeoutMs: Math.round(webhookTimeoutMs * 0.4), requestMs: Math.round(webhookTimeoutMs * 0.9) };
}

export class RuleChecks {
  readonly #pool: EvaluationPool;
  readonly #schemas: KindSchemaSource;
  /** Each CRD schema's text, made once: the CRD store replaces a schema object when its CRD changes. */
  readonly #texts = new WeakMap<KindSchema, string>();
  readonly #timeoutMs: number;
  readonly #memory: ThreadMemory | undefined;

  constructor(config: RuleCheckConfig, deps: RuleCheckDeps) {
    const times = ruleCheckTimes(config.webhookTimeoutMs);
    this.#timeoutMs = config.timeoutMs ?? times.timeoutMs;
    this.#memory = config.memory;
    this.#schemas = deps.schemas;
    this.#pool = new EvaluationPool(
      {
        name: 'rule-check',
        workers: RULE_CHECK_THREADS,
        // No batch waits on the thread's port behind a check that may take a second: the next is chosen when it ends.
        pipeline: 1,
        timeoutMs: this.#timeoutMs,
        requestMs: times.requestMs,
        memory: config.memory,
        ...(config.flowQueue !== undefined ? { flowQueue: config.flowQueue } : {}),
      },
      // Its threads hold no rules: a check needs none, and a replaced thread starts at once.
      { rules: new RuleSet() },
      { logger: deps.logger, registry: deps.registry },
    );
  }

  /** The check the webhook for Portal's kinds runs for a rule (policy/portal-kinds.ts, portalKinds). */
  readonly check: RuleCheck = (obj, review) => {
    const key = ruleKey({ kind: review.kind, metadata: { name: review.name, namespace: review.namespace } } as PortalRuleObject);
    const schemas = schemasToSend(obj, this.#schemas).map((s) => this.#text(s));
    const what = () => ({ kind: { group: 'portal.dev', version: '', kind: review.kind }, namespace: review.namespace, name: review.name });
    return this.#pool.checkRule({ kind: 'rule', key, review: review.body, schemas }, fromPeer(flowOf(review.namespace, true), review.peer), what).then((a) => this.#answer(a));
  };

  #text(s: KindSchema): string {
    let text = this.#texts.get(s);
    if (text === undefined) {
      text = kindSchemaText(s);
      this.#texts.set(s, text);
    }
    return text;
  }

  /** The thread's answer, or the refusal of a check that was stopped (its thread died with it). */
  #answer(a: Attempt): KindValidation {
    if (a.ok) return a.value as KindValidation;
    const stopped = a.outOfMemory
      ? `checking this rule exhausted the memory of the thread that checks rules (${this.#memory ? describeThreadMemory(this.#memory) : "V8's default heap"})`
      : `checking this rule took longer than its deadline (${this.#timeoutMs} ms)`;
    return { ok: false, problems: [`spec.validate: ${stopped}; the check was stopped and the rule is refused: make its schema or CEL smaller${a.outOfMemory ? '' : ', or retry if the replica was busy'}`] };
  }

  /** Runnable: starts the thread, runs until `signal` aborts, then drains it. */
  start(signal: AbortSignal): Promise<void> {
    return this.#pool.start(signal);
  }

  /** Idempotent. */
  close(): Promise<void> {
    return this.#pool.close();
  }

  /** For /debug/vars. */
  stats(): Record<string, unknown> {
    return this.#pool.stats();
  }
}
