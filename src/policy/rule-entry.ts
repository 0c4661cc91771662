/**
 * One rule as the RuleSet holds it (rule-set.ts): its state as reported in
 * status, the entry the evaluator reads, and how a new version of it is
 * compiled — keeping the last good version in force when the new one fails
 * (a rule that never compiled is kept too, so that the evaluator can deny
 * what it matches: fail closed).
 */
import { compileCelRule, type CelRule } from './cel-rule.ts';
import { RuleCode, type Compiled } from './rule-code.ts';
import type { SchemaCompiler, Validator } from './compiler.ts';
import { ruleRef, type RuleRef } from './match-keys.ts';
import { isEmptySelector } from './label-selector.ts';
import { usesVersionKeyword } from './pod-security-version.ts';
import { namesPod } from './pod-templates.ts';
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
  /** The version's checks; undefined when no version ever compiled. */
  readonly code: RuleCode | undefined;
  /** Why no version compiled (when code is undefined). */
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

export interface Slot {
  hash: string;
  generation: number;
  state: RuleState;
  good: { hash: string; code: RuleCode; source: PortalRuleObject } | undefined;
  entry: RuleEntry | undefined;
  /** The latest version given to upsert (for snapshot()). */
  latest: PortalRuleObject;
  /** Why the latest version was rejected (it is not the one in force); undefined when it is in force. */
  rejected: string | undefined;
}

const DEFAULT_OPERATIONS: readonly Operation[] = ['CREATE', 'UPDATE'];

export function ruleKey(rule: Pick<PortalRuleObject, 'kind' | 'metadata'>): string {
  return rule.kind === 'PortalRule'
    ? `PortalRule/${rule.metadata?.namespace ?? ''}/${rule.metadata?.name ?? ''}`
    : `PortalClusterRule/${rule.metadata?.name ?? ''}`;
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

/** Compiles `validate.schema` and `validate.cel` (whichever are given). */
function compileValidation(v: RuleSpec['validate'], compiler: SchemaCompiler): Compiled {
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

/** The names a rule's state and entry carry. */
function identity(rule: PortalRuleObject): { key: string; name: string; namespace: string | undefined; display: string } {
  const name = rule.metadata?.name ?? '';
  const namespace = rule.kind === 'PortalRule' ? (rule.metadata?.namespace ?? '') : undefined;
  return { key: ruleKey(rule), name, namespace, display: namespace === undefined ? name : `${namespace}/${name}` };
}

type Identity = ReturnType<typeof identity>;

function entryNames(rule: PortalRuleObject, id: Identity): Pick<RuleEntry, 'key' | 'display' | 'exceptionRef' | 'ruleKind' | 'ruleNamespace'> {
  return { key: id.key, display: id.display, exceptionRef: ruleRef(id.display), ruleKind: rule.kind, ruleNamespace: id.namespace };
}

function stateNames(rule: PortalRuleObject, id: Identity): Pick<RuleState, 'key' | 'ruleKind' | 'name' | 'namespace'> {
  return { key: id.key, ruleKind: rule.kind, name: id.name, ...(id.namespace !== undefined ? { namespace: id.namespace } : {}) };
}

/** How a new version is compiled: at once, or on first use in a copy that was told whether the original compiled it. */
export type CompileMode = { at: 'upsert' } | { at: 'first-use'; rejected: string | undefined };

/** A new version's checks (compiled now, or to be compiled on first use), or why it is rejected. */
function versionCode(rule: PortalRuleObject, compiler: SchemaCompiler, mode: CompileMode): { spec: RuleSpec; code: RuleCode } | { failure: string } {
  // A copy told that the original rejected this version rejects it too, without compiling it.
  if (mode.at === 'first-use' && mode.rejected !== undefined) return { failure: mode.rejected };
  const shape = validateRuleShape(rule);
  if (!shape.ok) return { failure: `invalid rule: ${shape.problems.join('; ')}` };
  const { spec } = shape.rule;
  if (mode.at === 'first-use') return { spec, code: RuleCode.onFirstUse(() => compileValidation(spec.validate, compiler)) };
  const compiled = compileValidation(spec.validate, compiler);
  return compiled.ok ? { spec, code: RuleCode.compiled(compiled) } : { failure: compiled.error };
}

/**
 * The slot of a new version of a rule (`hash`: of its spec), given the slot
 * it replaces: compiled and in force; or rejected, with the last good
 * version kept in force; or rejected with none ever compiled. A copy
 * compiling on first use takes the original's verdict (`rejected`: why it
 * failed there) and compiles nothing now.
 */
export function compileRule(rule: PortalRuleObject, hash: string, generation: number, previous: Slot | undefined, compiler: SchemaCompiler, mode: CompileMode = { at: 'upsert' }): Slot {
  const id = identity(rule);
  const version = versionCode(rule, compiler, mode);
  if ('code' in version) {
    previous?.good?.code.release();
    return compiledSlot(rule, version.spec, id, hash, generation, version.code);
  }
  const failure = version.failure;
  if (previous?.good && previous.entry?.code) {
    // Keep the last good version in force.
    const kept = previous.state.compiledGeneration ?? 0;
    return {
      hash,
      generation,
      good: previous.good,
      entry: previous.entry,
      latest: rule,
      rejected: failure,
      state: { ...previous.state, generation, ready: false, reason: 'CompileError', message: `generation ${generation} rejected, generation ${kept} stays in force: ${failure}` },
    };
  }
  return neverCompiledSlot(rule, id, hash, generation, failure);
}

function compiledSlot(
  rule: PortalRuleObject,
  s: RuleSpec,
  id: Identity,
  hash: string,
  generation: number,
  code: RuleCode,
): Slot {
  const d = specDefaults(s);
  const entry: RuleEntry = {
    ...entryNames(rule, id),
    ...d,
    message: s.validate.message ?? '',
    match: prepareMatch(s),
    code,
    failure: '',
    podSecurityVersion: usesVersionKeyword(s.validate.schema) ? (s.podSecurity?.version ?? 'latest') : undefined,
  };
  return {
    hash,
    generation,
    good: { hash, code, source: rule },
    entry,
    latest: rule,
    rejected: undefined,
    state: {
      ...stateNames(rule, id),
      generation,
      ready: true,
      reason: 'Compiled',
      message: `compiled generation ${generation}`,
      compiledGeneration: generation,
      ...d,
    },
  };
}

function neverCompiledSlot(rule: PortalRuleObject, id: Identity, hash: string, generation: number, failure: string): Slot {
  const spec = (rule as { spec?: unknown }).spec;
  const d = specDefaults(spec as Partial<RuleSpec> | undefined);
  const why = `it has never compiled: ${failure}`;
  const usable = usableMatch(spec);
  return {
    hash,
    generation,
    good: undefined,
    latest: rule,
    rejected: failure,
    entry: usable
      ? {
          ...entryNames(rule, id),
          ...d,
          message: '',
          match: prepareMatch(spec),
          code: undefined,
          failure: why,
          podSecurityVersion: undefined,
        }
      : undefined,
    state: {
      ...stateNames(rule, id),
      generation,
      ready: false,
      reason: 'CompileError',
      message: usable ? why : `${why} (its match is unusable, so it matches nothing)`,
      ...d,
    },
  };
}
