/**
 * What kube-apiserver rejects in a ValidatingAdmissionPolicy or a
 * ValidatingAdmissionPolicyBinding (a port of the checks in
 * `pkg/apis/admissionregistration/validation`), with the API server's field
 * error wording (`spec.x: Required value`, `Unsupported value: ...`,
 * `Duplicate value: ...`, `Invalid value: ...: why`, `Forbidden: why`), so the
 * embedded API server answers 422 with the same causes and `portal test`
 * reports the same problems before anything is installed.
 *
 * Expressions are compiled here when a compile function is given (the API
 * server rejects a policy whose expressions do not compile; type checking
 * against the object's schema is only a warning upstream and is not done).
 */
import { isObject } from '../../util/is-object.ts';
import { labelKeyProblem, selectorProblems } from '../label-selector.ts';
import type { LabelSelector } from '../types.ts';
import {
  VAP_API_VERSION,
  VAP_BINDING_KIND,
  VAP_KIND,
  type MatchResources,
  type NamedRuleWithOperations,
  type ValidatingAdmissionPolicy,
  type ValidatingAdmissionPolicyBinding,
} from './types.ts';

/** One field error, as kube formats them: `path: Type: detail`. */
export interface FieldError {
  field: string;
  /** kube's CauseType: FieldValueRequired, FieldValueInvalid, ... */
  reason: 'FieldValueRequired' | 'FieldValueInvalid' | 'FieldValueNotSupported' | 'FieldValueDuplicate' | 'FieldValueForbidden' | 'FieldValueTooMany';
  message: string;
}

export type VapValidation<T> = { ok: true; value: T } | { ok: false; errors: FieldError[] };

/** Compiles an expression; returns the compile error text, or undefined when it compiles. */
export type ExpressionCheck = (expression: string, kind: ExpressionKind) => string | undefined;
export type ExpressionKind = 'validation' | 'messageExpression' | 'matchCondition' | 'variable' | 'auditAnnotation';

export function formatFieldError(e: FieldError): string {
  return `${e.field}: ${e.message}`;
}

const json = (v: unknown): string => (typeof v === 'string' ? JSON.stringify(v) : JSON.stringify(v) ?? String(v));
const required = (field: string, detail = ''): FieldError => ({
  field,
  reason: 'FieldValueRequired',
  message: detail ? `Required value: ${detail}` : 'Required value',
});
const invalid = (field: string, value: unknown, detail: string): FieldError => ({
  field,
  reason: 'FieldValueInvalid',
  message: `Invalid value: ${json(value)}: ${detail}`,
});
const notSupported = (field: string, value: unknown, supported: readonly string[]): FieldError => ({
  field,
  reason: 'FieldValueNotSupported',
  message: `Unsupported value: ${json(value)}: supported values: ${supported.map((s) => `"${s}"`).join(', ')}`,
});
const duplicate = (field: string, value: unknown): FieldError => ({ field, reason: 'FieldValueDuplicate', message: `Duplicate value: ${json(value)}` });
const forbidden = (field: string, detail: string): FieldError => ({ field, reason: 'FieldValueForbidden', message: `Forbidden: ${detail}` });

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const CEL_IDENTIFIER = /^[_a-zA-Z][_a-zA-Z0-9]*$/;
/** CEL reserved words cannot name a variable (they would not parse as `variables.NAME`). */
const CEL_RESERVED: ReadonlySet<string> = new Set([
  'true', 'false', 'null', 'in', 'as', 'break', 'const', 'continue', 'else', 'for', 'function', 'if', 'import', 'let', 'loop',
  'package', 'namespace', 'return', 'var', 'void', 'while',
]);
const OPERATIONS = ['*', 'CONNECT', 'CREATE', 'DELETE', 'UPDATE'] as const;
const SCOPES = ['*', 'Cluster', 'Namespaced'] as const;
const MATCH_POLICIES = ['Equivalent', 'Exact'] as const;
const FAILURE_POLICIES = ['Fail', 'Ignore'] as const;
const ACTIONS = ['Audit', 'Deny', 'Warn'] as const;
const NOT_FOUND_ACTIONS = ['Allow', 'Deny'] as const;
const REASONS = ['Forbidden', 'Invalid', 'RequestEntityTooLarge', 'Unauthorized'] as const;
/** admissionregistration's limit on matchConditions per policy. */
export const MAX_MATCH_CONDITIONS = 64;
/** kube's limit on a validation message (and a messageExpression's result). */
const MAX_MESSAGE_LENGTH = 5 * 1024;

function metadataErrors(o: Record<string, unknown>): FieldError[] {
  const meta = o['metadata'];
  if (!isObject(meta)) return [required('metadata.name', 'name or generateName is required')];
  const name = meta['name'];
  if (typeof name !== 'string' || name === '') return [required('metadata.name', 'name or generateName is required')];
  if (name.length > 253 || !DNS_SUBDOMAIN.test(name)) {
    return [invalid('metadata.name', name, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")];
  }
  if (meta['namespace'] !== undefined && meta['namespace'] !== '') {
    return [forbidden('metadata.namespace', 'not allowed on this type (cluster-scoped)')];
  }
  return [];
}

function stringList(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

/** `validateRuleWithOperations` / `validateNamedRuleWithOperations`. */
function ruleErrors(rule: unknown, at: string): FieldError[] {
  if (!isObject(rule)) return [invalid(at, rule, 'must be an object')];
  const errs: FieldError[] = [];
  const list = (key: string, star: string): string[] | undefined => {
    const v = rule[key];
    if (v === undefined || (Array.isArray(v) && v.length === 0)) {
      errs.push(required(`${at}.${key}`));
      return undefined;
    }
    if (!stringList(v)) {
      errs.push(invalid(`${at}.${key}`, v, 'must be a list of strings'));
      return undefined;
    }
    if (v.length > 1 && v.includes(star)) errs.push(invalid(`${at}.${key}`, v, `if '${star}' is present, must not specify other ${key === 'apiGroups' ? 'API groups' : key === 'apiVersions' ? 'API versions' : 'operations'}`));
    return v;
  };
  list('apiGroups', '*');
  const versions = list('apiVersions', '*');
  if (versions?.includes('')) errs.push(required(`${at}.apiVersions`, 'version must not be empty'));
  const ops = list('operations', '*');
  ops?.forEach((op, i) => {
    if (!(OPERATIONS as readonly string[]).includes(op)) errs.push(notSupported(`${at}.operations[${i}]`, op, OPERATIONS));
  });
  const resources = rule['resources'];
  if (resources === undefined || (Array.isArray(resources) && resources.length === 0)) errs.push(required(`${at}.resources`));
  else if (!stringList(resources)) errs.push(invalid(`${at}.resources`, resources, 'must be a list of strings'));
  else errs.push(...resourceErrors(resources, `${at}.resources`));
  const names = rule['resourceNames'];
  if (names !== undefined && !stringList(names)) errs.push(invalid(`${at}.resourceNames`, names, 'must be a list of strings'));
  const scope = rule['scope'];
  if (scope !== undefined && !(SCOPES as readonly unknown[]).includes(scope)) errs.push(notSupported(`${at}.scope`, scope, SCOPES));
  return errs;
}

/** kube's `validateResources`: `*` rules out other plain resources, `*\/*` other subresources, `res/*` other `res/x`. */
function resourceErrors(resources: string[], at: string): FieldError[] {
  const errs: FieldError[] = [];
  const seen = new Set<string>();
  const withSub = new Map<string, Set<string>>();
  resources.forEach((r, i) => {
    if (r === '') {
      errs.push(required(`${at}[${i}]`));
      return;
    }
    if (seen.has(r)) errs.push(duplicate(`${at}[${i}]`, r));
    seen.add(r);
    const slash = r.indexOf('/');
    const res = slash < 0 ? r : r.slice(0, slash);
    const sub = slash < 0 ? '' : r.slice(slash + 1);
    if (sub.includes('/')) errs.push(invalid(`${at}[${i}]`, r, 'resource has more than one "/"'));
    if (!withSub.has(res)) withSub.set(res, new Set());
    withSub.get(res)?.add(sub);
  });
  if (seen.has('*') && [...seen].some((r) => r !== '*' && !r.includes('/'))) {
    errs.push(invalid(at, resources, "if '*' is present, must not specify other resources without subresources"));
  }
  if (seen.has('*/*') && [...seen].some((r) => r !== '*/*' && r.includes('/'))) {
    errs.push(invalid(at, resources, "if '*/*' is present, must not specify other resources with subresources"));
  }
  for (const [res, subs] of withSub) {
    if (res !== '*' && subs.has('*') && [...subs].some((s) => s !== '*' && s !== '')) {
      errs.push(invalid(at, resources, `if '${res}/*' is present, must not specify ${res}/<subresource>`));
    }
  }
  return errs;
}

function selectorErrors(sel: unknown, at: string): FieldError[] {
  if (sel === undefined || sel === null) return [];
  if (!isObject(sel)) return [invalid(at, sel, 'must be a label selector')];
  const exprs = sel['matchExpressions'];
  if (exprs !== undefined && !Array.isArray(exprs)) return [invalid(`${at}.matchExpressions`, exprs, 'must be a list')];
  const errs: FieldError[] = [];
  (Array.isArray(exprs) ? exprs : []).forEach((e: unknown, i) => {
    const op = isObject(e) ? e['operator'] : undefined;
    if (!['In', 'NotIn', 'Exists', 'DoesNotExist'].includes(op as string)) {
      errs.push(notSupported(`${at}.matchExpressions[${i}].operator`, op, ['DoesNotExist', 'Exists', 'In', 'NotIn']));
    }
  });
  if (errs.length > 0) return errs;
  for (const p of selectorProblems(sel as LabelSelector, at)) {
    const colon = p.indexOf(': ');
    errs.push({ field: p.slice(0, colon), reason: 'FieldValueInvalid', message: `Invalid value: ${p.slice(colon + 2)}` });
  }
  return errs;
}

/** `validateMatchResources`; `requireRules` for a policy's matchConstraints. */
function matchResourcesErrors(m: unknown, at: string, requireRules: boolean): FieldError[] {
  if (m === undefined || m === null) return requireRules ? [required(at)] : [];
  if (!isObject(m)) return [invalid(at, m, 'must be an object')];
  const errs: FieldError[] = [];
  const mp = m['matchPolicy'];
  if (mp !== undefined && !(MATCH_POLICIES as readonly unknown[]).includes(mp)) errs.push(notSupported(`${at}.matchPolicy`, mp, MATCH_POLICIES));
  errs.push(...selectorErrors(m['namespaceSelector'], `${at}.namespaceSelector`));
  errs.push(...selectorErrors(m['objectSelector'], `${at}.objectSelector`));
  for (const key of ['resourceRules', 'excludeResourceRules'] as const) {
    const rules = m[key];
    if (rules === undefined) continue;
    if (!Array.isArray(rules)) {
      errs.push(invalid(`${at}.${key}`, rules, 'must be a list'));
      continue;
    }
    rules.forEach((r: unknown, i) => errs.push(...ruleErrors(r, `${at}.${key}[${i}]`)));
  }
  if (requireRules && (!Array.isArray(m['resourceRules']) || m['resourceRules'].length === 0)) {
    errs.push(required(`${at}.resourceRules`));
  }
  return errs;
}

function expressionErrors(v: unknown, at: string, kind: ExpressionKind, check: ExpressionCheck | undefined): FieldError[] {
  if (typeof v !== 'string' || v.trim() === '') return [required(at)];
  const problem = check?.(v, kind);
  return problem === undefined ? [] : [invalid(at, v, problem)];
}

function namedExpressionErrors(
  list: unknown,
  at: string,
  kind: 'matchCondition' | 'variable',
  check: ExpressionCheck | undefined,
): FieldError[] {
  if (list === undefined) return [];
  if (!Array.isArray(list)) return [invalid(at, list, 'must be a list')];
  const errs: FieldError[] = [];
  if (kind === 'matchCondition' && list.length > MAX_MATCH_CONDITIONS) {
    errs.push({ field: at, reason: 'FieldValueTooMany', message: `Too many: ${list.length}: must have at most ${MAX_MATCH_CONDITIONS} items` });
  }
  const names = new Set<string>();
  list.forEach((item: unknown, i) => {
    const here = `${at}[${i}]`;
    if (!isObject(item)) {
      errs.push(invalid(here, item, 'must be an object'));
      return;
    }
    const name = item['name'];
    if (typeof name !== 'string' || name === '') errs.push(required(`${here}.name`));
    else {
      if (kind === 'variable' && (!CEL_IDENTIFIER.test(name) || CEL_RESERVED.has(name))) {
        errs.push(invalid(`${here}.name`, name, 'name is not a valid CEL identifier'));
      }
      if (kind === 'matchCondition') {
        const p = labelKeyProblem(name);
        if (p) errs.push(invalid(`${here}.name`, name, "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
      }
      if (names.has(name)) errs.push(duplicate(`${here}.name`, name));
      names.add(name);
    }
    errs.push(...expressionErrors(item['expression'], `${here}.expression`, kind, check));
  });
  return errs;
}

export function validatePolicy(o: unknown, check?: ExpressionCheck): VapValidation<ValidatingAdmissionPolicy> {
  if (!isObject(o)) return { ok: false, errors: [invalid('', o, 'must be an object')] };
  const errs: FieldError[] = [];
  if (o['apiVersion'] !== VAP_API_VERSION) errs.push(notSupported('apiVersion', o['apiVersion'], [VAP_API_VERSION]));
  if (o['kind'] !== VAP_KIND) errs.push(notSupported('kind', o['kind'], [VAP_KIND]));
  errs.push(...metadataErrors(o));
  const spec = o['spec'];
  if (!isObject(spec)) return { ok: false, errors: [...errs, required('spec')] };

  const pk = spec['paramKind'];
  if (pk !== undefined) {
    if (!isObject(pk)) errs.push(invalid('spec.paramKind', pk, 'must be an object'));
    else {
      const av = pk['apiVersion'];
      if (typeof av !== 'string' || av === '') errs.push(required('spec.paramKind.apiVersion'));
      else if (av.split('/').length > 2 || av.endsWith('/') || av.startsWith('/')) errs.push(invalid('spec.paramKind.apiVersion', av, 'must be "version" or "group/version"'));
      if (typeof pk['kind'] !== 'string' || pk['kind'] === '') errs.push(required('spec.paramKind.kind'));
    }
  }
  errs.push(...matchResourcesErrors(spec['matchConstraints'], 'spec.matchConstraints', true));
  const fp = spec['failurePolicy'];
  if (fp !== undefined && !(FAILURE_POLICIES as readonly unknown[]).includes(fp)) errs.push(notSupported('spec.failurePolicy', fp, FAILURE_POLICIES));
  errs.push(...namedExpressionErrors(spec['matchConditions'], 'spec.matchConditions', 'matchCondition', check));
  errs.push(...namedExpressionErrors(spec['variables'], 'spec.variables', 'variable', check));

  const validations = spec['validations'];
  const audits = spec['auditAnnotations'];
  const count = (v: unknown): number => (Array.isArray(v) ? v.length : 0);
  if (count(validations) === 0 && count(audits) === 0) {
    errs.push(required('spec.validations', 'validations or auditAnnotations must contain at least one item'));
  }
  if (validations !== undefined && !Array.isArray(validations)) errs.push(invalid('spec.validations', validations, 'must be a list'));
  (Array.isArray(validations) ? validations : []).forEach((v: unknown, i) => {
    const at = `spec.validations[${i}]`;
    if (!isObject(v)) {
      errs.push(invalid(at, v, 'must be an object'));
      return;
    }
    errs.push(...expressionErrors(v['expression'], `${at}.expression`, 'validation', check));
    const msg = v['message'];
    if (msg !== undefined) {
      if (typeof msg !== 'string') errs.push(invalid(`${at}.message`, msg, 'must be a string'));
      else if (msg.trim() === '' && msg !== '') errs.push(invalid(`${at}.message`, msg, 'message must be non-empty if specified'));
      else if (/[\r\n]/.test(msg)) errs.push(invalid(`${at}.message`, msg, 'message must not contain line breaks'));
      else if (msg.length > MAX_MESSAGE_LENGTH) errs.push(invalid(`${at}.message`, '<value omitted>', `message must have a maximum length of ${MAX_MESSAGE_LENGTH} characters`));
    }
    const me = v['messageExpression'];
    if (me !== undefined) errs.push(...expressionErrors(me, `${at}.messageExpression`, 'messageExpression', check));
    const reason = v['reason'];
    if (reason !== undefined && !(REASONS as readonly unknown[]).includes(reason)) errs.push(notSupported(`${at}.reason`, reason, REASONS));
  });
  if (audits !== undefined && !Array.isArray(audits)) errs.push(invalid('spec.auditAnnotations', audits, 'must be a list'));
  const keys = new Set<string>();
  const policyName = isObject(o['metadata']) && typeof o['metadata']['name'] === 'string' ? o['metadata']['name'] : '';
  (Array.isArray(audits) ? audits : []).forEach((a: unknown, i) => {
    const at = `spec.auditAnnotations[${i}]`;
    if (!isObject(a)) {
      errs.push(invalid(at, a, 'must be an object'));
      return;
    }
    const key = a['key'];
    if (typeof key !== 'string' || key === '') errs.push(required(`${at}.key`));
    else {
      // The annotation written is `<policy name>/<key>`, which must be a qualified name.
      if (labelKeyProblem(`${policyName}/${key}`)) {
        errs.push(invalid(`${at}.key`, key, "key must be a qualified name when prefixed with the policy name: alphanumeric characters, '-', '_' or '.', at most 63 characters"));
      }
      if (keys.has(key)) errs.push(duplicate(`${at}.key`, key));
      keys.add(key);
    }
    errs.push(...expressionErrors(a['valueExpression'], `${at}.valueExpression`, 'auditAnnotation', check));
  });
  if (errs.length > 0) return { ok: false, errors: errs };
  return { ok: true, value: o as unknown as ValidatingAdmissionPolicy };
}

export function validateBinding(o: unknown): VapValidation<ValidatingAdmissionPolicyBinding> {
  if (!isObject(o)) return { ok: false, errors: [invalid('', o, 'must be an object')] };
  const errs: FieldError[] = [];
  if (o['apiVersion'] !== VAP_API_VERSION) errs.push(notSupported('apiVersion', o['apiVersion'], [VAP_API_VERSION]));
  if (o['kind'] !== VAP_BINDING_KIND) errs.push(notSupported('kind', o['kind'], [VAP_BINDING_KIND]));
  errs.push(...metadataErrors(o));
  const spec = o['spec'];
  if (!isObject(spec)) return { ok: false, errors: [...errs, required('spec')] };
  const policyName = spec['policyName'];
  if (typeof policyName !== 'string' || policyName === '') errs.push(required('spec.policyName'));
  else if (policyName.length > 253 || !DNS_SUBDOMAIN.test(policyName)) {
    errs.push(invalid('spec.policyName', policyName, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'"));
  }
  const ref = spec['paramRef'];
  if (ref !== undefined && ref !== null) {
    if (!isObject(ref)) errs.push(invalid('spec.paramRef', ref, 'must be an object'));
    else {
      const hasName = typeof ref['name'] === 'string' && ref['name'] !== '';
      const hasSelector = ref['selector'] !== undefined && ref['selector'] !== null;
      if (hasName && hasSelector) errs.push(forbidden('spec.paramRef.name', 'name and selector are mutually exclusive'));
      if (!hasName && !hasSelector) errs.push(required('spec.paramRef', 'one of name or selector must be specified'));
      if (hasName && (ref['name'] as string).length > 253) errs.push(invalid('spec.paramRef.name', ref['name'], 'must be no more than 253 characters'));
      errs.push(...selectorErrors(ref['selector'], 'spec.paramRef.selector'));
      const ns = ref['namespace'];
      if (ns !== undefined && ns !== '' && (typeof ns !== 'string' || ns.length > 63 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(ns))) {
        errs.push(invalid('spec.paramRef.namespace', ns, 'a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \'-\''));
      }
      const pnf = ref['parameterNotFoundAction'];
      if (pnf === undefined || pnf === null) errs.push(required('spec.paramRef.parameterNotFoundAction'));
      else if (!(NOT_FOUND_ACTIONS as readonly unknown[]).includes(pnf)) errs.push(notSupported('spec.paramRef.parameterNotFoundAction', pnf, NOT_FOUND_ACTIONS));
    }
  }
  errs.push(...matchResourcesErrors(spec['matchResources'], 'spec.matchResources', false));
  const actions = spec['validationActions'];
  if (actions === undefined || (Array.isArray(actions) && actions.length === 0)) {
    errs.push(required('spec.validationActions', 'at least one validation action is required'));
  } else if (!Array.isArray(actions)) {
    errs.push(invalid('spec.validationActions', actions, 'must be a list'));
  } else {
    const seen = new Set<unknown>();
    actions.forEach((a: unknown, i) => {
      if (!(ACTIONS as readonly unknown[]).includes(a)) errs.push(notSupported(`spec.validationActions[${i}]`, a, ACTIONS));
      if (seen.has(a)) errs.push(duplicate(`spec.validationActions[${i}]`, a));
      seen.add(a);
    });
    if (seen.has('Deny') && seen.has('Warn')) {
      errs.push(
        invalid(
          'spec.validationActions',
          actions,
          'must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)',
        ),
      );
    }
  }
  if (errs.length > 0) return { ok: false, errors: errs };
  return { ok: true, value: o as unknown as ValidatingAdmissionPolicyBinding };
}

/** The defaulted matchConstraints of a policy (matchPolicy Equivalent, empty selectors). */
export function defaultedMatch(m: MatchResources | undefined): Required<Pick<MatchResources, 'matchPolicy'>> & MatchResources {
  return { ...(m ?? {}), matchPolicy: m?.matchPolicy ?? 'Equivalent' };
}

export type { NamedRuleWithOperations };
