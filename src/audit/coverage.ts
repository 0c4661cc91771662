/**
 * A rule's coverage (issue 15 item 3): does Portal actually see what the rule
 * matches? Shown as the rule's `Covered` condition (and `kubectl get pcrule`'s
 * COVERED column), each problem naming the chart value to change:
 *
 * - `NotSentByWebhook`: the webhook configuration Portal is served through
 *   does not send the rule's kinds and operations, so admission never
 *   evaluates the rule for them (chart value `webhook.rules`). Not checked for
 *   `Audit` rules, which do nothing at admission.
 * - `AuditForbidden`: Portal's RBAC does not let it list and watch the kind
 *   (its informer got 403), so the audit never sees those objects. The chart
 *   grants read access to the kinds in `webhook.rules`.
 * - `KindNotServed`: the API server does not serve the kind (a typo, or a CRD
 *   not installed).
 *
 * Wildcard kinds (`*`) are not checked (the audit does not enumerate them).
 * Pure: the inputs come from the audit's informers and the webhook
 * configuration's.
 */
import { PORTAL_KINDS_WEBHOOK_PATH } from '../config/webhook-configuration.ts';
import type { WebhookConfigurationObject, WebhookConfigurationView } from '../kube/webhook-config-source.ts';
import type { Enforcement, KindMatch } from '../policy/types.ts';
import type { KindAccess } from './kind-informers.ts';
import type { Resolution } from './kind-resources.ts';

export type CoverageReason = 'Covered' | 'NotSentByWebhook' | 'AuditForbidden' | 'KindNotServed';

export interface Coverage {
  covered: boolean;
  reason: CoverageReason;
  message: string;
}

export interface CoverageRule {
  enforcement: Enforcement;
  kinds: readonly KindMatch[];
  operations: ReadonlySet<string>;
}

export interface CoverageInputs {
  /** The kind's REST resource, when it has been looked up. */
  resolve(group: string, kind: string): Resolution | undefined;
  access(group: string, kind: string): KindAccess;
  /** `'unchecked'` when no webhook configuration is named (`--webhook-configuration`). */
  webhook: WebhookConfigurationView | 'unchecked';
}

type Hook = NonNullable<WebhookConfigurationObject['webhooks']>[number];

/** The entry for Portal's own kinds is not where rules are enforced. */
function enforcingHooks(config: WebhookConfigurationObject): Hook[] {
  return (config.webhooks ?? []).filter((h) => {
    const path = h.clientConfig?.service?.path ?? (h.clientConfig?.url ? safePath(h.clientConfig.url) : undefined);
    return path !== PORTAL_KINDS_WEBHOOK_PATH;
  });
}

function safePath(url: string): string | undefined {
  try {
    return new URL(url).pathname;
  } catch {
    return undefined;
  }
}

function sends(hooks: readonly Hook[], group: string, resource: string, namespaced: boolean, operation: string): boolean {
  return hooks.some((h) =>
    (h.rules ?? []).some((r) => {
      const scope = r.scope ?? '*';
      return (
        ((r.apiGroups ?? []).includes(group) || (r.apiGroups ?? []).includes('*')) &&
        ((r.resources ?? []).includes(resource) || (r.resources ?? []).includes('*')) &&
        ((r.operations ?? []).includes(operation) || (r.operations ?? []).includes('*')) &&
        (scope === '*' || (scope === 'Namespaced') === namespaced)
      );
    }),
  );
}

function qualified(group: string, resource: string): string {
  return group === '' ? resource : `${resource}.${group}`;
}

const ORDER: readonly CoverageReason[] = ['KindNotServed', 'NotSentByWebhook', 'AuditForbidden'];

export function ruleCoverage(rule: CoverageRule, inputs: CoverageInputs): Coverage {
  const notServed: string[] = [];
  const notSent = new Map<string, Set<string>>();
  const forbidden: string[] = [];
  let missingConfig: string | undefined;
  const view = inputs.webhook;
  const hooks = view !== 'unchecked' && view?.config ? enforcingHooks(view.config) : undefined;
  if (view !== 'unchecked' && view !== undefined && view.config === null) missingConfig = view.name;
  const operations = [...rule.operations].filter((o) => o !== 'CONNECT').sort();
  for (const k of rule.kinds) {
    for (const group of k.apiGroups) {
      for (const kind of k.kinds) {
        if (group === '*' || kind === '*') continue;
        const r = inputs.resolve(group, kind);
        if (r === undefined) continue;
        if (!r.ok) {
          notServed.push(r.reason);
          continue;
        }
        const { resource, namespaced } = r.resource;
        if (hooks && rule.enforcement !== 'Audit') {
          for (const op of operations) {
            if (sends(hooks, group, resource, namespaced, op)) continue;
            const name = qualified(group, resource);
            const set = notSent.get(name) ?? new Set<string>();
            set.add(op);
            notSent.set(name, set);
          }
        }
        if (inputs.access(group, kind).state === 'forbidden') forbidden.push(qualified(group, resource));
      }
    }
  }
  const problems = new Map<CoverageReason, string>();
  if (notServed.length > 0) problems.set('KindNotServed', `${[...new Set(notServed)].join('; ')}: check match.kinds (a typo, or a CRD not installed)`);
  if (missingConfig !== undefined && rule.enforcement !== 'Audit') {
    problems.set('NotSentByWebhook', `the webhook configuration ${missingConfig} does not exist, so admission never evaluates this rule; install the chart's webhook (chart value webhook.rules)`);
  } else if (notSent.size > 0) {
    const what = [...notSent].map(([res, ops]) => `${[...ops].join(', ')} of ${res}`).join('; ');
    problems.set(
      'NotSentByWebhook',
      `the webhook configuration ${view !== 'unchecked' ? (view?.name ?? '') : ''} does not send ${what} to Portal, so admission never evaluates this rule for them; add them to the chart value webhook.rules`,
    );
  }
  if (forbidden.length > 0) {
    const list = [...new Set(forbidden)].join(', ');
    problems.set(
      'AuditForbidden',
      `Portal may not list and watch ${list} (403), so the audit never sees them; the chart grants read access to the kinds in webhook.rules: add them there, or bind a ClusterRole with get, list, watch on them to Portal's service account`,
    );
  }
  if (problems.size === 0) {
    const note = view === 'unchecked' ? ' (no --webhook-configuration: admission coverage not checked)' : '';
    return { covered: true, reason: 'Covered', message: `admission and the audit see every kind this rule matches${note}` };
  }
  const reasons = ORDER.filter((r) => problems.has(r));
  const reason = reasons[0] as CoverageReason;
  // Several problems: each is named, so the second one is not hidden behind the first reason.
  const message = reasons.length === 1 ? (problems.get(reason) as string) : reasons.map((r) => `${r}: ${problems.get(r)}`).join('. ');
  return { covered: false, reason, message };
}
