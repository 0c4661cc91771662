/**
 * The audit's full passes (evaluator.ts): every object of every audited kind
 * enqueued at once (`--audit-interval`, a rule change, a kind listed for the
 * first time), and what a pass that ended proves — which rules it evaluated
 * (their lastAuditTime) and whether it saw every kind (namespace reports
 * wait for such a complete pass).
 */
import type { Logger } from 'pino';
import type { Gauge } from 'prom-client';
import { LogKey } from '../observability/log-keys.ts';
import type { RuleSet } from '../policy/index.ts';
import type { KindInformers } from './kind-informers.ts';
import { objectKey } from './work-queue.ts';

export interface FullPassDeps {
  informers: KindInformers;
  ruleSet: RuleSet;
  logger: Logger;
  passSeconds: Gauge;
  enqueue(key: string): void;
  /** Objects evaluation holds (also those gone from every informer, to clean up). */
  heldKeys(): Iterable<string>;
  heldCount(): number;
  /** A pass ended: the rules (RuleState keys) it evaluated. */
  ended(at: Date, rules: ReadonlySet<string>): void;
}

export class FullPasses {
  readonly #deps: FullPassDeps;
  readonly #pending = new Set<string>();
  #startedAt = 0;
  #lastPassTime: Date | undefined;
  /** Rules the running pass evaluates (see AuditStep.passEnded). */
  #rules: ReadonlySet<string> = new Set();
  /** Per rule (RuleState key): the end of the last pass that evaluated it, on this replica. */
  readonly #ruleLastPass = new Map<string, Date>();
  /** Reports and ledger have listed once: passes may start (the actuator compares against them). */
  #ready = false;
  /** Something changed during a pass (rules, a kind listed): another pass follows it. */
  #again = false;
  #passes = 0;
  #completePasses = 0;
  /** The running pass began with every audited kind listed or forbidden (see {@link completePasses}). */
  #complete = false;

  constructor(deps: FullPassDeps) {
    this.#deps = deps;
  }

  /** Passes may start from now on; starts the first one. */
  ready(signal: AbortSignal): void {
    this.#ready = true;
    if (!signal.aborted) this.start();
  }

  /** Enqueues every object of every audited kind (a full pass). Returns how many. */
  start(): number {
    if (this.#pending.size > 0) return 0; // the previous pass is still running
    const { informers } = this.#deps;
    this.#again = false;
    this.#startedAt = performance.now();
    this.#complete = informers.all().every(({ resource }) => informers.access(resource.group, resource.kind).state !== 'pending');
    this.#rules = this.#evaluableRules();
    const n = this.#enqueueAll(true);
    if (n === 0) this.#finish();
    return n;
  }

  /**
   * A pass now, or right after the running one (rules changed, a kind listed
   * for the first time): what changed is evaluated at once either way (the
   * objects are enqueued), and a rule's lastAuditTime comes from a pass that
   * started after it was in force.
   */
  request(signal: AbortSignal | undefined): void {
    if (signal?.aborted) return;
    if (!this.#ready || this.#pending.size > 0) {
      this.#again = true;
      this.#enqueueAll(false);
    } else this.start();
  }

  /** A key was handled: the pass ends with its last key. */
  handled(key: string): void {
    if (this.#pending.delete(key) && this.#pending.size === 0) this.#finish();
  }

  get running(): boolean {
    return this.#pending.size > 0;
  }

  get lastPassTime(): Date | undefined {
    return this.#lastPassTime;
  }

  /** The end of the last pass on this replica that evaluated the rule (RuleState key). */
  ruleLastPass(key: string): Date | undefined {
    return this.#ruleLastPass.get(key);
  }

  get passes(): number {
    return this.#passes;
  }

  /**
   * Full passes that began with every audited kind listed (or forbidden).
   * The first pass can start before a kind's first list (kind informers are
   * not awaited) and so evaluate nothing of it; a namespace report, which
   * sums up every object, waits for a complete pass.
   */
  get completePasses(): number {
    return this.#completePasses;
  }

  /** Rules (RuleState keys) whose named kinds have all been listed: what a pass starting now evaluates. */
  #evaluableRules(): Set<string> {
    const { ruleSet, informers } = this.#deps;
    const out = new Set<string>();
    for (const state of ruleSet.states()) {
      const m = ruleSet.matchOf(state.key);
      if (!m) continue;
      let listed = true;
      let any = false;
      for (const k of m.match.kinds) {
        for (const group of k.apiGroups) {
          for (const kind of k.kinds) {
            if (group === '*' || kind === '*') continue;
            any = true;
            if (informers.access(group, kind).state !== 'listed') listed = false;
          }
        }
      }
      if (any && listed) out.add(state.key);
    }
    return out;
  }

  #enqueueAll(pass: boolean): number {
    let n = 0;
    for (const { resource, informer } of this.#deps.informers.all()) {
      for (const o of informer.list()) {
        const key = objectKey(resource.group, resource.kind, o.metadata?.namespace ?? '', o.metadata?.name ?? '');
        if (pass) this.#pending.add(key);
        this.#deps.enqueue(key);
        n++;
      }
    }
    // Objects known but gone from every informer (kind dropped): evaluate to clean up.
    for (const key of this.#deps.heldKeys()) this.#deps.enqueue(key);
    return n;
  }

  #finish(): void {
    this.#passes++;
    if (this.#complete) this.#completePasses++;
    const at = new Date();
    this.#lastPassTime = at;
    const rules = this.#rules;
    for (const key of rules) this.#ruleLastPass.set(key, at);
    // Rules removed since: forget them.
    for (const key of this.#ruleLastPass.keys()) if (!this.#deps.ruleSet.state(key)) this.#ruleLastPass.delete(key);
    const seconds = (performance.now() - this.#startedAt) / 1000;
    this.#deps.passSeconds.set(seconds);
    this.#deps.ended(at, rules);
    this.#deps.logger.info({ [LogKey.objects]: this.#deps.heldCount(), [LogKey.rules]: rules.size, [LogKey.seconds]: seconds }, 'full audit pass done');
    if (this.#again && this.#ready) setImmediate(() => this.start());
  }
}
