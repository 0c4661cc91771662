/**
 * The evaluator: a pure function from (rules, request or object) to per-rule
 * verdicts. Shared by admission, audit and `portal test`.
 *
 * Matching decisions (documented in docs and tested in test/policy):
 * - Kinds: a rule whose kinds do not cover the input gives no verdict at all.
 *   A PortalRule gives no verdict outside its own namespace (it does not apply
 *   there), nor for cluster-scoped objects.
 * - Everything else that excludes the input gives `skip` with the reason:
 *   operation, subresource, namespaces/excludedNamespaces, selectors.
 * - Cluster-scoped objects (namespace ""): namespace globs and
 *   namespaceSelector do not apply, except to a Namespace itself, where the
 *   globs see its name and the selector its own labels (like kube-apiserver).
 * - Pod templates: only rules that name `Pod` explicitly (not kind "*") check
 *   workload templates; a rule that names the workload kind itself validates
 *   the workload directly instead.
 * - Exceptions: a rule that applies to the input (every filter above passed)
 *   and that a PortalException covers (exceptions.ts, exceptionCovers) gives
 *   `skip` naming the exception, before it runs.
 * - Pod Security version: a rule whose schema uses `minPodSecurityVersion`
 *   is evaluated at the namespace's `pod-security.kubernetes.io/enforce-version`
 *   label, else its `spec.podSecurity.version`, else latest; an invalid label
 *   means latest (as in PSA), unknown namespace labels give `error`.
 */
import { anyNamespaceGlobMatches } from './namespace-glob.ts';
import { selectorMatches } from './label-selector.ts';
import { candidatesFor, type Candidate } from './candidates.ts';
import { decide, type AdmissionDecision } from './decision.ts';
import { templatePod } from './pod-templates.ts';
import { LATEST, POD_SECURITY_VERSION_LABEL, resolvePodSecurityVersion } from './pod-security-version.ts';
import { evaluateCelRule } from './cel-rule.ts';
import { Exemptions, exemptedVerdict } from './exemption.ts';
import { newBudget, type Budget } from './cel/index.ts';
import { RegexLimitError } from './re2.ts';
import type { CompiledChecks } from './rule-code.ts';
import type { RuleEntry } from './rule-entry.ts';
import type { RuleSet } from './rule-set.ts';
import type { EvaluationInput, RuleVerdict, SchemaViolation } from './types.ts';
import {
  abandonedMessage,
  COMPILE_ERROR,
  DEADLINE,
  errorVerdict,
  labelsOf,
  OUT_OF_MEMORY,
  PASS,
  RESULT_OF,
  SCHEMA_COST,
  SCHEMA_ERROR,
  skip,
  UNDECIDABLE,
  verdict,
  violationMessage,
  type EvaluationBudget,
  type RuleResultSink,
} from './verdicts.ts';

/** The rule applies to the input (its match selects it): evaluate it. */
const APPLIES: unique symbol = Symbol('applies');
/** With `all` false: the rule's CEL matchConditions left the input out (no result), or it passed (no verdict built). */
const NOT_SELECTED: unique symbol = Symbol('not selected');
const PASSED: unique symbol = Symbol('passed');

/**
 * Whether a candidate's match selects the input: {@link APPLIES}, or the
 * verdict to give instead (a skip saying why, undefined when `all` is false,
 * or an error when the match cannot be decided).
 */
function matchOutcome(c: Candidate, input: EvaluationInput, all: boolean): RuleVerdict | undefined | typeof APPLIES {
  const { entry } = c;
  const m = entry.match;
  const sub = input.subResource ?? '';

  // PortalRule scope: its own namespace only (no verdict elsewhere).
  if (entry.ruleNamespace !== undefined && input.namespace !== entry.ruleNamespace) return undefined;

  const templatePath = c.templatePath;
  if (sub !== '') {
    if (templatePath) {
      return all ? skip(entry, `the ${sub} subresource of a ${input.kind.kind} is not checked for pod templates`) : undefined;
    }
    if (!c.subresources.has('*') && !c.subresources.has(sub)) {
      return all ? skip(entry, `the ${sub} subresource is not named in match.kinds`) : undefined;
    }
  }

  if (input.operation !== 'AUDIT' && !m.operations.has(input.operation)) {
    return all ? skip(entry, `operation ${input.operation} is not matched`) : undefined;
  }

  const isNamespace = input.kind.group === '' && input.kind.kind === 'Namespace';
  const nsName = isNamespace ? input.name : input.namespace;
  if (nsName !== '') {
    if (m.namespaces.length > 0 && !anyNamespaceGlobMatches(m.namespaces, nsName)) {
      return all ? skip(entry, `namespace ${nsName} is not in match.namespaces`) : undefined;
    }
    if (m.excludedNamespaces.length > 0 && anyNamespaceGlobMatches(m.excludedNamespaces, nsName)) {
      return all ? skip(entry, `namespace ${nsName} is excluded`) : undefined;
    }
    if (m.namespaceSelector) {
      const labels = input.namespaceLabels ?? (isNamespace ? labelsOf(input.object ?? input.oldObject) : undefined);
      if (labels === undefined) return errorVerdict(entry, `the labels of namespace ${nsName} are unknown, so namespaceSelector cannot be decided`, UNDECIDABLE);
      if (!selectorMatches(m.namespaceSelector, labels)) return all ? skip(entry, `namespace ${nsName} does not match namespaceSelector`) : undefined;
    }
  }
  if (m.objectSelector) {
    const ok =
      (input.object !== null && selectorMatches(m.objectSelector, labelsOf(input.object))) ||
      (input.oldObject !== null && selectorMatches(m.objectSelector, labelsOf(input.oldObject)));
    if (!ok) return all ? skip(entry, 'the object does not match objectSelector') : undefined;
  }

  return APPLIES;
}

/**
 * The verdict of one candidate rule. With `all` false (admission), the
 * verdicts decide() ignores, pass and skip, are not built: PASSED or
 * NOT_SELECTED (a false matchCondition), or undefined when the match leaves
 * the input out.
 */
function evaluateOne(
  c: Candidate,
  input: EvaluationInput,
  all: boolean,
  celBudget: () => Budget,
  timeBudget: EvaluationBudget | undefined,
  exemptions: Exemptions | undefined,
): RuleVerdict | undefined | typeof NOT_SELECTED | typeof PASSED {
  const unmatched = matchOutcome(c, input, all);
  if (unmatched !== APPLIES) return unmatched;
  return applyRule(c, input, all, celBudget, timeBudget, exemptions);
}

/** A candidate whose match selects the input: its exemption, or its CEL and schema. */
function applyRule(
  c: Candidate,
  input: EvaluationInput,
  all: boolean,
  celBudget: () => Budget,
  timeBudget: EvaluationBudget | undefined,
  exemptions: Exemptions | undefined,
): RuleVerdict | typeof NOT_SELECTED | typeof PASSED {
  const { entry } = c;
  const templatePath = c.templatePath;
  // The rule applies to this object: a PortalException may exempt it. Built
  // on the admission path too, since the exemption is reported (the audit
  // annotation) even though a skip decides nothing.
  if (exemptions) {
    const ex = exemptions.find(entry.exceptionRef, templatePath ? { path: templatePath, prefix: c.templatePrefix } : undefined);
    if (ex) return exemptedVerdict(verdict(entry, 'skip', ''), ex);
  }

  const code = entry.code;
  if (code === undefined) return errorVerdict(entry, entry.failure, COMPILE_ERROR);
  let version = LATEST;
  let versionNote = '';
  if (entry.podSecurityVersion !== undefined) {
    const resolved = podSecurityVersionOf(entry, entry.podSecurityVersion, input);
    if ('result' in resolved) return resolved;
    ({ version, note: versionNote } = resolved);
  }
  const target = input.operation === 'DELETE' ? input.oldObject : (input.object ?? input.oldObject);
  if (target === null || typeof target !== 'object') {
    return errorVerdict(entry, `the ${input.operation} request carries no object to validate`, UNDECIDABLE);
  }
  if (timeBudget !== undefined) {
    const poisoned = timeBudget.poisoned?.(entry.key, input);
    if (poisoned !== undefined) return errorVerdict(entry, poisoned, OUT_OF_MEMORY);
    if (timeBudget.abandoned?.has(entry.key)) return errorVerdict(entry, abandonedMessage(timeBudget.ms), DEADLINE);
    if (timeBudget.now() > timeBudget.deadline) {
      return errorVerdict(entry, `the evaluation time budget (${timeBudget.ms} ms) ran out before this rule ran`, DEADLINE);
    }
    timeBudget.onRule?.(entry.key);
  }
  // After onRule: a thread that dies compiling is known to have been on this rule.
  let checks: CompiledChecks;
  try {
    checks = code.pending && timeBudget?.compiling !== undefined ? timeBudget.compiling(timeBudget, () => code.checks()) : code.checks();
  } catch (err) {
    return errorVerdict(entry, err instanceof Error ? err.message : String(err), COMPILE_ERROR);
  }
  // CEL first: a false matchCondition skips the whole rule, schema included.
  let celViolations: SchemaViolation[] = [];
  if (checks.cel) {
    const r = evaluateCelRule(checks.cel, input, templatePath ? { path: templatePath, prefix: c.templatePrefix } : undefined, celBudget());
    if (r.kind === 'skip') return all ? skip(entry, r.why) : NOT_SELECTED;
    // An expression that errs or exceeds its cost gives `error`: its
    // failurePolicy and enforcement decide what that does (decision.ts).
    if (r.kind === 'error') return errorVerdict(entry, r.why, { reason: r.cost ? 'CostExceeded' : 'EvaluationError', field: r.field });
    celViolations = r.violations;
  }
  let violations: SchemaViolation[];
  try {
    // No closure here: this runs once per matched rule and request.
    const object = templatePath ? templatePod(target, templatePath) : target;
    const prefix = templatePath ? c.templatePrefix : '';
    // Regex work inside the schema reads the same deadline (re2.ts, through the validator).
    violations = checks.validate(object, prefix, version, timeBudget);
  } catch (err) {
    if (err instanceof RegexLimitError) return errorVerdict(entry, err.message, err.deadline ? DEADLINE : SCHEMA_COST);
    // A schema can still blow up on a hostile object (e.g. a recursive $ref
    // meeting a very deep document). Only this rule is undecidable: it gives
    // an `error` verdict naming the rule, handled like every rule error.
    return errorVerdict(entry, `its schema failed on this object (${err instanceof Error ? err.message : String(err)})`, SCHEMA_ERROR);
  }
  if (celViolations.length > 0) violations = violations.length > 0 ? [...violations, ...celViolations] : celViolations;
  if (violations.length === 0) return all ? verdict(entry, 'pass', c.passMessage) : PASSED;
  return verdict(
    entry,
    entry.enforcement === 'Deny' ? 'fail' : 'warn',
    violationMessage(entry.display, versionNote ? `${entry.message || 'the object violates this rule'} (${versionNote})` : entry.message, violations),
    violations,
  );
}

/** The Pod Security version a rule's schema is checked at (FACTS-pss §4), from the namespace's label; an `error` verdict when the labels are unknown. */
function podSecurityVersionOf(entry: Candidate['entry'], pinned: string, input: EvaluationInput): ReturnType<typeof resolvePodSecurityVersion> | RuleVerdict {
  const isNamespace = input.kind.group === '' && input.kind.kind === 'Namespace';
  let labels = input.namespaceLabels;
  if (labels === undefined && isNamespace) labels = labelsOf(input.object ?? input.oldObject) ?? {};
  const nsName = isNamespace ? input.name : input.namespace;
  if (labels === undefined && nsName !== '') {
    // The label could pin any version, and versions relax as well as
    // tighten checks: undecidable, so fail closed like namespaceSelector.
    return errorVerdict(entry, `the labels of namespace ${nsName} are unknown, so its ${POD_SECURITY_VERSION_LABEL} cannot be read`, UNDECIDABLE);
  }
  return resolvePodSecurityVersion(pinned, labels);
}

/**
 * The one evaluation loop: the verdicts of the candidate rules, in rule-key
 * order; undefined when there are none. With `all` false (admission), the
 * verdicts decide() ignores, pass and skip, are not built: the fast path's
 * property. `onError` sees each `error` verdict. evaluate() and
 * decideAdmission() are this loop; a parameter rather than a visitor
 * callback, so the request path allocates no closure per call.
 */
function verdictsOf(rules: RuleSet, input: EvaluationInput, all: boolean, budget: EvaluationBudget | undefined, onError?: (verdict: RuleVerdict) => void): RuleVerdict[] | undefined {
  let out: RuleVerdict[] | undefined;
  // One CEL cost budget per request, shared by every CEL rule (as the API server does).
  let celBudget: Budget | undefined;
  const requestBudget = (): Budget => (celBudget ??= newBudget());
  const exemptions = rules.mayExempt(input.namespace) ? new Exemptions(rules, input, budget) : undefined;
  // Per-rule results and times (rule-stats.ts), when the caller collects them: admission in a worker.
  const timer = !all && budget?.results !== undefined ? new RuleTimer(budget, budget.results) : undefined;
  for (const c of candidatesFor(rules, input.kind.group, input.kind.kind)) {
    const v = timer !== undefined ? timer.run(c, input, requestBudget, exemptions) : evaluateOne(c, input, all, requestBudget, budget, exemptions);
    if (typeof v === 'object') {
      (out ??= []).push(v);
      if (onError !== undefined && v.result === 'error') onError(v);
    }
  }
  timer?.finish();
  return out;
}

/**
 * Per-rule verdicts for one input, in rule-key order. Pure: no I/O, the rule
 * set is read, never changed.
 */
export function evaluate(rules: RuleSet, input: EvaluationInput, budget?: EvaluationBudget): RuleVerdict[] {
  return verdictsOf(rules, input, true, budget) ?? [];
}

/**
 * The admission answer for one request: the same as
 * `decide(evaluate(rules, input))`, without building the pass and skip
 * verdicts that decide() ignores (the common case on the request path).
 * `onError` sees each `error` verdict (the caller counts and reports them;
 * it must not throw).
 */
export function decideAdmission(rules: RuleSet, input: EvaluationInput, budget?: EvaluationBudget, onError?: (verdict: RuleVerdict) => void): AdmissionDecision {
  return decide(verdictsOf(rules, input, false, budget, onError) ?? []);
}

/**
 * evaluateOne on the admission path with a sink: a rule that applies gets
 * its result and time (a match or matchCondition that leaves the input out:
 * none). Timed from the clock reads the deadline checks already make (a read
 * costs ~0.3 µs on some VMs): from the rule's check to the first read after
 * it returns (the next rule's check, or `finish`). A result reached before
 * the check (exemption, never compiled, undecidable match) is not timed.
 */
class RuleTimer {
  readonly budget: EvaluationBudget;
  readonly #sink: RuleResultSink;
  readonly #clock: () => number;
  /** The first clock read since the current rule started; NaN before it. */
  #first = Number.NaN;
  #pending: { entry: RuleEntry; result: number; start: number } | undefined;

  constructor(base: EvaluationBudget, sink: RuleResultSink) {
    this.#sink = sink;
    this.#clock = base.now;
    this.budget = { ...base, now: () => this.#read() };
  }

  run(c: Candidate, input: EvaluationInput, celBudget: () => Budget, exemptions: Exemptions | undefined): RuleVerdict | undefined {
    const unmatched = matchOutcome(c, input, false);
    if (unmatched !== APPLIES) {
      if (unmatched !== undefined) this.#sink.record(c.entry, RESULT_OF[unmatched.result] ?? PASS, -1);
      return unmatched;
    }
    this.#first = Number.NaN;
    const v = applyRule(c, input, false, celBudget, this.budget, exemptions);
    if (v === NOT_SELECTED) return undefined;
    const result = v === PASSED ? PASS : (RESULT_OF[v.result] ?? PASS);
    if (Number.isNaN(this.#first) || (v !== PASSED && v.exception !== undefined)) this.#sink.record(c.entry, result, -1);
    else this.#pending = { entry: c.entry, result, start: this.#first };
    return v === PASSED ? undefined : v;
  }

  /** The last rule's end: one clock read per request. */
  finish(): void {
    if (this.#pending !== undefined) this.#settle(this.#clock());
  }

  #read(): number {
    const t = this.#clock();
    if (Number.isNaN(this.#first)) {
      this.#first = t;
      if (this.#pending !== undefined) this.#settle(t);
    }
    return t;
  }

  #settle(end: number): void {
    const p = this.#pending!;
    this.#pending = undefined;
    this.#sink.record(p.entry, p.result, Math.max(0, end - p.start) / 1000);
  }
}
