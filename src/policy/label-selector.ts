/**
 * metav1.LabelSelector matching and validation, with the semantics of
 * k8s.io/apimachinery `LabelSelectorAsSelector`: matchLabels and every
 * matchExpression must hold (AND); an empty selector matches everything;
 * `NotIn` and `DoesNotExist` match objects without the label.
 *
 * The one implementation of label matching (issue 10 item 4): the engine
 * (namespaceSelector / objectSelector of rules), the embedded API server's
 * `?labelSelector=` and PodDisruptionBudgets, and its webhook dispatch all
 * decide a requirement with {@link requirementMatches}.
 */
import type { LabelSelector } from './types.ts';

type Labels = Readonly<Record<string, string>> | undefined;

export function isEmptySelector(selector: LabelSelector | undefined): boolean {
  if (!selector) return true;
  const labels = selector.matchLabels ? Object.keys(selector.matchLabels).length : 0;
  const exprs = selector.matchExpressions?.length ?? 0;
  return labels === 0 && exprs === 0;
}

/** One requirement of a selector (a matchLabels entry is `In [value]`). */
export interface LabelRequirement {
  key: string;
  operator: string;
  values?: readonly string[] | undefined;
}

/** Does one requirement hold for `labels`? An operator it does not know never holds. */
export function requirementMatches(req: LabelRequirement, labels: Labels): boolean {
  const present = labels !== undefined && Object.hasOwn(labels, req.key);
  const values = req.values ?? [];
  switch (req.operator) {
    case 'In':
      return present && values.includes(labels[req.key]!);
    case 'NotIn':
      return !present || !values.includes(labels[req.key]!);
    case 'Exists':
      return present;
    case 'DoesNotExist':
      return !present;
    default:
      // Unknown operators never reach the engine (validateRule rejects them);
      // a selector we cannot interpret matches nothing rather than everything.
      return false;
  }
}

/** Every requirement holds (AND); no requirement matches everything. */
export function requirementsMatch(reqs: Iterable<LabelRequirement>, labels: Labels): boolean {
  for (const req of reqs) if (!requirementMatches(req, labels)) return false;
  return true;
}

/** A metav1.LabelSelector as requirements: matchLabels entries first, then matchExpressions. */
export function selectorRequirements(selector: LabelSelector): LabelRequirement[] {
  return [...Object.entries(selector.matchLabels ?? {}).map(([key, value]) => ({ key, operator: 'In', values: [value] })), ...(selector.matchExpressions ?? [])];
}

export function selectorMatches(selector: LabelSelector, labels: Labels): boolean {
  // Without building the requirement list: this runs for every admission request a selector rule sees.
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) if (!requirementMatches({ key, operator: 'In', values: [value] }, labels)) return false;
  return requirementsMatch(selector.matchExpressions ?? [], labels);
}

// Label keys: optional DNS-1123 subdomain prefix (<= 253) + "/" + name (<= 63).
const LABEL_NAME = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
// Label values: empty, or <= 63 characters of the name syntax.
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

/** Problems with a label key, following apimachinery's IsQualifiedName. */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  const prefix = slash === -1 ? undefined : key.slice(0, slash);
  const name = slash === -1 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) {
    return `label key "${key}": the prefix before "/" must be a DNS subdomain (e.g. "example.com")`;
  }
  if (!LABEL_NAME.test(name)) {
    return `label key "${key}": the name must be 1-63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric`;
  }
  return undefined;
}

export function labelValueProblem(value: string): string | undefined {
  return LABEL_VALUE.test(value)
    ? undefined
    : `label value "${value}": must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric (or empty)`;
}

/** Every problem with a selector, each prefixed with `where`. */
export function selectorProblems(selector: LabelSelector, where: string): string[] {
  const problems: string[] = [];
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    const k = labelKeyProblem(key);
    if (k) problems.push(`${where}.matchLabels: ${k}`);
    const v = labelValueProblem(value);
    if (v) problems.push(`${where}.matchLabels["${key}"]: ${v}`);
  }
  (selector.matchExpressions ?? []).forEach((req, i) => {
    const at = `${where}.matchExpressions[${i}]`;
    const k = labelKeyProblem(req.key);
    if (k) problems.push(`${at}: ${k}`);
    const values = req.values ?? [];
    if ((req.operator === 'In' || req.operator === 'NotIn') && values.length === 0) {
      problems.push(`${at}: operator ${req.operator} needs at least one entry in values`);
    }
    if ((req.operator === 'Exists' || req.operator === 'DoesNotExist') && values.length > 0) {
      problems.push(`${at}: operator ${req.operator} takes no values; remove them`);
    }
    for (const value of values) {
      const v = labelValueProblem(value);
      if (v) problems.push(`${at}.values: ${v}`);
    }
  });
  return problems;
}
