/**
 * Label and field selectors in the query-string syntax of kube-apiserver:
 * `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`; comma = AND.
 */
import { requirementsMatch, selectorRequirements, type LabelRequirement, type LabelSelector as MetaLabelSelector } from 'portal/dev-api';
import { errors } from './status.ts';

/** Parsed requirements, matched by the engine's one implementation (policy/label-selector.ts). */
export type LabelSelector = LabelRequirement[];

/** Split on commas that are not inside parentheses. */
function splitTop(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  out.push(cur);
  return out.map((x) => x.trim()).filter((x) => x.length > 0);
}

const KEY = /^([a-z0-9A-Z]([a-z0-9A-Z._/-]*[a-z0-9A-Z])?)$/;
const VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function checkKey(k: string, raw: string): string {
  if (!KEY.test(k)) throw errors.badRequest(`unable to parse requirement: invalid label key "${k}" in "${raw}"`);
  return k;
}
function checkValue(v: string, raw: string): string {
  if (!VALUE.test(v) || v.length > 63) throw errors.badRequest(`unable to parse requirement: invalid label value: "${v}" in "${raw}"`);
  return v;
}

export function parseLabelSelector(s: string | null | undefined): LabelSelector {
  if (!s) return [];
  const reqs: LabelSelector = [];
  for (const part of splitTop(s)) {
    let m: RegExpMatchArray | null;
    if ((m = part.match(/^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/))) {
      const values = m[3]!.split(',').map((v) => checkValue(v.trim(), part));
      reqs.push({ key: checkKey(m[1]!, part), operator: m[2] === 'in' ? 'In' : 'NotIn', values });
    } else if ((m = part.match(/^([^!=\s]+)\s*(==|=|!=)\s*(\S*)$/))) {
      reqs.push({ key: checkKey(m[1]!, part), operator: m[2] === '!=' ? 'NotIn' : 'In', values: [checkValue(m[3]!, part)] });
    } else if ((m = part.match(/^!\s*(\S+)$/))) {
      reqs.push({ key: checkKey(m[1]!, part), operator: 'DoesNotExist' });
    } else if ((m = part.match(/^(\S+)$/))) {
      reqs.push({ key: checkKey(m[1]!, part), operator: 'Exists' });
    } else {
      throw errors.badRequest(`unable to parse requirement: found '${part}', expected: identifier`);
    }
  }
  return reqs;
}

export function matchLabels(sel: LabelSelector, labels: Record<string, string> | undefined): boolean {
  return requirementsMatch(sel, labels);
}

/** metav1.LabelSelector (matchLabels + matchExpressions), as in PDBs. */
export function fromLabelSelectorObject(sel: unknown): LabelSelector | null {
  if (sel === null || typeof sel !== 'object') return null;
  return selectorRequirements(sel as MetaLabelSelector);
}

export interface FieldRequirement { field: string; value: string; negate: boolean }

export function parseFieldSelector(s: string | null | undefined, supported: (field: string) => boolean): FieldRequirement[] {
  if (!s) return [];
  const out: FieldRequirement[] = [];
  for (const part of splitTop(s)) {
    const m = part.match(/^([^!=\s]+)\s*(==|=|!=)\s*(.*)$/);
    if (!m) throw errors.badRequest(`invalid selector: '${s}'; can't understand '${part}'`);
    const field = m[1]!;
    if (!supported(field)) throw errors.badRequest(`"${field}" is not a known field selector: only "metadata.name", "metadata.namespace"`);
    out.push({ field, value: m[3]!.trim(), negate: m[2] === '!=' });
  }
  return out;
}
