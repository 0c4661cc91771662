/**
 * The rules currently in force, each compiled once per generation and spec
 * (never per request), and the PortalExceptions beside them. How a version
 * is compiled, and what is kept when it fails, is rule-entry.ts; the
 * exceptions are exception-store.ts. Every change bumps the revision and is
 * replayed by the copies in worker threads (replicated.ts).
 */
import { createHash } from 'node:crypto';
import { celExpressionCosts, type CelExpressionCost } from './cel-rule.ts';
import { SchemaCompiler } from './compiler.ts';
import { ExceptionStore, type ExceptionState } from './exception-store.ts';
import type { CompiledException, ExceptionOptions } from './exceptions.ts';
import { exceptionKey } from './match-keys.ts';
import { POD_TEMPLATE_KINDS } from './pod-templates.ts';
import { ChangeFeed, type Replicated } from './replicated.ts';
import { compileRule, ruleKey, type CompileMode, type IndexedEntry, type PreparedMatch, type RuleEntry, type RuleState, type Slot } from './rule-entry.ts';
import { sortedByKey } from './sorted.ts';
import type { Enforcement, PortalRuleObject } from './types.ts';

/**
 * A change of the RuleSet, as worker threads replay it (replicated.ts).
 * Exceptions travel as their raw objects, like rules, and the copy compiles
 * them itself; `options` (first in every snapshot) gives the copy the same
 * `--exception-namespaces` and `--max-exception-lifetime`, so it judges
 * every exception exactly as this instance does.
 */
export type RuleSetChange =
  /** `rejected`: the version did not compile on the original (why), so a copy keeps what the original kept without compiling it. */
  | { op: 'upsert'; rule: PortalRuleObject; rejected?: string }
  | { op: 'remove'; key: string }
  | { op: 'options'; options: ExceptionOptions }
  | { op: 'upsertException'; exception: unknown }
  | { op: 'removeException'; key: string };

function upsertChange(rule: PortalRuleObject, rejected: string | undefined): RuleSetChange {
  return rejected === undefined ? { op: 'upsert', rule } : { op: 'upsert', rule, rejected };
}

type FrozenOptions = Readonly<{ exceptionNamespaces: readonly string[]; maxLifetimeMs: number | undefined }>;

function frozenOptions(options: ExceptionOptions): FrozenOptions {
  return Object.freeze({ exceptionNamespaces: Object.freeze([...(options.exceptionNamespaces ?? [])]), maxLifetimeMs: options.maxLifetimeMs });
}

/** When a copy compiles a rule version: at upsert (the default), or on its first evaluation (rule-code.ts, RuleCode). */
export interface RuleSetConfig {
  compile?: 'at-upsert' | 'on-first-use';
}

export class RuleSet implements Replicated<RuleSetChange> {
  readonly #slots = new Map<string, Slot>();
  readonly #onFirstUse: boolean;
  /** The compiler of this set's schemas (its ajv instance and the regex clock their patterns read). */
  readonly #schemas = new SchemaCompiler();
  readonly #exceptions = new ExceptionStore();
  #options: FrozenOptions;
  #privileged: ReadonlySet<string>;
  readonly #feed = new ChangeFeed<RuleSetChange>();
  #revision = 0;
  /**
   * @internal candidates.ts's per-kind candidate lists for one revision (kept
   * by the set they come from, not in a module-level table).
   */
  candidateCache: { revision: number; byKind: Map<string, unknown> } | undefined;
  #index: { revision: number; byKind: Map<string, IndexedEntry[]>; wildcard: IndexedEntry[] } | undefined;

  /**
   * `options` say how exceptions are judged (`--exception-namespaces`,
   * `--max-exception-lifetime`); a copy of a RuleSet (another thread) is
   * built with the same {@link options} and fed the same raw objects.
   */
  constructor(options: ExceptionOptions = {}, config: RuleSetConfig = {}) {
    this.#onFirstUse = config.compile === 'on-first-use';
    this.#options = frozenOptions(options);
    this.#privileged = new Set(this.#options.exceptionNamespaces);
  }

  /**
   * A copy's options, from the original's snapshot (a worker's RuleSet is
   * built before it knows them). Exceptions already held are compiled
   * again, since whether one is privileged depends on them.
   */
  #configure(options: ExceptionOptions): void {
    this.#options = frozenOptions(options);
    this.#privileged = new Set(this.#options.exceptionNamespaces);
    const held = this.#exceptions.clear();
    this.#revision++;
    this.#feed.emit({ op: 'options', options: this.#optionsChange() });
    for (const o of held) this.upsertException(o);
  }

  #optionsChange(): ExceptionOptions {
    return { exceptionNamespaces: [...this.#options.exceptionNamespaces], maxLifetimeMs: this.#options.maxLifetimeMs };
  }

  get options(): FrozenOptions {
    return this.#options;
  }

  /** Bumps on every change that can alter a verdict. */
  get revision(): number {
    return this.#revision;
  }

  get size(): number {
    return this.#slots.size;
  }

  /**
   * Adds or replaces a rule. Same generation and same spec as the version
   * already held: nothing is recompiled and the revision does not change.
   */
  upsert(rule: PortalRuleObject): RuleState {
    return this.#upsert(rule, undefined);
  }

  /** `rejected`: the original's verdict, when this is a copy replaying its change (apply). */
  #upsert(rule: PortalRuleObject, rejected: string | undefined): RuleState {
    const mode: CompileMode = this.#onFirstUse ? { at: 'first-use', rejected } : { at: 'upsert' };
    const key = ruleKey(rule);
    const spec = (rule as { spec?: unknown }).spec;
    const hash = createHash('sha256').update(JSON.stringify(spec ?? null)).digest('hex');
    const generation = typeof rule.metadata?.generation === 'number' ? rule.metadata.generation : 0;
    const previous = this.#slots.get(key);
    if (previous && previous.hash === hash && previous.generation === generation) return previous.state;
    let slot: Slot;
    if (previous?.good?.hash === hash && previous.entry) {
      // Only the generation moved (e.g. a no-op edit): keep the compiled code.
      previous.generation = generation;
      previous.state = { ...previous.state, generation, compiledGeneration: generation, ready: true, reason: 'Compiled', message: `compiled generation ${generation}` };
      previous.hash = hash;
      previous.good.source = rule;
      previous.latest = rule;
      previous.rejected = undefined;
      slot = previous;
    } else {
      slot = compileRule(rule, hash, generation, previous, this.#schemas, mode);
      this.#slots.set(key, slot);
    }
    this.#revision++;
    this.#feed.emit(upsertChange(rule, slot.rejected));
    return slot.state;
  }

  remove(key: string): boolean {
    const slot = this.#slots.get(key);
    if (!slot) return false;
    slot.good?.code.release();
    this.#slots.delete(key);
    this.#revision++;
    this.#feed.emit({ op: 'remove', key });
    return true;
  }

  // ---- exceptions ----------------------------------------------------------

  /**
   * Adds or replaces a PortalException (raw object, as the informer or a
   * file gives it); see exception-store.ts. Same spec and metadata that
   * matter: nothing changes, revision kept.
   */
  upsertException(obj: unknown): ExceptionState {
    const { state, changed } = this.#exceptions.upsert(obj, this.#privileged);
    if (!changed) return state;
    this.#revision++;
    this.#feed.emit({ op: 'upsertException', exception: obj });
    return state;
  }

  removeException(key: string): boolean {
    if (!this.#exceptions.remove(key)) return false;
    this.#revision++;
    this.#feed.emit({ op: 'removeException', key });
    return true;
  }

  get exceptionCount(): number {
    return this.#exceptions.size;
  }

  exceptionState(key: string): ExceptionState | undefined {
    return this.#exceptions.get(key);
  }

  exceptionStates(): ExceptionState[] {
    return this.#exceptions.states();
  }

  /** The compiled exception named `namespace/name`, when it is valid. */
  exception(display: string): CompiledException | undefined {
    const slash = display.indexOf('/');
    return this.#exceptions.compiled(exceptionKey({ metadata: { namespace: display.slice(0, slash), name: display.slice(slash + 1) } }));
  }

  /** The earliest expiresAt after `now` among valid exceptions (when an exemption next ends by itself). */
  nextExpiry(now: number): number | undefined {
    return this.#exceptions.nextExpiry(now);
  }

  /**
   * Whether any exception could exempt an object in `namespace` (one of that
   * namespace, or a privileged one): when not, a request costs this one
   * lookup and no exception is consulted, however many are loaded.
   */
  mayExempt(namespace: string): boolean {
    return this.#exceptions.mayExempt(namespace);
  }

  /**
   * @internal Every exception that may exempt an object in `namespace` (its
   * own, then the privileged ones), whatever rules they name; key order
   * within each group.
   */
  exceptionsIn(namespace: string): readonly CompiledException[] {
    return this.#exceptions.in(namespace);
  }

  onChange(listener: (change: RuleSetChange) => void): () => void {
    return this.#feed.subscribe(listener);
  }

  /**
   * Upserts that rebuild the rules in force: a rule whose latest version was
   * rejected replays its last good version first, so the copy keeps the same
   * version in force.
   */
  snapshot(): RuleSetChange[] {
    const out: RuleSetChange[] = [{ op: 'options', options: this.#optionsChange() }];
    for (const slot of this.#slots.values()) {
      if (slot.good && slot.good.source !== slot.latest) out.push(upsertChange(slot.good.source, undefined));
      out.push(upsertChange(slot.latest, slot.rejected));
    }
    for (const exception of this.#exceptions.sources()) out.push({ op: 'upsertException', exception });
    return out;
  }

  apply(change: RuleSetChange): void {
    switch (change.op) {
      case 'upsert': this.#upsert(change.rule, change.rejected); break;
      case 'remove': this.remove(change.key); break;
      case 'options': this.#configure(change.options); break;
      case 'upsertException': this.upsertException(change.exception); break;
      case 'removeException': this.removeException(change.key); break;
    }
  }

  /** The match and enforcement in force for a rule; undefined when it has none (its match is unusable). */
  matchOf(key: string): { enforcement: Enforcement; match: PreparedMatch } | undefined {
    const e = this.#slots.get(key)?.entry;
    return e ? { enforcement: e.enforcement, match: e.match } : undefined;
  }

  /**
   * The version of a rule in force: its generation and a hash of its spec
   * (the same on every thread and replica, and after a restart); undefined
   * when no version compiled. Keys what is remembered about one version
   * (src/evaluation/poison-pairs.ts).
   */
  version(key: string): string | undefined {
    const slot = this.#slots.get(key);
    return slot?.good ? `${slot.state.compiledGeneration ?? slot.generation}/${slot.good.hash.slice(0, 16)}` : undefined;
  }

  state(key: string): RuleState | undefined {
    return this.#slots.get(key)?.state;
  }

  states(): RuleState[] {
    return sortedByKey(this.#slots.values(), (s) => s.state);
  }

  /**
   * Per rule in force with `validate.cel`: each expression's estimated
   * worst-case cost (estimate.ts), and whether it runs as generated
   * JavaScript or on cel-js's evaluation (`fallback`: why). For /debug/vars,
   * so an operator sees the expensive rules before they run.
   */
  celCosts(): { key: string; expressions: CelExpressionCost[] }[] {
    return sortedByKey(this.#slots.values(), (slot) => {
      const cel = slot.entry?.code?.peek()?.cel;
      return cel !== undefined ? { key: slot.state.key, expressions: celExpressionCosts(cel) } : undefined;
    });
  }

  /** Kinds to watch for the audit, including workloads implied by Pod rules. */
  matchedKinds(): { group: string; kind: string }[] {
    const seen = new Map<string, { group: string; kind: string }>();
    const add = (group: string, kind: string): void => {
      seen.set(`${group}/${kind}`, { group, kind });
    };
    for (const slot of this.#slots.values()) {
      const e = slot.entry;
      if (!e) continue;
      for (const k of e.match.kinds) for (const g of k.apiGroups) for (const kind of k.kinds) add(g, kind);
      if (e.match.podTemplates) for (const w of POD_TEMPLATE_KINDS) add(w.group, w.kind);
    }
    return [...seen.values()].sort((a, b) => `${a.group}/${a.kind}`.localeCompare(`${b.group}/${b.kind}`));
  }

  /** @internal Candidates for a kind, in rule-key order (the evaluator's index). */
  candidates(kind: string): { specific: readonly IndexedEntry[]; wildcard: readonly IndexedEntry[] } {
    const index = this.#buildIndex();
    return { specific: index.byKind.get(kind) ?? [], wildcard: index.wildcard };
  }

  #buildIndex(): { byKind: Map<string, IndexedEntry[]>; wildcard: IndexedEntry[] } {
    if (this.#index?.revision === this.#revision) return this.#index;
    const byKind = new Map<string, IndexedEntry[]>();
    const wildcard: IndexedEntry[] = [];
    const push = (kind: string, item: IndexedEntry): void => {
      const list = byKind.get(kind) ?? [];
      if (!list.some((x) => x.entry === item.entry)) list.push(item);
      byKind.set(kind, list);
    };
    for (const entry of sortedByKey(this.#slots.values(), (s): RuleEntry | undefined => s.entry)) {
      const kinds = new Set(entry.match.kinds.flatMap((k) => k.kinds));
      if (kinds.has('*')) wildcard.push({ entry, viaTemplate: false });
      for (const kind of kinds) if (kind !== '*') push(kind, { entry, viaTemplate: false });
      if (entry.match.podTemplates && !kinds.has('*')) {
        for (const w of POD_TEMPLATE_KINDS) if (!kinds.has(w.kind)) push(w.kind, { entry, viaTemplate: true });
      }
    }
    this.#index = { revision: this.#revision, byKind, wildcard };
    return this.#index;
  }
}

