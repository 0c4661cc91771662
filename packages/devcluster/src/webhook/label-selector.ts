/**
 * metav1.LabelSelector evaluation with apimachinery's semantics
 * (`metav1.LabelSelectorAsSelector` + `labels.Selector.Matches`): the
 * requirements are ANDed, an empty selector matches everything, `NotIn` and
 * `DoesNotExist` match when the key is absent.
 */
import { ErrorCode, PortalError, selectorMatches, type LabelSelector as PolicyLabelSelector } from 'portal/dev-api';

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
  // Validated first (kube-apiserver rejects these), then matched by the engine's implementation.
  for (const req of selector.matchExpressions ?? []) {
    const values = req.values ?? [];
    switch (req.operator) {
      case 'In':
      case 'NotIn':
        if (values.length === 0) throw invalid(req, `values must be non-empty for ${req.operator}`);
        break;
      case 'Exists':
      case 'DoesNotExist':
        if (values.length > 0) throw invalid(req, `values must be empty for ${req.operator}`);
        break;
      default:
        throw invalid(req, `"${req.operator}" is not a valid label selector operator`);
    }
  }
  // Operators were checked above, so the engine's type holds.
  return selectorMatches(selector as PolicyLabelSelector, set);
}

function invalid(req: LabelSelectorRequirement, why: string): PortalError {
  return new PortalError(ErrorCode.InputInvalid, `invalid label selector requirement on key "${req.key}": ${why}`);
}
