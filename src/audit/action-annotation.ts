/**
 * Provenance annotations: every label/annotate patch the leader sends also
 * sets `actions.portal.dev/<actionType>.<hash(rule)>` = `{"rule","epoch","at"}`
 * in the same merge patch. The effect and its record are therefore one atomic
 * write, followers learn the key from the object they already cache
 * (IdempotencyStore.observeObject), and a stale leader's write is
 * recognisable by its epoch.
 *
 * The key hashes the rule because a rule key (`namespace/name`, up to 253 +
 * 253 characters) does not fit the 63-character name part of an annotation
 * key; 16 hex digits (64 bits) make a collision between two rules acting on
 * one object practically impossible, and the value names the rule in clear.
 */
import { createHash } from 'node:crypto';
import type { ActionType } from '../policy/types.ts';

export const ACTION_ANNOTATION_PREFIX = 'actions.portal.dev/';
const ACTION_TYPES: ReadonlySet<string> = new Set<ActionType>(['label', 'annotate', 'evict', 'alert']);

export interface ActionMark {
  rule: string;
  actionType: ActionType;
  epoch: string;
  /** Wall-clock ms. */
  at: number;
}

export function actionAnnotationKey(rule: string, actionType: ActionType): string {
  const hash = createHash('sha256').update(rule).digest('hex').slice(0, 16);
  return `${ACTION_ANNOTATION_PREFIX}${actionType}.${hash}`;
}

export function actionAnnotation(mark: ActionMark): [key: string, value: string] {
  const value = JSON.stringify({ rule: mark.rule, epoch: mark.epoch, at: new Date(mark.at).toISOString() });
  return [actionAnnotationKey(mark.rule, mark.actionType), value];
}

/** Every well-formed provenance annotation; malformed ones are ignored (users can edit annotations). */
export function parseActionAnnotations(annotations: Record<string, string> | undefined): ActionMark[] {
  const marks: ActionMark[] = [];
  for (const [key, value] of Object.entries(annotations ?? {})) {
    if (!key.startsWith(ACTION_ANNOTATION_PREFIX)) continue;
    const actionType = key.slice(ACTION_ANNOTATION_PREFIX.length).split('.')[0] ?? '';
    if (!ACTION_TYPES.has(actionType)) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      continue;
    }
    const { rule, epoch, at } = (parsed ?? {}) as { rule?: unknown; epoch?: unknown; at?: unknown };
    const atMs = typeof at === 'string' ? Date.parse(at) : NaN;
    if (typeof rule !== 'string' || typeof epoch !== 'string' || Number.isNaN(atMs)) continue;
    if (key !== actionAnnotationKey(rule, actionType as ActionType)) continue; // value does not belong to this key
    marks.push({ rule, actionType: actionType as ActionType, epoch, at: atMs });
  }
  return marks;
}
