/**
 * `policies.portal.dev/audit-actions` on a ValidatingAdmissionPolicy: a JSON
 * list of the same action objects as a PortalRule's `audit.actions`
 * (docs/design.md §8), e.g. `[{"type":"label","key":"portal.dev/violation","value":"x"},{"type":"alert"}]`.
 * Users write annotations by hand, so every problem is reported (and the
 * policy then gets no actions), never thrown.
 */
import { labelKeyProblem, labelValueProblem } from '../label-selector.ts';
import type { RuleAction } from '../types.ts';

export const AUDIT_ACTIONS_ANNOTATION = 'policies.portal.dev/audit-actions';
const TYPES = ['label', 'annotate', 'evict', 'alert'] as const;

export type AuditActionsParse = { ok: true; actions: RuleAction[] } | { ok: false; problems: string[] };

export function parseAuditActions(annotations: Readonly<Record<string, string>> | undefined): AuditActionsParse {
  const raw = annotations?.[AUDIT_ACTIONS_ANNOTATION];
  if (raw === undefined || raw.trim() === '') return { ok: true, actions: [] };
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    return { ok: false, problems: [`${AUDIT_ACTIONS_ANNOTATION}: not JSON (${(err as Error).message}); write a JSON list such as [{"type":"alert"}]`] };
  }
  if (!Array.isArray(value)) return { ok: false, problems: [`${AUDIT_ACTIONS_ANNOTATION}: must be a JSON list of actions, e.g. [{"type":"alert"}]`] };
  const problems: string[] = [];
  const actions: RuleAction[] = [];
  value.forEach((a: unknown, i) => {
    const at = `${AUDIT_ACTIONS_ANNOTATION}[${i}]`;
    if (a === null || typeof a !== 'object' || Array.isArray(a)) return void problems.push(`${at}: must be an object with a "type"`);
    const o = a as Record<string, unknown>;
    const extra = Object.keys(o).filter((k) => !['type', 'key', 'value'].includes(k));
    if (extra.length > 0) problems.push(`${at}: unknown field${extra.length > 1 ? 's' : ''} ${extra.map((k) => `"${k}"`).join(', ')}; actions have type, key and value`);
    const type = o['type'];
    if (!(TYPES as readonly unknown[]).includes(type)) return void problems.push(`${at}.type: must be one of ${TYPES.map((t) => `"${t}"`).join(', ')}`);
    const action: RuleAction = { type: type as RuleAction['type'] };
    if (type === 'label' || type === 'annotate') {
      const key = o['key'];
      if (typeof key !== 'string' || key === '') return void problems.push(`${at}.key: required for ${String(type)}`);
      const kp = labelKeyProblem(key);
      if (kp) problems.push(`${at}.key: ${kp}`);
      action.key = key;
      const v = o['value'];
      if (v !== undefined && typeof v !== 'string') problems.push(`${at}.value: must be a string`);
      else if (v !== undefined) {
        if (type === 'label') {
          const vp = labelValueProblem(v);
          if (vp) problems.push(`${at}.value: ${vp}`);
        }
        action.value = v;
      }
    } else if (o['key'] !== undefined || o['value'] !== undefined) {
      problems.push(`${at}: ${String(type)} takes no key or value`);
    }
    actions.push(action);
  });
  return problems.length > 0 ? { ok: false, problems } : { ok: true, actions };
}
