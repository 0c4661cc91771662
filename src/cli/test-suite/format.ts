/**
 * The suite format, `cli.portal.dev/v1alpha1` `Test` (docs/design.md §9;
 * schemas/portal-test.schema.json is its JSON Schema; docs/testing-policies.md
 * documents it): the shapes after validation, and what the runner reports.
 */
import type { Verdict } from '../../policy/index.ts';
import type { UserInfo } from '../offline/evaluator.ts';

export const SUITE_API_VERSION = 'cli.portal.dev/v1alpha1';
export const SUITE_KIND = 'Test';
/** What directory discovery picks up (explicitly named files may be called anything); manifest walks skip them. */
export { SUITE_FILE } from '../../config/manifests.ts';

export interface NamespaceSpec {
  name: string;
  labels?: Record<string, string>;
}

/** One entry of `results`: an expectation for each named resource. */
export interface ResultSpec {
  rule: string;
  binding?: string;
  kind: string;
  namespace?: string;
  resources: string[];
  result: Verdict;
  messageContains?: string;
}

/** A suite as written, once it matched the JSON Schema. */
export interface SuiteSpec {
  apiVersion: typeof SUITE_API_VERSION;
  kind: typeof SUITE_KIND;
  metadata?: { name?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  policies: string[];
  resources: string[];
  exceptions?: string[];
  namespaces?: (string | NamespaceSpec)[];
  now?: string;
  operation?: 'CREATE' | 'UPDATE' | 'DELETE';
  oldResources?: string[];
  userInfo?: UserInfo;
  results: ResultSpec[];
}

/** A place in a suite file, 1-based. */
export interface Position {
  line: number;
  column: number;
}

/** Bad input: the suite cannot be run as written (exit 2). */
export interface SuiteProblem {
  file: string;
  position?: Position;
  message: string;
}

/** `file:line:column: message`, as compilers print it, so editors and CI logs link to the place. */
export function formatProblem(p: SuiteProblem): string {
  return `${p.file}${p.position ? `:${p.position.line}:${p.position.column}` : ''}: ${p.message}`;
}

/** One expectation (one resource of a `results` entry) and what it got. */
export interface ExpectationOutcome {
  /** Line of the `results` entry (of the resource's name within it). */
  line: number;
  rule: string;
  binding?: string;
  kind: string;
  namespace: string;
  name: string;
  expected: Verdict;
  messageContains?: string;
  /** `none`: the rule gave no verdict on this resource (it does not apply to the kind, or no binding). */
  got: Verdict | 'none';
  message: string;
  ok: boolean;
}

/** A verdict that no expectation names. */
export interface UnlistedVerdict {
  rule: string;
  binding?: string;
  kind: string;
  namespace: string;
  name: string;
  result: Verdict;
  message: string;
}

export interface SuiteOutcome {
  file: string;
  name: string;
  /** Bad input; when there are any, nothing else was evaluated. */
  problems: SuiteProblem[];
  expectations: ExpectationOutcome[];
  unlisted: UnlistedVerdict[];
  /** Wall time of the suite, in seconds (JUnit's time). */
  seconds: number;
}
