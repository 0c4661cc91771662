/**
 * The evaluation's vocabulary (evaluator.ts): its time budget, the verdicts it
 * builds for a rule, the reasons of `error` verdicts, and the messages that
 * name schema violations.
 */
import type { RuleEntry } from './rule-entry.ts';
import type { EvaluationInput, KubeObject, RuleError, RuleVerdict, SchemaViolation, Verdict } from './types.ts';

/**
 * A bound on the time one evaluation may take. JavaScript cannot preempt
 * synchronous code, so the bound is cooperative: the deadline is checked
 * before each rule's schema runs and before each regular expression test
 * inside it (re2.ts). Past it, every remaining matched rule gets an `error`
 * verdict, handled by the rule's failurePolicy and enforcement like every `error`. An evaluation
 * therefore ends at most one regex test (bounded by re2.ts's MAX_TEST_COST)
 * or one regex-free stretch of ajv code (linear in the object, which the
 * admission body limit bounds) after the deadline.
 */
export interface EvaluationBudget {
  /** No rule or regex test starts after this instant (clock of `now`). */
  deadline: number;
  /** Monotonic clock, in milliseconds (performance.now in production). */
  now: () => number;
  /** The budget's length, for the message. */
  ms: number;
  /**
   * Rules (RuleSet keys) whose evaluation already passed the deadline once
   * and was abandoned (a worker running it was replaced, adr/0013): they give
   * `error` without running again.
   */
  abandoned?: ReadonlySet<string> | undefined;
  /**
   * Asked before each rule runs: a message when evaluating this rule on this
   * input exhausted an evaluation thread's memory before (adr/0018); the
   * rule then gives `error` with it, without running.
   */
  poisoned?: ((key: string, input: EvaluationInput) => string | undefined) | undefined;
  /**
   * Runs the first-use compile of a rule version (an evaluation thread's
   * copy, rule-code.ts RuleCode): the pool does not count that time against
   * this budget (it moves `deadline` later by it, within the request's own
   * bound), and lets the main thread know a compile is running. Absent: the
   * compile simply runs.
   */
  compiling?: (<T>(budget: EvaluationBudget, compile: () => T) => T) | undefined;
  /** Told the key of each rule just before its CEL and schema run (the pool records it, to know which rule was running if the deadline passes). */
  onRule?: ((key: string) => void) | undefined;
  /** Admission only: told each applying rule's result and how long it ran (the workers' per-rule metrics). */
  results?: RuleResultSink | undefined;
}

/**
 * Sees each rule that applies to an admission request: its result (index in
 * `pass, fail, warn, error, skip`; skip: an exemption) and the seconds its
 * CEL and schema took (-1: not timed). Must not throw.
 */
export interface RuleResultSink {
  record(rule: RuleEntry, result: number, seconds: number): void;
}

export const PASS = 0;
export const RESULT_OF: Readonly<Record<string, number>> = { pass: 0, fail: 1, warn: 2, error: 3, skip: 4 };

/** The message of a rule whose evaluation passed the deadline and was abandoned. */
export function abandonedMessage(ms: number): string {
  return `the evaluation deadline (${ms} ms) passed while it ran; it was abandoned`;
}

/** How many schema errors a message shows. */
export const MESSAGE_VIOLATIONS = 3;

export function labelsOf(obj: KubeObject | null): Record<string, string> | undefined {
  const labels = obj?.metadata?.labels;
  return labels !== null && typeof labels === 'object' ? labels : undefined;
}

export function verdict(entry: RuleEntry, result: Verdict, message: string, violations: SchemaViolation[] = []): RuleVerdict {
  return {
    rule: entry.display,
    ruleKind: entry.ruleKind,
    enforcement: entry.enforcement,
    failurePolicy: entry.failurePolicy,
    severity: entry.severity,
    category: entry.category,
    result,
    message,
    violations,
  };
}

export function skip(entry: RuleEntry, why: string): RuleVerdict {
  return verdict(entry, 'skip', `${entry.display}: skipped: ${why}`);
}

export function errorVerdict(entry: RuleEntry, why: string, error: RuleError): RuleVerdict {
  const v = verdict(entry, 'error', `rule ${entry.display} could not be evaluated: ${why}`);
  v.error = error;
  return v;
}

export const UNDECIDABLE: RuleError = Object.freeze({ reason: 'Undecidable' });
export const DEADLINE: RuleError = Object.freeze({ reason: 'Deadline' });
export const OUT_OF_MEMORY: RuleError = Object.freeze({ reason: 'OutOfMemory' });
export const COMPILE_ERROR: RuleError = Object.freeze({ reason: 'CompileError' });
export const SCHEMA_COST: RuleError = Object.freeze({ reason: 'CostExceeded', field: 'spec.validate.schema' });
export const SCHEMA_ERROR: RuleError = Object.freeze({ reason: 'EvaluationError', field: 'spec.validate.schema' });

/** `rule: message [path: error, ...]` with the first MESSAGE_VIOLATIONS errors. */
export function violationMessage(display: string, ruleMessage: string, violations: readonly SchemaViolation[]): string {
  // CEL violations of a Pod itself have no path (the expression is about the whole object).
  const shown = violations.slice(0, MESSAGE_VIOLATIONS).map((v) => (v.path ? `${v.path}: ${v.message}` : v.message));
  const more = violations.length - shown.length;
  if (more > 0) shown.push(`and ${more} more`);
  const head = `${display}: ${ruleMessage || 'the object violates this rule'}`;
  return shown.length ? `${head} [${shown.join(', ')}]` : head;
}
