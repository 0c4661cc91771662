/**
 * metav1.LabelSelector evaluation with apimachinery's semantics
 * (`metav1.LabelSelectorAsSelector` + `labels.Selector.Matches`): the
 * requirements are ANDed, an empty selector matches everything, `NotIn` and
 * `DoesNotExist` match when the key is absent.
 */
import { ErrorCode, PortalError } from '../../observability/errors.ts';

export interface LabelSelectorRequirement {
  key: string;
  operator: string;
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

/** True when the selector has no requirement at all (it then matches everything). */
export function isEmptySelector(selector: LabelSelector | undefined | null): boolean {
  if (!selector) return true;
  return Object.keys(selector.matchLabels ?? {}).length === 0 && (selector.matchExpressions ?? []).length === 0;
}

/**
 * Whether `labels` satisfy `selector`. Throws a PortalError(InputInvalid) for
 * an operator apimachinery would reject, or In/NotIn without values, so a
 * broken selector never silently matches (or skips) everything.
 */
export function matchesLabelSelector(
  selector: LabelSelector | undefined | null,
  labels: Record<string, string> | undefined | null,
): boolean {
  if (!selector) return true;
  const set = labels ?? {};
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (set[key] !== value) return false;
  }
  for (const req of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(set, req.key);
    const values = req.values ?? [];
    switch (req.operator) {
      case 'In':
        if (values.length === 0) throw invalid(req, 'values must be non-empty for In');
        if (!has || !values.includes(set[req.key] as string)) return false;
        break;
      case 'NotIn':
        if (values.length === 0) throw invalid(req, 'values must be non-empty for NotIn');
        if (has && values.includes(set[req.key] as string)) return false;
        break;
      case 'Exists':
        if (values.length > 0) throw invalid(req, 'values must be empty for Exists');
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (values.length > 0) throw invalid(req, 'values must be empty for DoesNotExist');
        if (has) return false;
        break;
      default:
        throw invalid(req, `"${req.operator}" is not a valid label selector operator`);
    }
  }
  return true;
}

function invalid(req: LabelSelectorRequirement, why: string): PortalError {
  return new PortalError(ErrorCode.InputInvalid, `invalid label selector requirement on key "${req.key}": ${why}`);
}
