/** matchConstraints / matchResources selection, from the VAP documentation's matching rules. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { matchResources, type MatchResources, type VapAttributes } from '../../../src/policy/vap/index.ts';

function attrs(over: Partial<VapAttributes> = {}): VapAttributes {
  return {
    operation: 'CREATE',
    kind: { group: '', version: 'v1', kind: 'Pod' },
    resource: { group: '', version: 'v1', resource: 'pods' },
    subResource: '',
    namespace: 'default',
    name: 'web',
    namespaced: true,
    object: { metadata: { name: 'web', labels: { app: 'web' } } },
    oldObject: null,
    ...over,
  };
}
const NS = { metadata: { name: 'default', labels: { 'kubernetes.io/metadata.name': 'default', env: 'prod' } } };
const rule = (o: Record<string, unknown> = {}): NonNullable<MatchResources['resourceRules']>[number] => ({
  apiGroups: [''],
  apiVersions: ['v1'],
  operations: ['CREATE', 'UPDATE'],
  resources: ['pods'],
  ...o,
});
const m = (mr: MatchResources, a = attrs(), ns: Record<string, unknown> | null = NS): boolean => matchResources(mr, a, ns).matches;

void describe('resourceRules', () => {
  void it('matches group, version, resource and operation', () => {
    assert.equal(m({ resourceRules: [rule()] }), true);
    assert.equal(m({ resourceRules: [rule()] }, attrs({ operation: 'DELETE' })), false);
    assert.equal(m({ resourceRules: [rule({ operations: ['*'] })] }, attrs({ operation: 'DELETE' })), true);
    assert.equal(m({ resourceRules: [rule({ apiGroups: ['apps'] })] }), false);
  });

  void it('"*" and "pods" never match a subresource; "pods/*", "*/status" and "*/*" do', () => {
    const status = attrs({ subResource: 'status' });
    assert.equal(m({ resourceRules: [rule()] }, status), false);
    assert.equal(m({ resourceRules: [rule({ resources: ['*'] })] }, status), false);
    assert.equal(m({ resourceRules: [rule({ resources: ['pods/*'] })] }, status), true);
    assert.equal(m({ resourceRules: [rule({ resources: ['*/status'] })] }, status), true);
    assert.equal(m({ resourceRules: [rule({ resources: ['*/scale'] })] }, status), false);
    assert.equal(m({ resourceRules: [rule({ resources: ['*/*'] })] }, status), true);
    assert.equal(m({ resourceRules: [rule({ resources: ['pods/status'] })] }, status), true);
  });

  void it('resourceNames restrict by name (a generated name matches none)', () => {
    assert.equal(m({ resourceRules: [rule({ resourceNames: ['web'] })] }), true);
    assert.equal(m({ resourceRules: [rule({ resourceNames: ['api'] })] }), false);
    assert.equal(m({ resourceRules: [rule({ resourceNames: ['web'] })] }, attrs({ name: '' })), false);
  });

  void it('scope: a Namespace is cluster-scoped', () => {
    const ns = attrs({ resource: { group: '', version: 'v1', resource: 'namespaces' }, kind: { group: '', version: 'v1', kind: 'Namespace' }, namespace: '', namespaced: false });
    const nsRule = rule({ resources: ['namespaces'] });
    assert.equal(m({ resourceRules: [{ ...nsRule, scope: 'Cluster' }] }, ns), true);
    assert.equal(m({ resourceRules: [{ ...nsRule, scope: 'Namespaced' }] }, ns), false);
    assert.equal(m({ resourceRules: [rule({ scope: 'Cluster' })] }), false);
    assert.equal(m({ resourceRules: [rule({ scope: 'Namespaced' })] }), true);
  });

  void it('excludeResourceRules win over resourceRules', () => {
    assert.equal(m({ resourceRules: [rule()], excludeResourceRules: [rule({ resourceNames: ['web'] })] }), false);
    assert.equal(m({ resourceRules: [rule()], excludeResourceRules: [rule({ resourceNames: ['api'] })] }), true);
  });

  void it('matchPolicy Equivalent matches the same resource at another served version; Exact does not', () => {
    const hpa = attrs({
      resource: { group: 'autoscaling', version: 'v2', resource: 'horizontalpodautoscalers' },
      kind: { group: 'autoscaling', version: 'v2', kind: 'HorizontalPodAutoscaler' },
    });
    const r = rule({ apiGroups: ['autoscaling'], resources: ['horizontalpodautoscalers'] });
    assert.equal(m({ resourceRules: [r] }, hpa), true);
    const hit = matchResources({ resourceRules: [r] }, hpa, NS);
    assert.deepEqual(hit.matches && hit.resource, { group: 'autoscaling', version: 'v1', resource: 'horizontalpodautoscalers' });
    assert.equal(m({ resourceRules: [r], matchPolicy: 'Exact' }, hpa), false);
  });

  void it('an AUDIT (existing object) matches rules that admit CREATE', () => {
    assert.equal(m({ resourceRules: [rule()] }, attrs({ operation: 'AUDIT' })), true);
    assert.equal(m({ resourceRules: [rule({ operations: ['UPDATE'] })] }, attrs({ operation: 'AUDIT' })), false);
  });
});

void describe('selectors', () => {
  void it('namespaceSelector uses the namespace labels, or the object\'s own for a Namespace', () => {
    assert.equal(m({ resourceRules: [rule()], namespaceSelector: { matchLabels: { env: 'prod' } } }), true);
    assert.equal(m({ resourceRules: [rule()], namespaceSelector: { matchLabels: { env: 'dev' } } }), false);
    const ns = attrs({
      resource: { group: '', version: 'v1', resource: 'namespaces' },
      namespace: '',
      object: { metadata: { name: 'x', labels: { env: 'dev' } } },
    });
    assert.equal(m({ resourceRules: [rule({ resources: ['namespaces'] })], namespaceSelector: { matchLabels: { env: 'dev' } } }, ns, null), true);
  });

  void it('namespaceSelector on a missing namespace is an error, cluster-scoped objects always match it', () => {
    const r = matchResources({ resourceRules: [rule()], namespaceSelector: { matchLabels: { env: 'prod' } } }, attrs(), null);
    assert.deepEqual(r, { matches: false, error: 'namespaces "default" not found' });
    const node = attrs({ resource: { group: '', version: 'v1', resource: 'nodes' }, namespace: '', namespaced: false });
    assert.equal(m({ resourceRules: [rule({ resources: ['nodes'] })], namespaceSelector: { matchLabels: { env: 'x' } } }, node, null), true);
  });

  void it('objectSelector matches object or oldObject', () => {
    const sel = { matchLabels: { app: 'api' } };
    assert.equal(m({ resourceRules: [rule()], objectSelector: sel }), false);
    const upd = attrs({ operation: 'UPDATE', oldObject: { metadata: { labels: { app: 'api' } } } });
    assert.equal(m({ resourceRules: [rule()], objectSelector: sel }, upd), true);
  });

  void it('a binding\'s matchResources without rules selects every resource its selectors allow', () => {
    assert.equal(m({}), true);
    assert.equal(m({ namespaceSelector: { matchLabels: { env: 'dev' } } }), false);
  });
});
