/**
 * PortalException (`portal.dev/v1alpha1`, docs/design.md §9, docs/exceptions.md):
 * validation, compilation, and THE function that decides whether an exception
 * covers an (object, rule) pair — {@link exceptionCovers}. Admission
 * (decideAdmission), the audit (evaluate, exemptVerdicts) and `portal test`
 * all reach it through the RuleSet, so the three paths cannot disagree.
 *
 * Decisions:
 * - Rule names: `NAME` is a PortalClusterRule, a PortalRule in the
 *   exception's own namespace, or a ValidatingAdmissionPolicy (every
 *   binding); `NAMESPACE/NAME` is a PortalRule in NAMESPACE or a VAP
 *   `POLICY/BINDING`. Names are looked up in two spaces (Portal rules, VAPs)
 *   so `a/b` never confuses a PortalRule with a binding.
 * - Scope: an exception in namespace N exempts only objects in N, never a
 *   cluster-scoped object (a Namespace included). Only exceptions in one of
 *   the privileged namespaces (`--exception-namespaces`, default the install
 *   namespace) may exempt objects anywhere and cluster-scoped ones; their
 *   `match.namespaces` narrows that.
 * - Operations: every operation unless `match.operations` narrows it (the
 *   audit is always covered): an exempted object stays exempted when it is
 *   updated or deleted.
 * - Pod templates: an exception that names Pod also covers the pod-template
 *   verdicts of workloads (a Pod rule checking a Deployment), matched on the
 *   workload's name and labels, unless `podTemplates: false`; `object` in its
 *   matchConditions is then the template's Pod, as for CEL rules.
 * - Names: `match.names` with a trailing `*` glob. A CREATE with only
 *   `generateName` has no name yet: it is matched on its generateName (so
 *   `agent-*` covers the pods a controller creates as `agent-…`).
 * - Expiry: covered only while `now < expiresAt`, `now` injected by the
 *   caller (EvaluationInput.now, else the clock when judged).
 * - `--max-exception-lifetime`: an exception that never expires, or expires
 *   more than that after its creation (metadata.creationTimestamp; the
 *   moment judged when absent, as at apply or in files), is refused: it
 *   covers nothing and its status says why.
 * - Fail closed: an exception that does not validate or compile, a
 *   matchCondition that errs or runs out of cost, unknown namespace labels
 *   for a namespaceSelector, an evaluation past its time budget: each means
 *   "not exempted", never "exempted".
 *
 * Pure: no I/O; time comes in as `now`.
 */
import { activationFor } from './cel-rule.ts';
import { evaluateComposition, newBudget, type Composition } from './cel/index.ts';
import { exceptionKey, IMPLIED_SUBRESOURCES, kindMatches, refKeys, type RuleRef } from './match-keys.ts';
import { compileConditions, createdAt, lifetimeProblem, parseRfc3339 } from './exception-shape.ts';
import { isEmptySelector, selectorMatches } from './label-selector.ts';
import { anyNamespaceGlobMatches } from './namespace-glob.ts';
import { namesPod } from './pod-templates.ts';
import type { EvaluationInput, KindMatch, KubeObject, LabelSelector, PortalExceptionObject } from './types.ts';


/** How a RuleSet judges exceptions (mirrors `--exception-namespaces` and `--max-exception-lifetime`). */
export interface ExceptionOptions {
  /**
   * Namespaces whose exceptions may exempt objects in every namespace and
   * cluster-scoped objects. @default [] (the CLI passes the install namespace)
   */
  exceptionNamespaces?: readonly string[];
  /** Longest lifetime (expiresAt − creation) accepted, in ms; undefined: no limit. @default undefined */
  maxLifetimeMs?: number | undefined;
}

export interface CompiledException {
  /** `PortalException/NAMESPACE/NAME` (the RuleSet key). */
  readonly key: string;
  /** `NAMESPACE/NAME`: what verdicts, reports and audit annotations show. */
  readonly display: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid: string | undefined;
  readonly generation: number;
  /** Lookup keys of the rules it names (`rule:…`, `vap:…`). */
  readonly ruleKeys: ReadonlySet<string>;
  /** Its namespace is privileged: it may exempt objects anywhere. */
  readonly privileged: boolean;
  readonly kinds: readonly KindMatch[];
  /** undefined: every operation. */
  readonly operations: ReadonlySet<string> | undefined;
  readonly names: readonly string[];
  readonly namespaces: readonly string[];
  readonly excludedNamespaces: readonly string[];
  readonly namespaceSelector: LabelSelector | undefined;
  readonly objectSelector: LabelSelector | undefined;
  /** Names Pod and did not opt out: covers workloads' pod-template verdicts. */
  readonly podTemplates: boolean;
  readonly conditions: Composition | undefined;
  /** ms since the epoch; undefined: never expires. */
  readonly expiresAt: number | undefined;
  /** metadata.creationTimestamp in ms, when set. */
  readonly createdAt: number | undefined;
  readonly reason: string;
}

export type Coverage = { covers: true } | { covers: false; why: string };

/** What one judgement needs besides the exception and the pair. */
export interface CoverageContext {
  /** Wall clock, ms since the epoch. */
  now: number;
  /** `--max-exception-lifetime` in ms. */
  maxLifetimeMs: number | undefined;
  /** Past this (monotonic) deadline no matchCondition starts: not exempted. */
  deadline?: { deadline: number; now: () => number } | undefined;
}

// ---- RFC 3339 -----------------------------------------------------------------

// ---- compilation ----------------------------------------------------------------

/** The lookup keys one `spec.rules` entry stands for, in an exception in `namespace`. */
export function referenceKeys(ref: string, namespace: string): string[] {
  // A bare name also means the PortalRule of that name in the exception's namespace.
  return ref.includes('/') ? [`rule:${ref}`, `vap:${ref}`] : [`rule:${ref}`, `vap:${ref}`, `rule:${namespace}/${ref}`];
}

/** The lookup keys of the rule references as written in an exception in `namespace`. */
function ruleKeysOf(refs: readonly string[], namespace: string): Set<string> {
  const keys = new Set<string>();
  for (const r of refs) for (const k of referenceKeys(r, namespace)) keys.add(k);
  return keys;
}

/**
 * The entries of an exception's `spec.rules` that name no rule that exists:
 * `known` holds the lookup keys ({@link refKeys}) of every Portal rule and
 * ValidatingAdmissionPolicy (and binding) the replica knows now.
 */
export function unresolvedRules(rules: readonly string[], namespace: string, known: ReadonlySet<string>): string[] {
  return rules.filter((r) => !referenceKeys(r, namespace).some((k) => known.has(k)));
}

function namesRule(ex: CompiledException, rule: RuleRef): boolean {
  for (const k of refKeys(rule)) if (ex.ruleKeys.has(k)) return true;
  return false;
}

/** Compiles a validated exception (see {@link exceptionShapeProblems}). */
export function compileException(ex: PortalExceptionObject, privilegedNamespaces: ReadonlySet<string>): CompiledException {
  const spec = ex.spec;
  const m = spec.match;
  const namespace = ex.metadata.namespace ?? '';
  const c = compileConditions(spec);
  if (!c.ok) throw new Error(`compileException: invalid exception ${namespace}/${ex.metadata.name}: ${c.problems.join('; ')}`);
  return Object.freeze({
    key: exceptionKey(ex),
    display: `${namespace}/${ex.metadata.name}`,
    namespace,
    name: ex.metadata.name,
    uid: ex.metadata.uid,
    generation: typeof ex.metadata.generation === 'number' ? ex.metadata.generation : 0,
    ruleKeys: ruleKeysOf(spec.rules, namespace),
    privileged: privilegedNamespaces.has(namespace),
    kinds: m.kinds,
    operations: m.operations && m.operations.length > 0 ? new Set(m.operations) : undefined,
    names: m.names ?? [],
    namespaces: m.namespaces ?? [],
    excludedNamespaces: m.excludedNamespaces ?? [],
    namespaceSelector: isEmptySelector(m.namespaceSelector) ? undefined : m.namespaceSelector,
    objectSelector: isEmptySelector(m.objectSelector) ? undefined : m.objectSelector,
    podTemplates: spec.podTemplates !== false && namesPod(m.kinds),
    conditions: c.conditions,
    expiresAt: spec.expiresAt !== undefined ? parseRfc3339(spec.expiresAt) : undefined,
    createdAt: createdAt(ex),
    reason: spec.reason,
  });
}

// ---- the judgement ------------------------------------------------------------

function labelsOf(obj: KubeObject | null): Record<string, string> | undefined {
  const labels = obj?.metadata?.labels;
  return labels !== null && typeof labels === 'object' ? labels : undefined;
}

function nameMatches(globs: readonly string[], input: EvaluationInput): boolean {
  let name = input.name;
  let prefixOnly = false;
  if (name === '') {
    // A CREATE with generateName: the API server names the object after admission.
    const g = (input.object ?? input.oldObject)?.metadata?.generateName;
    if (typeof g !== 'string' || g === '') return false;
    name = g;
    prefixOnly = true;
  }
  for (const glob of globs) {
    if (glob.endsWith('*')) {
      if (name.startsWith(glob.slice(0, -1))) return true;
    } else if (!prefixOnly && glob === name) return true;
  }
  return false;
}

function kindCovered(ex: CompiledException, input: EvaluationInput, template: boolean): boolean {
  const { group, kind } = input.kind;
  if (template && ex.podTemplates) return true;
  const sub = input.subResource ?? '';
  let matched = false;
  for (const k of ex.kinds) {
    if (!kindMatches(k, group, kind)) continue;
    if (sub === '') return true;
    matched = true;
    if (k.subresources?.includes('*') || k.subresources?.includes(sub)) return true;
  }
  return matched && (IMPLIED_SUBRESOURCES.get(`${group}/${kind}`)?.includes(sub) ?? false);
}

/**
 * Why an exception does not cover a pair ({@link judge}): a constant, so the
 * request path allocates nothing to reject one; the text is built only when
 * asked for ({@link exceptionCovers}).
 */
export type Miss =
  | 'rule'
  | 'expired'
  | 'lifetime'
  | 'cluster-scoped'
  | 'other-namespace'
  | 'kind'
  | 'operation'
  | 'name'
  | 'namespaces'
  | 'excluded-namespaces'
  | 'namespace-labels-unknown'
  | 'namespace-selector'
  | 'namespace-criteria'
  | 'object-selector'
  | 'deadline'
  | { condition: string; error?: string };

/**
 * THE judgement: whether exception `ex` covers the pair (`input`, `rule`),
 * shared by admission, the audit and `portal test` (through the RuleSet).
 * `template` is the pod template's place when the rule's verdict is a Pod
 * rule's check of a workload's template. Returns `'covers'` or why not. Pure
 * and bounded: every check is linear in the exception and the object, the
 * cheap and discriminating ones first, and CEL runs last under its limits.
 */
export function judge(
  ex: CompiledException,
  rule: RuleRef,
  input: EvaluationInput,
  template: { path: readonly string[]; prefix: string } | undefined,
  ctx: CoverageContext,
): 'covers' | Miss {
  return namesRule(ex, rule) ? judgeObject(ex, input, template, ctx) : 'rule';
}

/**
 * The part of {@link judge} that does not depend on the rule: whether the
 * exception is in force and selects the object. A caller judging several
 * rules of one input may keep its answer per exception (and template).
 */
export function judgeObject(
  ex: CompiledException,
  input: EvaluationInput,
  template: { path: readonly string[]; prefix: string } | undefined,
  ctx: CoverageContext,
): 'covers' | Exclude<Miss, 'rule'> {
  if (ex.expiresAt !== undefined && ctx.now >= ex.expiresAt) return 'expired';
  if (ctx.maxLifetimeMs !== undefined && lifetimeProblem(ex, ctx.maxLifetimeMs, ctx.now) !== undefined) return 'lifetime';

  // Scope: who may exempt what.
  const isNamespace = input.kind.group === '' && input.kind.kind === 'Namespace';
  if (!ex.privileged) {
    if (input.namespace === '' || isNamespace) return 'cluster-scoped';
    if (input.namespace !== ex.namespace) return 'other-namespace';
  }

  if (!kindCovered(ex, input, template !== undefined)) return 'kind';
  if (ex.operations && input.operation !== 'AUDIT' && !ex.operations.has(input.operation)) return 'operation';
  if (ex.names.length > 0 && !nameMatches(ex.names, input)) return 'name';
  const nsName = isNamespace ? input.name : input.namespace;
  if (nsName !== '') {
    if (ex.namespaces.length > 0 && !anyNamespaceGlobMatches(ex.namespaces, nsName)) return 'namespaces';
    if (ex.excludedNamespaces.length > 0 && anyNamespaceGlobMatches(ex.excludedNamespaces, nsName)) return 'excluded-namespaces';
    if (ex.namespaceSelector) {
      const labels = input.namespaceLabels ?? (isNamespace ? labelsOf(input.object ?? input.oldObject) : undefined);
      if (labels === undefined) return 'namespace-labels-unknown';
      if (!selectorMatches(ex.namespaceSelector, labels)) return 'namespace-selector';
    }
  } else if (ex.namespaces.length > 0 || ex.namespaceSelector) {
    // As for rules: namespace criteria do not apply to cluster-scoped objects, so they cannot be met.
    return 'namespace-criteria';
  }
  if (ex.objectSelector) {
    const ok =
      (input.object !== null && selectorMatches(ex.objectSelector, labelsOf(input.object))) ||
      (input.oldObject !== null && selectorMatches(ex.objectSelector, labelsOf(input.oldObject)));
    if (!ok) return 'object-selector';
  }
  if (ex.conditions) {
    if (ctx.deadline && ctx.deadline.now() > ctx.deadline.deadline) return 'deadline';
    // Its own budget: an exception's CEL neither eats nor depends on the rules' per-request budget.
    const out = evaluateComposition(ex.conditions, activationFor(input, template), newBudget());
    if (out.matched === false) return { condition: out.condition };
    if (out.matched === 'error') return { condition: out.condition, error: out.message };
  }
  return 'covers';
}

/** {@link judge}, with the reason in words (for tests, tools, messages). */
export function exceptionCovers(
  ex: CompiledException,
  rule: RuleRef,
  input: EvaluationInput,
  template: { path: readonly string[]; prefix: string } | undefined,
  ctx: CoverageContext,
): Coverage {
  const j = judge(ex, rule, input, template, ctx);
  if (j === 'covers') return { covers: true };
  const nsName = input.kind.group === '' && input.kind.kind === 'Namespace' ? input.name : input.namespace;
  let why: string;
  if (typeof j === 'object') why = j.error === undefined ? `matchCondition "${j.condition}" is false` : `matchCondition "${j.condition}" failed: ${j.error}`;
  else {
    switch (j) {
      case 'rule': why = 'it does not name this rule'; break;
      case 'expired': why = `it expired at ${new Date(ex.expiresAt as number).toISOString()}`; break;
      case 'lifetime': why = `it is refused: ${lifetimeProblem(ex, ctx.maxLifetimeMs, ctx.now) ?? ''}`; break;
      case 'cluster-scoped': why = 'a cluster-scoped object is exempted only by an exception in one of --exception-namespaces'; break;
      case 'other-namespace': why = `an exception in namespace ${ex.namespace} exempts only objects in ${ex.namespace}`; break;
      case 'kind': why = `its match.kinds do not cover ${input.kind.kind}${input.subResource ? `/${input.subResource}` : ''}`; break;
      case 'operation': why = `operation ${input.operation} is not in its match.operations`; break;
      case 'name': why = 'the name is not in its match.names'; break;
      case 'namespaces': why = `namespace ${nsName} is not in its match.namespaces`; break;
      case 'excluded-namespaces': why = `namespace ${nsName} is in its match.excludedNamespaces`; break;
      case 'namespace-labels-unknown': why = `the labels of namespace ${nsName} are unknown, so its match.namespaceSelector cannot be decided`; break;
      case 'namespace-selector': why = `namespace ${nsName} does not match its match.namespaceSelector`; break;
      case 'namespace-criteria': why = 'its namespace criteria cannot match a cluster-scoped object'; break;
      case 'object-selector': why = 'the object does not match its match.objectSelector'; break;
      case 'deadline': why = 'the evaluation time budget ran out before its matchConditions ran'; break;
    }
  }
  return { covers: false, why };
}
