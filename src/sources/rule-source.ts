/**
 * Where the rules in force come from: the one contract both modes fill in.
 * The admission path needs only the RuleSet, whether the source is ready,
 * and namespace labels.
 *
 * - file-rule-source.ts: `portal serve --policies DIR` (no cluster).
 * - cluster-rule-source.ts: PortalRule/PortalClusterRule/PortalException
 *   objects through informers, namespace labels from a Namespace informer;
 *   `ready()` stays false until every informer has synced.
 */
import type { RuleSet } from '../policy/index.ts';
import type { NamespaceLabelStore } from '../policy/namespace-label-store.ts';
import type { NamespaceLabels } from '../policy/review/answer.ts';

export interface RuleSource {
  readonly ruleSet: RuleSet;
  /** True once rules are loaded (and, in cluster mode, every informer synced). */
  ready(): boolean;
  /** Why it is not ready (for /readyz and the "not ready" denial). */
  notReadyReason(): string;
  namespaceLabels: NamespaceLabels;
  /** Cluster mode: the namespace labels as a store the evaluation workers mirror (file mode has only the name label). */
  readonly namespaceStore?: NamespaceLabelStore | undefined;
  /** Runs until `signal` aborts; resolves after cleanup. */
  start(signal: AbortSignal): Promise<void>;
}
