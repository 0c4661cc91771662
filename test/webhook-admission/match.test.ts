// Which requests a webhook sees: rules (group/version/resource/subresource/
// operation/scope), namespaceSelector and objectSelector, with
// kube-apiserver's semantics (predicates/rules, /namespace, /object).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AdmissionAttributes } from '../../packages/devcluster/src/apiserver/admission-hook.ts';
import { collectWebhooks, type RuleWithOperations } from '../../packages/devcluster/src/webhook/config.ts';
import { matchesLabelSelector } from '../../packages/devcluster/src/webhook/label-selector.ts';
import { matchesNamespaceSelector, matchesObjectSelector, matchesRule } from '../../packages/devcluster/src/webhook/match.ts';

function attrs(over: Partial<AdmissionAttributes> = {}): AdmissionAttributes {
  return {
    operation: 'CREATE',
    kind: { group: '', version: 'v1', kind: 'Pod' },
    resource: { group: '', version: 'v1', resource: 'pods' },
    subResource: '',
    namespace: 'default',
    name: 'p',
    namespaced: true,
    object: { metadata: { name: 'p', labels: { app: 'web' } } },
    oldObject: null,
    userInfo: { username: 'alice', uid: '', groups: [] },
    dryRun: false,
    options: null,
    ...over,
  };
}

const rule = (over: Partial<RuleWithOperations> = {}): RuleWithOperations => ({
  operations: ['*'],
  apiGroups: ['*'],
  apiVersions: ['*'],
  resources: ['*'],
  scope: '*',
  ...over,
});

const podStatus = attrs({ subResource: 'status', operation: 'UPDATE' });
const deploy = attrs({
  kind: { group: 'apps', version: 'v1', kind: 'Deployment' },
  resource: { group: 'apps', version: 'v1', resource: 'deployments' },
});
const node = attrs({
  kind: { group: '', version: 'v1', kind: 'Node' },
  resource: { group: '', version: 'v1', resource: 'nodes' },
  namespace: '',
  namespaced: false,
});
const namespaceObj = attrs({
  kind: { group: '', version: 'v1', kind: 'Namespace' },
  resource: { group: '', version: 'v1', resource: 'namespaces' },
  namespace: '',
  name: 'team-a',
  namespaced: false,
  object: { metadata: { name: 'team-a', labels: { 'kubernetes.io/metadata.name': 'team-a', tier: 'prod' } } },
});

void test('rules: group, version, operation', () => {
  assert.equal(matchesRule(rule({ apiGroups: [''] }), attrs()), true);
  assert.equal(matchesRule(rule({ apiGroups: ['apps'] }), attrs()), false);
  assert.equal(matchesRule(rule({ apiGroups: ['apps'] }), deploy), true);
  assert.equal(matchesRule(rule({ apiVersions: ['v1beta1'] }), attrs()), false);
  assert.equal(matchesRule(rule({ operations: ['UPDATE'] }), attrs()), false);
  assert.equal(matchesRule(rule({ operations: ['CREATE', 'DELETE'] }), attrs({ operation: 'DELETE' })), true);
  assert.equal(matchesRule(rule({ operations: [] }), attrs()), false);
});

void test('rules: resources and subresources as upstream (* does not cover subresources)', () => {
  assert.equal(matchesRule(rule({ resources: ['pods'] }), attrs()), true);
  assert.equal(matchesRule(rule({ resources: ['pods'] }), podStatus), false);
  assert.equal(matchesRule(rule({ resources: ['*'] }), podStatus), false);
  assert.equal(matchesRule(rule({ resources: ['pods/status'] }), podStatus), true);
  assert.equal(matchesRule(rule({ resources: ['pods/*'] }), podStatus), true);
  // Upstream's splitResource/"sub == *" also lets `pods/*` match pods itself.
  assert.equal(matchesRule(rule({ resources: ['pods/*'] }), attrs()), true);
  assert.equal(matchesRule(rule({ resources: ['pods/status'] }), attrs()), false);
  assert.equal(matchesRule(rule({ resources: ['*/status'] }), podStatus), true);
  assert.equal(matchesRule(rule({ resources: ['*/*'] }), podStatus), true);
  assert.equal(matchesRule(rule({ resources: ['*/*'] }), attrs()), true);
  assert.equal(matchesRule(rule({ resources: ['deployments'] }), attrs()), false);
});

void test('rules: scope; a Namespace is cluster-scoped even when its namespace attribute is set', () => {
  assert.equal(matchesRule(rule({ scope: 'Namespaced' }), attrs()), true);
  assert.equal(matchesRule(rule({ scope: 'Cluster' }), attrs()), false);
  assert.equal(matchesRule(rule({ scope: 'Cluster' }), node), true);
  assert.equal(matchesRule(rule({ scope: 'Namespaced' }), node), false);
  for (const ns of [namespaceObj, { ...namespaceObj, namespace: 'team-a' }]) {
    assert.equal(matchesRule(rule({ scope: 'Cluster' }), ns), true);
    assert.equal(matchesRule(rule({ scope: 'Namespaced' }), ns), false);
  }
});

void test('label selectors: matchLabels and every operator, invalid ones throw', () => {
  const labels = { app: 'web', tier: 'prod' };
  assert.equal(matchesLabelSelector({}, labels), true);
  assert.equal(matchesLabelSelector({ matchLabels: { app: 'web' } }, labels), true);
  assert.equal(matchesLabelSelector({ matchLabels: { app: 'db' } }, labels), false);
  assert.equal(matchesLabelSelector({ matchExpressions: [{ key: 'tier', operator: 'In', values: ['prod', 'qa'] }] }, labels), true);
  assert.equal(matchesLabelSelector({ matchExpressions: [{ key: 'x', operator: 'In', values: ['a'] }] }, labels), false);
  assert.equal(matchesLabelSelector({ matchExpressions: [{ key: 'x', operator: 'NotIn', values: ['a'] }] }, labels), true);
  assert.equal(matchesLabelSelector({ matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['web'] }] }, labels), false);
  assert.equal(matchesLabelSelector({ matchExpressions: [{ key: 'app', operator: 'Exists' }] }, labels), true);
  assert.equal(matchesLabelSelector({ matchExpressions: [{ key: 'app', operator: 'DoesNotExist' }] }, labels), false);
  assert.throws(() => matchesLabelSelector({ matchExpressions: [{ key: 'app', operator: 'Equals', values: ['x'] }] }, labels), /not a valid/);
  assert.throws(() => matchesLabelSelector({ matchExpressions: [{ key: 'app', operator: 'In' }] }, labels), /non-empty/);
});

void test('namespaceSelector: namespace labels, own labels for a Namespace, always for other cluster objects, 404 for a missing namespace', () => {
  const [hook] = collectWebhooks(
    [{ metadata: { name: 'c' }, webhooks: [{ name: 'w', namespaceSelector: { matchLabels: { tier: 'prod' } } }] }],
    10,
  );
  assert.ok(hook);
  const nsLabels = (name: string): Record<string, string> | undefined =>
    ({ prod: { tier: 'prod' }, dev: { tier: 'dev' } })[name];
  assert.deepEqual(matchesNamespaceSelector(hook, attrs({ namespace: 'prod' }), nsLabels), { match: true });
  assert.deepEqual(matchesNamespaceSelector(hook, attrs({ namespace: 'dev' }), nsLabels), { match: false });
  assert.deepEqual(matchesNamespaceSelector(hook, node, nsLabels), { match: true });
  assert.deepEqual(matchesNamespaceSelector(hook, namespaceObj, nsLabels), { match: true });
  const deletedNs = { ...namespaceObj, operation: 'DELETE' as const, object: null, oldObject: { metadata: { labels: { tier: 'dev' } } } };
  assert.deepEqual(matchesNamespaceSelector(hook, deletedNs, nsLabels), { match: false });
  const missing = matchesNamespaceSelector(hook, attrs({ namespace: 'gone' }), nsLabels);
  assert.deepEqual(missing, { error: { code: 404, reason: 'NotFound', message: 'namespaces "gone" not found' } });
});

void test('objectSelector: object or oldObject labels', () => {
  const [hook] = collectWebhooks([{ metadata: { name: 'c' }, webhooks: [{ name: 'w', objectSelector: { matchLabels: { app: 'web' } } }] }], 10);
  assert.ok(hook);
  assert.equal(matchesObjectSelector(hook, attrs()), true);
  assert.equal(matchesObjectSelector(hook, attrs({ object: { metadata: { labels: { app: 'db' } } } })), false);
  const relabel = attrs({ operation: 'UPDATE', object: { metadata: {} }, oldObject: { metadata: { labels: { app: 'web' } } } });
  assert.equal(matchesObjectSelector(hook, relabel), true);
  assert.equal(matchesObjectSelector(hook, attrs({ operation: 'DELETE', object: null, oldObject: { metadata: {} } })), false);
});

void test('configurations are ordered by name and defaulted like admissionregistration/v1', () => {
  const hooks = collectWebhooks(
    [
      { metadata: { name: 'b' }, webhooks: [{ name: 'b1' }, { name: 'b2', failurePolicy: 'Ignore', timeoutSeconds: 3 }] },
      { metadata: { name: 'a' }, webhooks: [{ name: 'a1', clientConfig: { service: { namespace: 'ns', name: 'svc' } } }] },
    ],
    10,
  );
  assert.deepEqual(hooks.map((h) => h.name), ['a1', 'b1', 'b2']);
  assert.equal(hooks[0]?.failurePolicy, 'Fail');
  assert.equal(hooks[0]?.timeoutSeconds, 10);
  assert.deepEqual(hooks[0]?.clientConfig.service, { namespace: 'ns', name: 'svc', path: '/', port: 443 });
  assert.equal(hooks[2]?.failurePolicy, 'Ignore');
  assert.equal(hooks[2]?.timeoutSeconds, 3);
});
