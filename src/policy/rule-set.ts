/**
 * The rules currently in force, each compiled once per generation and spec
 * (never per request). A version that fails to validate or compile keeps the
 * last good one in force and reports why; a rule that never compiled is kept
 * too, so that the evaluator can deny what it matches (fail closed).
 */
import { createHash } from 'node:crypto';
import { celExpressionCosts, compileCelRule, type CelExpressionCost, type CelRule } from './cel-rule.ts';
import { SchemaCompiler, type Validator } from './compiler.ts';
import {
  compileException,
  exceptionKey,
  exceptionShapeProblems,
  parseRfc3339,
  ruleRef,
  type CompiledException,
  type ExceptionOptions,
  type RuleRef,
} from './exceptions.ts';
import { isEmptySelector } from './label-selector.ts';
import { POD_TEMPLATE_KINDS } from './pod-templates.ts';
import { usesVersionKeyword } from './pod-security-version.ts';
import { ChangeFeed, type Replicated } from './replicated.ts';
import type {
  Enforcement,
  FailurePolicy,
  KindMatch,
  LabelSelector,
  Operation,
  PortalRuleObject,
  RuleAction,
  RuleKind,
  RuleSpec,
  Severity,
} from './types.ts';
import { validateRuleShape } from './validate-rule.ts';

export interface RuleState {
  key: string;
  ruleKind: RuleKind;
  name: string;
  namespace?: string;
  /** metadata.generation of the latest version seen (0 when absent, e.g. files). */
  generation: number;
  /** True when the latest version compiled and is the one in force. */
  ready: boolean;
  reason: 'Compiled' | 'CompileError';
  message: string;
  /** Generation of the version in force, when one ever compiled. */
  compiledGeneration?: number;
  enforcement: Enforcement;
  failurePolicy: FailurePolicy;
  severity: Severity;
  category: string;
  actions: RuleAction[];
}

/** A rule's match, prepared once for fast evaluation. */
export interface PreparedMatch {
  kinds: readonly KindMatch[];
  operations: ReadonlySet<string>;
  namespaces: readonly string[];
  excludedNamespaces: readonly string[];
  namespaceSelector: LabelSelector | undefined;
  objectSelector: LabelSelector | undefined;
  /** The rule names Pod explicitly and did not opt out of template checks. */
  podTemplates: boolean;
}

/** What the evaluator needs about one rule (internal to src/policy). */
export interface RuleEntry {
  readonly key: string;
  /** `name`, or `namespace/name` for a PortalRule. */
  readonly display: string;
  /** How PortalExceptions name it (lookup keys computed once). */
  readonly exceptionRef: RuleRef;
  readonly ruleKind: RuleKind;
  readonly ruleNamespace: string | undefined;
  readonly enforcement: Enforcement;
  readonly failurePolicy: FailurePolicy;
  readonly severity: Severity;
  readonly category: string;
  readonly message: string;
  readonly match: PreparedMatch;
  /** Undefined when no version ever compiled (a rule with only `cel` has a validator that accepts everything). */
  readonly validate: Validator | undefined;
  /** The compiled `validate.cel`, when the rule has one. */
  readonly cel?: CelRule | undefined;
  /** Why no version compiled (when validate is undefined). */
  readonly failure: string;
  /**
   * `spec.podSecurity.version` (default `latest`) when the schema uses
   * `minPodSecurityVersion`, so its verdict depends on the version in force;
   * undefined otherwise (the version is never looked up).
   */
  readonly podSecurityVersion: string | undefined;
}

export interface IndexedEntry {
  entry: RuleEntry;
  /** Matched through a Pod rule's template check, not directly. */
  viaTemplate: boolean;
}

interface Slot {
  hash: string;
  generation: number;
  state: RuleState;
  good: { hash: string; release: () => void; source: PortalRuleObject } | undefined;
  entry: RuleEntry | undefined;
  /** The latest version given to upsert (for snapshot()). */
  latest: PortalRuleObject;
}

/** What the RuleSet knows about one PortalException (its status is derived from it). */
export interface ExceptionState {
  key: string;
  /** `namespace/name`. */
  display: string;
  namespace: string;
  name: string;
  uid: string | undefined;
  generation: number;
  /** It validated and compiled (it is considered; expiry and lifetime are judged at `now`). */
  valid: boolean;
  /** Why it is invalid, or "" when valid. */
  message: string;
  /** spec.expiresAt in ms, when valid and set. */
  expiresAt: number | undefined;
  /** metadata.creationTimestamp in ms, when set. */
  createdAt: number | undefined;
  /** In one of the privileged namespaces. */
  privileged: boolean;
  /** The raw spec.rules, for status and docs. */
  rules: readonly string[];
}

interface ExceptionSlot {
  hash: string;
  state: ExceptionState;
  compiled: CompiledException | undefined;
  /** The object as given to upsertException (for snapshot() and a change of options). */
  source: unknown;
}

/**
 * Exceptions by where they may exempt: an exception exempts only objects of
 * its own namespace unless it is privileged, so a request looks at its
 * namespace's exceptions and the privileged ones, never at the rest.
 */
interface ExceptionIndex {
  revision: number;
  /** Non-privileged exceptions by namespace, in key order. */
  byNamespace: Map<string, CompiledException[]>;
  /** Privileged exceptions, in key order. */
  privileged: CompiledException[];
}

/**
 * A change of the RuleSet, as worker threads replay it (replicated.ts).
 * Exceptions travel as their raw objects, like rules, and the copy compiles
 * them itself; `options` (first in every snapshot) gives the copy the same
 * `--exception-namespaces` and `--max-exception-lifetime`, so it judges
 * every exception exactly as this instance does.
 */
export type RuleSetChange =
  | { op: 'upsert'; rule: PortalRuleObject }
  | { op: 'remove'; key: string }
  | { op: 'options'; options: ExceptionOptions }
  | { op: 'upsertException'; exception: unknown }
  | { op: 'removeException'; key: string };

const DEFAULT_OPERATIONS: readonly Operation[] = ['CREATE', 'UPDATE'];

export function ruleKey(rule: Pick<PortalRuleObject, 'kind' | 'metadata'>): string {
  return rule.kind === 'PortalRule'
    ? `PortalRule/${rule.metadata?.namespace ?? ''}/${rule.metadata?.name ?? ''}`
    : `PortalClusterRule/${rule.metadata?.name ?? ''}`;
}

function namesPod(kinds: readonly KindMatch[]): boolean {
  return kinds.some((k) => (k.apiGroups.includes('') || k.apiGroups.includes('*')) && k.kinds.includes('Pod'));
}

function prepareMatch(spec: RuleSpec): PreparedMatch {
  const m = spec.match;
  return {
    kinds: m.kinds,
    operations: new Set(m.operations && m.operations.length > 0 ? m.operations : DEFAULT_OPERATIONS),
    namespaces: m.namespaces ?? [],
    excludedNamespaces: m.excludedNamespaces ?? [],
    namespaceSelector: isEmptySelector(m.namespaceSelector) ? undefined : m.namespaceSelector,
    objectSelector: isEmptySelector(m.objectSelector) ? undefined : m.objectSelector,
    podTemplates: spec.podTemplates !== false && namesPod(m.kinds),
  };
}

/** Best effort for a version that never compiled: is its match usable at all? */
function usableMatch(spec: unknown): spec is RuleSpec {
  const kinds = (spec as { match?: { kinds?: unknown } } | undefined)?.match?.kinds;
  return (
    Array.isArray(kinds) &&
    kinds.length > 0 &&
    kinds.every(
      (k: unknown) =>
        k !== null &&
        typeof k === 'object' &&
        Array.isArray((k as KindMatch).apiGroups) &&
        Array.isArray((k as KindMatch).kinds) &&
        (k as KindMatch).apiGroups.every((g) => typeof g === 'string') &&
        (k as KindMatch).kinds.every((g) => typeof g === 'string'),
    )
  );
}

const ACCEPT_ALL: Validator = () => [];
const NO_EXCEPTIONS: readonly CompiledException[] = Object.freeze([]);

/** Compiles `validate.schema` and `validate.cel` (whichever are given). */
function compileValidation(
  v: RuleSpec['validate'],
  compiler: SchemaCompiler,
): { ok: true; validate: Validator; release: () => void; cel: CelRule | undefined } | { ok: false; error: string } {
  let validate = ACCEPT_ALL;
  let release = (): void => {};
  if (v.schema !== undefined) {
    const c = compiler.compile(v.schema);
    if (!c.ok) return { ok: false, error: c.error };
    [validate, release] = [c.validate, c.release];
  }
  let cel: CelRule | undefined;
  if (v.cel !== undefined) {
    const c = compileCelRule(v.cel);
    if (!c.ok) {
      release();
      return { ok: false, error: c.errors.join('; ') };
    }
    cel = c.rule;
  }
  return { ok: true, validate, release, cel };
}

const ENFORCEMENTS: ReadonlySet<string> = new Set(['Deny', 'Warn', 'Audit']);
const SEVERITIES: ReadonlySet<string> = new Set(['critical', 'high', 'medium', 'low', 'info']);

function specDefaults(spec: Partial<RuleSpec> | undefined): {
  enforcement: Enforcement;
  failurePolicy: FailurePolicy;
  severity: Severity;
  category: string;
  actions: RuleAction[];
} {
  return {
    enforcement: spec?.enforcement && ENFORCEMENTS.has(spec.enforcement) ? spec.enforcement : 'Deny',
    // Anything but an explicit Ignore is Fail: an unreadable value must not drop errors.
    failurePolicy: spec?.failurePolicy === 'Ignore' ? 'Ignore' : 'Fail',
    severity: spec?.severity && SEVERITIES.has(spec.severity) ? spec.severity : 'medium',
    category: typeof spec?.category === 'string' ? spec.category : '',
    actions: Array.isArray(spec?.audit?.actions) ? spec.audit.actions : [],
  };
}

function frozenOptions(options: ExceptionOptions): Readonly<{ exceptionNamespaces: readonly string[]; maxLifetimeMs: number | undefined }> {
  return Object.freeze({ exceptionNamespaces: Object.freeze([...(options.exceptionNamespaces ?? [])]), maxLifetimeMs: options.maxLifetimeMs });
}

export class RuleSet implements Replicated<RuleSetChange> {
  readonly #slots = new Map<string, Slot>();
  /** The compiler of this set's schemas (its ajv instance and the regex clock their patterns read). */
  readonly #schemas = new SchemaCompiler();
  readonly #exceptions = new Map<string, ExceptionSlot>();
  #options: Readonly<{ exceptionNamespaces: readonly string[]; maxLifetimeMs: number | undefined }>;
  #privileged: ReadonlySet<string>;
  readonly #feed = new ChangeFeed<RuleSetChange>();
  #revision = 0;
  /**
   * @internal candidates.ts's per-kind candidate lists for one revision (kept
   * by the set they come from, not in a module-level table).
   */
  candidateCache: { revision: number; byKind: Map<string, unknown> } | undefined;
  #index: { revision: number; byKind: Map<string, IndexedEntry[]>; wildcard: IndexedEntry[] } | undefined;
  #exceptionIndex: ExceptionIndex | undefined;

  /**
   * `options` say how exceptions are judged (`--exception-namespaces`,
   * `--max-exception-lifetime`); a copy of a RuleSet (another thread) is
   * built with the same {@link options} and fed the same raw objects.
   */
  constructor(options: ExceptionOptions = {}) {
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
    const held = [...this.#exceptions.values()].map((slot) => slot.source);
    this.#exceptions.clear();
    this.#revision++;
    this.#feed.emit({ op: 'options', options: { exceptionNamespaces: [...this.#options.exceptionNamespaces], maxLifetimeMs: this.#options.maxLifetimeMs } });
    for (const o of held) this.upsertException(o);
  }

  get options(): Readonly<{ exceptionNamespaces: readonly string[]; maxLifetimeMs: number | undefined }> {
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
    const key = ruleKey(rule);
    const spec = (rule as { spec?: unknown }).spec;
    const hash = createHash('sha256').update(JSON.stringify(spec ?? null)).digest('hex');
    const generation = typeof rule.metadata?.generation === 'number' ? rule.metadata.generation : 0;
    const previous = this.#slots.get(key);
    if (previous && previous.hash === hash && previous.generation === generation) return previous.state;
    if (previous?.good?.hash === hash && previous.entry) {
      // Only the generation moved (e.g. a no-op edit): keep the compiled code.
      previous.generation = generation;
      previous.state = { ...previous.state, generation, compiledGeneration: generation, ready: true, reason: 'Compiled', message: `compiled generation ${generation}` };
      previous.hash = hash;
      previous.good.source = rule;
      previous.latest = rule;
      this.#revision++;
      this.#feed.emit({ op: 'upsert', rule });
      return previous.state;
    }

    const name = rule.metadata?.name ?? '';
    const namespace = rule.kind === 'PortalRule' ? (rule.metadata?.namespace ?? '') : undefined;
    const display = namespace === undefined ? name : `${namespace}/${name}`;
    let failure: string | undefined;
    let validate: Validator | undefined;
    let release: (() => void) | undefined;
    let cel: CelRule | undefined;
    const shape = validateRuleShape(rule);
    if (!shape.ok) failure = `invalid rule: ${shape.problems.join('; ')}`;
    else {
      const compiled = compileValidation(shape.rule.spec.validate, this.#schemas);
      if (compiled.ok) [validate, release, cel] = [compiled.validate, compiled.release, compiled.cel];
      else failure = compiled.error;
    }

    let slot: Slot;
    if (validate && release) {
      previous?.good?.release();
      const s = (shape as { rule: PortalRuleObject }).rule.spec;
      const d = specDefaults(s);
      const entry: RuleEntry = {
        key,
        display,
        exceptionRef: ruleRef(display),
        ruleKind: rule.kind,
        ruleNamespace: namespace,
        ...d,
        message: s.validate.message ?? '',
        match: prepareMatch(s),
        validate,
        cel,
        failure: '',
        podSecurityVersion: usesVersionKeyword(s.validate.schema) ? (s.podSecurity?.version ?? 'latest') : undefined,
      };
      slot = {
        hash,
        generation,
        good: { hash, release, source: rule },
        entry,
        latest: rule,
        state: {
          key,
          ruleKind: rule.kind,
          name,
          ...(namespace !== undefined ? { namespace } : {}),
          generation,
          ready: true,
          reason: 'Compiled',
          message: `compiled generation ${generation}`,
          compiledGeneration: generation,
          ...d,
        },
      };
    } else if (previous?.good && previous.entry?.validate) {
      // Keep the last good version in force.
      const kept = previous.state.compiledGeneration ?? 0;
      slot = {
        hash,
        generation,
        good: previous.good,
        entry: previous.entry,
        latest: rule,
        state: {
          ...previous.state,
          generation,
          ready: false,
          reason: 'CompileError',
          message: `generation ${generation} rejected, generation ${kept} stays in force: ${failure ?? 'unknown error'}`,
        },
      };
    } else {
      const d = specDefaults(spec as Partial<RuleSpec> | undefined);
      const why = `it has never compiled: ${failure ?? 'unknown error'}`;
      slot = {
        hash,
        generation,
        good: undefined,
        latest: rule,
        entry: usableMatch(spec)
          ? {
              key,
              display,
              exceptionRef: ruleRef(display),
              ruleKind: rule.kind,
              ruleNamespace: namespace,
              ...d,
              message: '',
              match: prepareMatch(spec),
              validate: undefined,
              failure: why,
              podSecurityVersion: undefined,
            }
          : undefined,
        state: {
          key,
          ruleKind: rule.kind,
          name,
          ...(namespace !== undefined ? { namespace } : {}),
          generation,
          ready: false,
          reason: 'CompileError',
          message: usableMatch(spec) ? why : `${why} (its match is unusable, so it matches nothing)`,
          ...d,
        },
      };
    }
    this.#slots.set(key, slot);
    this.#revision++;
    this.#feed.emit({ op: 'upsert', rule });
    return slot.state;
  }

  remove(key: string): boolean {
    const slot = this.#slots.get(key);
    if (!slot) return false;
    slot.good?.release();
    this.#slots.delete(key);
    this.#revision++;
    this.#feed.emit({ op: 'remove', key });
    return true;
  }

  // ---- exceptions ----------------------------------------------------------

  /**
   * Adds or replaces a PortalException (raw object, as the informer or a
   * file gives it). An invalid one is held with its problems and exempts
   * nothing: unlike a rule, it keeps no last good version, since an
   * exemption that outlives its own (broken) edit would fail open. Same
   * spec and metadata that matter: nothing changes, revision kept.
   */
  upsertException(obj: unknown): ExceptionState {
    const o = (obj ?? {}) as { metadata?: Record<string, unknown>; spec?: unknown };
    const meta = o.metadata !== null && typeof o.metadata === 'object' ? o.metadata : {};
    const namespace = typeof meta['namespace'] === 'string' ? meta['namespace'] : '';
    const name = typeof meta['name'] === 'string' ? meta['name'] : '';
    const key = exceptionKey({ metadata: { namespace, name } });
    const generation = typeof meta['generation'] === 'number' ? meta['generation'] : 0;
    const uid = typeof meta['uid'] === 'string' ? meta['uid'] : undefined;
    const created = typeof meta['creationTimestamp'] === 'string' ? meta['creationTimestamp'] : undefined;
    const hash = createHash('sha256').update(JSON.stringify([o.spec ?? null, generation, uid ?? null, created ?? null, (obj as { apiVersion?: unknown })?.apiVersion ?? null, (obj as { kind?: unknown })?.kind ?? null])).digest('hex');
    const previous = this.#exceptions.get(key);
    if (previous && previous.hash === hash) return previous.state;
    const problems = exceptionShapeProblems(obj);
    let compiled: CompiledException | undefined;
    if (problems.length === 0) compiled = compileException(obj as Parameters<typeof compileException>[0], this.#privileged);
    const state: ExceptionState = {
      key,
      display: `${namespace}/${name}`,
      namespace,
      name,
      uid,
      generation,
      valid: compiled !== undefined,
      message: problems.length > 0 ? `invalid exception: ${problems.join('; ')}` : '',
      expiresAt: compiled?.expiresAt,
      createdAt: created !== undefined ? parseRfc3339(created) : undefined,
      privileged: this.#privileged.has(namespace),
      rules: Array.isArray((o.spec as { rules?: unknown } | undefined)?.rules) ? ((o.spec as { rules: unknown[] }).rules.filter((r) => typeof r === 'string') as string[]) : [],
    };
    this.#exceptions.set(key, { hash, state, compiled, source: obj });
    this.#revision++;
    this.#feed.emit({ op: 'upsertException', exception: obj });
    return state;
  }

  removeException(key: string): boolean {
    if (!this.#exceptions.delete(key)) return false;
    this.#revision++;
    this.#feed.emit({ op: 'removeException', key });
    return true;
  }

  get exceptionCount(): number {
    return this.#exceptions.size;
  }

  exceptionState(key: string): ExceptionState | undefined {
    return this.#exceptions.get(key)?.state;
  }

  exceptionStates(): ExceptionState[] {
    return [...this.#exceptions.values()].map((s) => s.state).sort((a, b) => a.key.localeCompare(b.key));
  }

  /** The compiled exception named `namespace/name`, when it is valid. */
  exception(display: string): CompiledException | undefined {
    const slash = display.indexOf('/');
    return this.#exceptions.get(exceptionKey({ metadata: { namespace: display.slice(0, slash), name: display.slice(slash + 1) } }))?.compiled;
  }

  /** The earliest expiresAt after `now` among valid exceptions (when an exemption next ends by itself). */
  nextExpiry(now: number): number | undefined {
    let next: number | undefined;
    for (const { compiled } of this.#exceptions.values()) {
      const at = compiled?.expiresAt;
      if (at !== undefined && at > now && (next === undefined || at < next)) next = at;
    }
    return next;
  }

  /**
   * Whether any exception could exempt an object in `namespace` (one of that
   * namespace, or a privileged one): when not, a request costs this one
   * lookup and no exception is consulted, however many are loaded.
   */
  mayExempt(namespace: string): boolean {
    if (this.#exceptions.size === 0) return false;
    const index = this.#buildExceptionIndex();
    return index.privileged.length > 0 || (namespace !== '' && index.byNamespace.has(namespace));
  }

  /**
   * @internal Every exception that may exempt an object in `namespace` (its
   * own, then the privileged ones), whatever rules they name; key order
   * within each group.
   */
  exceptionsIn(namespace: string): readonly CompiledException[] {
    if (this.#exceptions.size === 0) return NO_EXCEPTIONS;
    const index = this.#buildExceptionIndex();
    const own = namespace === '' ? undefined : index.byNamespace.get(namespace);
    if (index.privileged.length === 0) return own ?? NO_EXCEPTIONS;
    return own ? [...own, ...index.privileged] : index.privileged;
  }

  #buildExceptionIndex(): ExceptionIndex {
    if (this.#exceptionIndex?.revision === this.#revision) return this.#exceptionIndex;
    const byNamespace = new Map<string, CompiledException[]>();
    const privileged: CompiledException[] = [];
    const compiled = [...this.#exceptions.values()]
      .map((s) => s.compiled)
      .filter((c): c is CompiledException => c !== undefined)
      .sort((a, b) => a.key.localeCompare(b.key));
    for (const ex of compiled) {
      if (ex.privileged) privileged.push(ex);
      else {
        const list = byNamespace.get(ex.namespace);
        if (list) list.push(ex);
        else byNamespace.set(ex.namespace, [ex]);
      }
    }
    this.#exceptionIndex = { revision: this.#revision, byNamespace, privileged };
    return this.#exceptionIndex;
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
    const out: RuleSetChange[] = [{ op: 'options', options: { exceptionNamespaces: [...this.#options.exceptionNamespaces], maxLifetimeMs: this.#options.maxLifetimeMs } }];
    for (const slot of this.#slots.values()) {
      if (slot.good && slot.good.source !== slot.latest) out.push({ op: 'upsert', rule: slot.good.source });
      out.push({ op: 'upsert', rule: slot.latest });
    }
    for (const slot of this.#exceptions.values()) out.push({ op: 'upsertException', exception: slot.source });
    return out;
  }

  apply(change: RuleSetChange): void {
    switch (change.op) {
      case 'upsert': this.upsert(change.rule); break;
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

  state(key: string): RuleState | undefined {
    return this.#slots.get(key)?.state;
  }

  states(): RuleState[] {
    return [...this.#slots.values()].map((s) => s.state).sort((a, b) => a.key.localeCompare(b.key));
  }

  /**
   * Per rule in force with `validate.cel`: each expression's estimated
   * worst-case cost (estimate.ts), and whether it runs as generated
   * JavaScript or on cel-js's evaluation (`fallback`: why). For /debug/vars,
   * so an operator sees the expensive rules before they run.
   */
  celCosts(): { key: string; expressions: CelExpressionCost[] }[] {
    const out: { key: string; expressions: CelExpressionCost[] }[] = [];
    for (const slot of this.#slots.values()) {
      const cel = slot.entry?.cel;
      if (cel !== undefined) out.push({ key: slot.state.key, expressions: celExpressionCosts(cel) });
    }
    return out.sort((a, b) => a.key.localeCompare(b.key));
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
    const entries = [...this.#slots.values()]
      .map((s) => s.entry)
      .filter((e): e is RuleEntry => e !== undefined)
      .sort((a, b) => a.key.localeCompare(b.key));
    const push = (kind: string, item: IndexedEntry): void => {
      const list = byKind.get(kind) ?? [];
      if (!list.some((x) => x.entry === item.entry)) list.push(item);
      byKind.set(kind, list);
    };
    for (const entry of entries) {
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
