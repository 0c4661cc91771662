/**
 * A rule's Covered condition (issue 15 item 3) as ruleCoverage decides it:
 * what the webhook configuration sends, what RBAC lets the audit list, and
 * the chart value each message names.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ruleCoverage, type CoverageInputs, type CoverageRule } from '../../src/audit/coverage.ts';
import type { KindAccess } from '../../src/audit/kind-informers.ts';
import { BUILTIN_KINDS, type Resolution } from '../../src/audit/kind-resources.ts';
import { buildValidatingWebhookConfiguration, DEFAULT_PORTAL_KINDS_WEBHOOK, type WebhookValues } from '../../src/config/webhook-configuration.ts';
import type { WebhookConfigurationObject } from '../../src/kube/webhook-config-source.ts';
import { portalKindResources } from '../../src/policy/portal-kinds.ts';

const CHART_RULES: WebhookValues['rules'] = [
  { apiGroups: [''], apiVersions: ['v1'], resources: ['pods', 'pods/ephemeralcontainers', 'replicationcontrollers'], operations: ['CREATE', 'UPDATE'], scope: 'Namespaced' },
  { apiGroups: ['apps'], apiVersions: ['v1'], resources: ['deployments', 'statefulsets', 'daemonsets', 'replicasets'], operations: ['CREATE', 'UPDATE'], scope: 'Namespaced' },
];

/** The configuration as the chart renders it (both webhooks). */
function chartConfig(rules = CHART_RULES): WebhookConfigurationObject {
  return buildValidatingWebhookConfiguration({
    name: 'portal',
    namespace: 'portal-system',
    caBundle: '',
    clientConfig: { service: { name: 'portal', namespace: 'portal-system', port: 443, path: '/validate' } },
    values: { name: 'validate.portal.dev', path: '/validate', failurePolicy: 'Fail', sideEffects: 'None', timeoutSeconds: 5, admissionReviewVersions: ['v1'], matchPolicy: 'Equivalent', excludedNamespaces: [], rules, portalKinds: DEFAULT_PORTAL_KINDS_WEBHOOK },
    portalKindResources: portalKindResources(),
  }) as WebhookConfigurationObject;
}

const builtins = new Map(BUILTIN_KINDS.map((r) => [`${r.group}/${r.kind}`, r]));

function inputs(opts: { config?: WebhookConfigurationObject | null | 'unchecked'; forbidden?: string[] } = {}): CoverageInputs {
  const config = opts.config === undefined ? chartConfig() : opts.config;
  return {
    resolve: (group, kind): Resolution => {
      const r = builtins.get(`${group}/${kind}`);
      return r ? { ok: true, resource: r } : { ok: false, reason: `kind ${group || 'core'}/${kind} is not served by the API server` };
    },
    access: (group, kind): KindAccess => ((opts.forbidden ?? []).includes(kind) ? { state: 'forbidden', message: 'HTTP 403' } : { state: 'listed' }),
    webhook: config === 'unchecked' ? 'unchecked' : { name: 'portal', config, resourceVersion: '1' },
  };
}

const rule = (kind: string, group = '', enforcement: CoverageRule['enforcement'] = 'Deny', operations = ['CREATE', 'UPDATE']): CoverageRule => ({
  enforcement,
  kinds: [{ apiGroups: [group], kinds: [kind] }],
  operations: new Set(operations),
});

describe('rule coverage', () => {
  it('a Pod rule is covered by the chart\'s default webhook and RBAC', () => {
    const c = ruleCoverage(rule('Pod'), inputs());
    assert.deepEqual([c.covered, c.reason], [true, 'Covered']);
  });

  it('NotSentByWebhook names the operations, the resource and the chart value webhook.rules', () => {
    const c = ruleCoverage(rule('ConfigMap'), inputs());
    assert.equal(c.covered, false);
    assert.equal(c.reason, 'NotSentByWebhook');
    assert.match(c.message, /^the webhook configuration portal does not send CREATE, UPDATE of configmaps to Portal, .*chart value webhook\.rules$/);
    // An operation the webhook does not send (DELETE by default) is named too.
    const del = ruleCoverage(rule('Pod', '', 'Deny', ['CREATE', 'DELETE']), inputs());
    assert.equal(del.reason, 'NotSentByWebhook');
    assert.match(del.message, /does not send DELETE of pods/);
    // The webhook for Portal's own kinds does not count as sending anything to the rules.
    const own = ruleCoverage(rule('PortalRule', 'portal.dev'), { ...inputs(), resolve: () => ({ ok: true, resource: { group: 'portal.dev', version: 'v1alpha1', kind: 'PortalRule', resource: 'portalrules', namespaced: true } }) });
    assert.equal(own.reason, 'NotSentByWebhook');
  });

  it('an Audit rule does nothing at admission, so only the audit is checked', () => {
    assert.equal(ruleCoverage(rule('ConfigMap', '', 'Audit'), inputs()).reason, 'Covered');
    const c = ruleCoverage(rule('ConfigMap', '', 'Audit'), inputs({ forbidden: ['ConfigMap'] }));
    assert.equal(c.reason, 'AuditForbidden');
    assert.match(c.message, /^Portal may not list and watch configmaps \(403\), so the audit never sees them; .*webhook\.rules.*ClusterRole/);
  });

  it('both problems: the first is the reason, the message names each', () => {
    const c = ruleCoverage(rule('ConfigMap', '', 'Warn'), inputs({ forbidden: ['ConfigMap'] }));
    assert.equal(c.reason, 'NotSentByWebhook');
    assert.match(c.message, /^NotSentByWebhook: .*\. AuditForbidden: Portal may not list and watch configmaps/);
  });

  it('a missing configuration, an unknown kind, group-qualified names, scope and wildcards', () => {
    assert.match(ruleCoverage(rule('Pod'), inputs({ config: null })).message, /webhook configuration portal does not exist/);
    const typo = ruleCoverage(rule('Deploymnet', 'apps'), inputs());
    assert.equal(typo.reason, 'KindNotServed');
    assert.match(typo.message, /apps\/Deploymnet is not served/);
    assert.match(ruleCoverage(rule('Ingress', 'networking.k8s.io'), inputs()).message, /of ingresses\.networking\.k8s\.io/);
    // A Namespaced webhook rule does not send a cluster-scoped kind.
    const clusterScoped = chartConfig([{ apiGroups: [''], apiVersions: ['v1'], resources: ['namespaces'], operations: ['CREATE', 'UPDATE'], scope: 'Namespaced' }]);
    assert.equal(ruleCoverage(rule('Namespace'), inputs({ config: clusterScoped })).reason, 'NotSentByWebhook');
    // Wildcards are not checked; no --webhook-configuration: admission coverage is not checked.
    assert.equal(ruleCoverage({ enforcement: 'Deny', kinds: [{ apiGroups: ['*'], kinds: ['*'] }], operations: new Set(['CREATE']) }, inputs()).reason, 'Covered');
    const unchecked = ruleCoverage(rule('ConfigMap'), inputs({ config: 'unchecked' }));
    assert.equal(unchecked.reason, 'Covered');
    assert.match(unchecked.message, /not checked/);
  });
});
