/**
 * One object's audit state, as pure functions: the input the audit asks the
 * policies about (operation `AUDIT`), and the {@link ObjectState} it holds
 * after an evaluation (what changed for the reports, what stays for the
 * leader's clean-up once the object is gone).
 */
import type { EvaluationInput, GroupVersionKind, KubeObject, RuleVerdict } from '../policy/types.ts';
import type { AuditEvaluatorDeps, ObjectState } from './audit-step.ts';
import { isViolation, sameVerdicts } from './verdicts.ts';

/** The audit's question about an existing object, with one instant for every verdict (expiry). */
export function auditInput(gvk: GroupVersionKind, namespace: string, name: string, object: KubeObject, namespaceLabels: AuditEvaluatorDeps['namespaceLabels']): EvaluationInput {
  const isNamespace = gvk.group === '' && gvk.kind === 'Namespace';
  return {
    operation: 'AUDIT',
    kind: gvk,
    namespace,
    name,
    object,
    oldObject: null,
    namespaceLabels: isNamespace ? (object.metadata?.labels ?? {}) : namespace ? namespaceLabels(namespace) : undefined,
    now: Date.now(),
  };
}

/**
 * The state after an evaluation: `object` undefined means the object is
 * gone (or its kind no longer audited), and the previous state is kept,
 * marked deleted, until its leader-only clean-up (alert resolution) is
 * done. Undefined: nothing to hold.
 */
export function nextObjectState(
  prev: ObjectState | undefined,
  current: { gvk: GroupVersionKind; object: KubeObject } | undefined,
  verdicts: RuleVerdict[],
  exempted: ObjectState['exempted'] | undefined,
): ObjectState | undefined {
  const violating = new Set(verdicts.filter(isViolation).map((v) => v.rule));
  const seen = new Set([...(prev?.seen ?? []), ...violating]);
  if (current !== undefined) {
    const { gvk, object } = current;
    const uid = object.metadata?.uid;
    const reportChanged = !prev || prev.deleted || prev.uid !== uid || !sameVerdicts(prev.verdicts, verdicts);
    const replacedUid = prev?.uid !== undefined && prev.uid !== uid ? prev.uid : undefined;
    return { gvk, object, uid, verdicts, violating, seen, deleted: false, reportChanged, replacedUid, ...(exempted ? { exempted } : {}) };
  }
  if (prev === undefined) return undefined;
  const { exempted: _gone, ...rest } = prev;
  return { ...rest, verdicts: [], violating: new Set(), seen, deleted: true, reportChanged: !prev.deleted };
}
