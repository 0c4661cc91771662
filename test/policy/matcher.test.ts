import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decideAdmission, evaluate, RuleSet, type KubeObject, type RuleVerdict } from '../../src/policy/index.ts';
import { clusterRule, input, namespacedRule, pod } from './support.ts';

function set(...rules: Parameters<RuleSet['upsert']>[0][]): RuleSet {
  const rs = new RuleSet();
  for (const r of rules) assert.equal(rs.upsert(r).ready, true, JSON.stringify(rs.upsert(r)));
  return rs;
}

function only(verdicts: RuleVerdict[]): RuleVerdict {
  assert.equal(verdicts.length, 1, JSON.stringify(verdicts));
  return verdicts[0] as RuleVerdict;
}

void describe('kinds', () => {
  void it('gives no verdict for kinds the rule does not match', () => {
    const rs = set(clusterRule('r'));
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'default' } };
    assert.deepEqual(evaluate(rs, input(cm)), []);
  });
  void it('matches "*" groups and "*" kinds', () => {
    const rs = set(
      clusterRule('any-kind', { match: { kinds: [{ apiGroups: [''], kinds: ['*'] }] }, validate: { schema: { required: ['metadata'] } } }),
      clusterRule('any-group', { match: { kinds: [{ apiGroups: ['*'], kinds: ['ConfigMap'] }] }, validate: { schema: true } }),
    );
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'default' } };
    assert.deepEqual(evaluate(rs, input(cm)).map((v) => [v.rule, v.result]), [['any-group', 'pass'], ['any-kind', 'pass']]);
    const dep = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'd', namespace: 'default' } };
    assert.deepEqual(evaluate(rs, input(dep)), [], 'group "" does not match apps');
  });
  void it('requires the group to match', () => {
    const rs = set(clusterRule('r', { match: { kinds: [{ apiGroups: ['apps'], kinds: ['Pod'] }] } }));
    assert.deepEqual(evaluate(rs, input(pod({ privileged: true }))), []);
  });
});

void describe('operations', () => {
  const rs = set(clusterRule('r'));
  void it('defaults to CREATE and UPDATE', () => {
    assert.equal(only(evaluate(rs, input(pod({ privileged: true })))).result, 'fail');
    assert.equal(only(evaluate(rs, input(pod({ privileged: true }), { operation: 'UPDATE' }))).result, 'fail');
    const del = only(evaluate(rs, input(null, { operation: 'DELETE', oldObject: pod({ privileged: true }), namespace: 'default' })));
    assert.equal(del.result, 'skip');
    assert.match(del.message, /operation DELETE is not matched/);
  });
  void it('AUDIT bypasses the operation filter', () => {
    assert.equal(only(evaluate(rs, input(pod({ privileged: true }), { operation: 'AUDIT' }))).result, 'fail');
  });
  void it('DELETE validates oldObject', () => {
    const del = set(clusterRule('r', { match: { operations: ['DELETE'] } }));
    const v = only(evaluate(del, input(null, { operation: 'DELETE', oldObject: pod({ privileged: true }), namespace: 'default' })));
    assert.equal(v.result, 'fail');
    assert.equal(v.violations[0]?.path, 'spec.containers[0].securityContext.privileged');
  });
});

void describe('namespaces', () => {
  void it('includes by exact name and prefix glob', () => {
    const rs = set(clusterRule('r', { match: { namespaces: ['prod', 'team-*'] } }));
    assert.equal(only(evaluate(rs, input(pod({ namespace: 'prod', privileged: true })))).result, 'fail');
    assert.equal(only(evaluate(rs, input(pod({ namespace: 'team-a', privileged: true })))).result, 'fail');
    const v = only(evaluate(rs, input(pod({ namespace: 'production', privileged: true }))));
    assert.equal(v.result, 'skip');
    assert.match(v.message, /namespace production is not in match.namespaces/);
  });
  void it('excludes by glob, and exclusion wins', () => {
    const rs = set(clusterRule('r', { match: { namespaces: ['team-*'], excludedNamespaces: ['team-sandbox*'] } }));
    assert.equal(only(evaluate(rs, input(pod({ namespace: 'team-sandbox-1', privileged: true })))).result, 'skip');
    assert.equal(only(evaluate(rs, input(pod({ namespace: 'team-b', privileged: true })))).result, 'fail');
  });
  void it('does not apply namespace filters to cluster-scoped objects, but applies them to a Namespace by its name', () => {
    const schema = { properties: { metadata: { required: ['labels'] } } };
    const rs = set(
      clusterRule('ns', { match: { kinds: [{ apiGroups: [''], kinds: ['Namespace', 'Node'] }], excludedNamespaces: ['kube-*'] }, validate: { schema } }),
    );
    const ns = (name: string): KubeObject => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    assert.equal(only(evaluate(rs, input(ns('kube-system'), { name: 'kube-system' }))).result, 'skip');
    assert.equal(only(evaluate(rs, input(ns('apps'), { name: 'apps' }))).result, 'fail');
    const node = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'kube-node-1' } };
    assert.equal(only(evaluate(rs, input(node))).result, 'fail');
  });
  void it('a PortalRule applies only in its own namespace', () => {
    const rs = set(namespacedRule('team-a', 'r'));
    const v = only(evaluate(rs, input(pod({ namespace: 'team-a', privileged: true }))));
    assert.equal(v.rule, 'team-a/r');
    assert.equal(v.ruleKind, 'PortalRule');
    assert.equal(v.result, 'fail');
    assert.deepEqual(evaluate(rs, input(pod({ namespace: 'team-b', privileged: true }))), []);
  });
});

void describe('label selectors', () => {
  const cases: [string, object, Record<string, string> | undefined, boolean][] = [
    ['matchLabels hit', { matchLabels: { env: 'prod' } }, { env: 'prod', x: '1' }, true],
    ['matchLabels miss', { matchLabels: { env: 'prod' } }, { env: 'dev' }, false],
    ['matchLabels absent', { matchLabels: { env: 'prod' } }, undefined, false],
    ['In hit', { matchExpressions: [{ key: 'env', operator: 'In', values: ['prod', 'stage'] }] }, { env: 'stage' }, true],
    ['In miss', { matchExpressions: [{ key: 'env', operator: 'In', values: ['prod'] }] }, { env: 'dev' }, false],
    ['In absent', { matchExpressions: [{ key: 'env', operator: 'In', values: ['prod'] }] }, {}, false],
    ['NotIn hit', { matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['dev'] }] }, { env: 'prod' }, true],
    ['NotIn absent matches', { matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['dev'] }] }, {}, true],
    ['NotIn miss', { matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['dev'] }] }, { env: 'dev' }, false],
    ['Exists hit', { matchExpressions: [{ key: 'env', operator: 'Exists' }] }, { env: '' }, true],
    ['Exists miss', { matchExpressions: [{ key: 'env', operator: 'Exists' }] }, { other: 'x' }, false],
    ['DoesNotExist hit', { matchExpressions: [{ key: 'env', operator: 'DoesNotExist' }] }, {}, true],
    ['DoesNotExist miss', { matchExpressions: [{ key: 'env', operator: 'DoesNotExist' }] }, { env: 'x' }, false],
    ['AND of all', { matchLabels: { a: '1' }, matchExpressions: [{ key: 'b', operator: 'Exists' }] }, { a: '1' }, false],
  ];
  for (const [name, selector, labels, expected] of cases) {
    void it(`objectSelector: ${name}`, () => {
      const rs = set(clusterRule('r', { match: { objectSelector: selector } }));
      const p = pod({ privileged: true, ...(labels ? { labels } : {}) });
      assert.equal(only(evaluate(rs, input(p))).result, expected ? 'fail' : 'skip');
    });
    void it(`namespaceSelector: ${name}`, () => {
      const rs = set(clusterRule('r', { match: { namespaceSelector: selector } }));
      assert.equal(only(evaluate(rs, input(pod({ privileged: true }), { namespaceLabels: labels ?? {} }))).result, expected ? 'fail' : 'skip');
    });
  }
  void it('objectSelector matches if object OR oldObject matches', () => {
    const rs = set(clusterRule('r', { match: { objectSelector: { matchLabels: { team: 'a' } } } }));
    const v = only(evaluate(rs, input(pod({ privileged: true }), { operation: 'UPDATE', oldObject: pod({ labels: { team: 'a' } }) })));
    assert.equal(v.result, 'fail');
  });
  void it('namespaceSelector with unknown namespace labels is an error', () => {
    const rs = set(clusterRule('r', { match: { namespaceSelector: { matchLabels: { env: 'prod' } } } }));
    const v = only(evaluate(rs, input(pod({ privileged: true }), { namespaceLabels: undefined })));
    assert.equal(v.result, 'error');
    assert.match(v.message, /rule r could not be evaluated: the labels of namespace default are unknown/);
  });
  void it('a Namespace is selected by its own labels when namespaceLabels are not given', () => {
    const rs = set(clusterRule('r', { match: { kinds: [{ apiGroups: [''], kinds: ['Namespace'] }], namespaceSelector: { matchLabels: { env: 'prod' } } }, validate: { schema: false } }));
    const ns = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x', labels: { env: 'prod' } } };
    assert.equal(only(evaluate(rs, input(ns, { name: 'x', namespaceLabels: undefined }))).result, 'fail');
  });
});

void describe('subresources', () => {
  void it('is not matched unless named', () => {
    const rs = set(clusterRule('r'));
    const v = only(evaluate(rs, input(pod({ privileged: true }), { subResource: 'status', operation: 'UPDATE' })));
    assert.equal(v.result, 'skip');
    assert.match(v.message, /status subresource is not named/);
  });
  void it('pods/ephemeralcontainers is checked by every rule that matches Pod, unnamed (as Pod Security Admission does)', () => {
    // Issue 9 item 2: `kubectl debug` adds containers only through this
    // subresource; before, a privileged debug container was skipped here.
    const debugged = pod({ privileged: false });
    (debugged.spec as { ephemeralContainers?: unknown[] }).ephemeralContainers = [
      { name: 'debugger', image: 'busybox', securityContext: { privileged: true } },
    ];
    const container = { type: 'object', properties: { securityContext: { type: 'object', properties: { privileged: { const: false } } } } };
    const validate = { message: 'no', schema: { properties: { spec: { properties: { ephemeralContainers: { type: 'array', items: container } } } } } };
    for (const kinds of [['Pod'], ['*']]) {
      const rs = set(clusterRule('r', { match: { kinds: [{ apiGroups: [''], kinds }] }, validate }));
      const v = only(evaluate(rs, input(debugged, { subResource: 'ephemeralcontainers', operation: 'UPDATE', oldObject: pod({ privileged: false }) })));
      assert.equal(v.result, 'fail', kinds.join());
      assert.deepEqual(v.violations, [{ path: 'spec.ephemeralContainers[0].securityContext.privileged', message: 'must be equal to false' }]);
      assert.equal(decideAdmission(rs, input(debugged, { subResource: 'ephemeralcontainers', operation: 'UPDATE' })).allowed, false);
    }
    // Only the Pod's own subresource: other subresources still need naming,
    // and a workload's template rules do not see it.
    const rs = set(clusterRule('r', { validate }));
    assert.equal(only(evaluate(rs, input(debugged, { subResource: 'status', operation: 'UPDATE' }))).result, 'skip');
    const other = { ...debugged, apiVersion: 'example.com/v1' };
    assert.deepEqual(evaluate(set(clusterRule('r', { match: { kinds: [{ apiGroups: ['*'], kinds: ['Pod'] }] }, validate })),
      input(other, { kind: { group: 'example.com', version: 'v1', kind: 'Pod' }, subResource: 'ephemeralcontainers', operation: 'UPDATE' })).map((v) => v.result), ['skip']);
  });
  void it('is matched when named or "*"', () => {
    for (const subresources of [['ephemeralcontainers'], ['*']]) {
      const rs = set(clusterRule('r', { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'], subresources }] } }));
      const v = only(evaluate(rs, input(pod({ privileged: true }), { subResource: 'ephemeralcontainers', operation: 'UPDATE' })));
      assert.equal(v.result, 'fail');
    }
  });
});

void describe('pod templates', () => {
  const privileged = { containers: [{ name: 'ok', image: 'x' }, { name: 'bad', image: 'x', securityContext: { privileged: true } }] };
  const template = { metadata: { labels: { app: 'x' } }, spec: privileged };
  const workloads: [string, string, KubeObject['spec'], string][] = [
    ['Deployment', 'apps/v1', { template }, 'spec.template.spec.containers[1].securityContext.privileged'],
    ['StatefulSet', 'apps/v1', { template }, 'spec.template.spec.containers[1].securityContext.privileged'],
    ['DaemonSet', 'apps/v1', { template }, 'spec.template.spec.containers[1].securityContext.privileged'],
    ['ReplicaSet', 'apps/v1', { template }, 'spec.template.spec.containers[1].securityContext.privileged'],
    ['ReplicationController', 'v1', { template }, 'spec.template.spec.containers[1].securityContext.privileged'],
    ['Job', 'batch/v1', { template }, 'spec.template.spec.containers[1].securityContext.privileged'],
    ['CronJob', 'batch/v1', { schedule: '* * * * *', jobTemplate: { spec: { template } } }, 'spec.jobTemplate.spec.template.spec.containers[1].securityContext.privileged'],
  ];
  const rs = set(clusterRule('no-priv'));
  for (const [kind, apiVersion, spec, path] of workloads) {
    void it(`checks the template of a ${kind} and reports ${path}`, () => {
      const obj = { apiVersion, kind, metadata: { name: 'w', namespace: 'default' }, spec };
      const v = only(evaluate(rs, input(obj)));
      assert.equal(v.result, 'fail');
      assert.deepEqual(v.violations, [{ path, message: 'must be equal to false' }]);
      assert.match(v.message, new RegExp(`no-priv: Privileged containers are not allowed\\. \\[${path.replace(/[[\].]/g, '\\$&')}: must be equal to false\\]`));
      const good = { ...obj, spec: JSON.parse(JSON.stringify(spec).replace('"privileged":true', '"privileged":false')) };
      assert.equal(only(evaluate(rs, input(good))).result, 'pass');
    });
  }
  void it('validates the template as a Pod (apiVersion/kind/metadata from the template)', () => {
    const schema = { required: ['apiVersion', 'kind'], properties: { kind: { const: 'Pod' }, metadata: { required: ['labels'] } } };
    const r = set(clusterRule('needs-labels', { validate: { schema } }));
    const dep = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'd', namespace: 'default' }, spec: { template: { spec: {} } } };
    const v = only(evaluate(r, input(dep)));
    assert.deepEqual(v.violations, [{ path: 'spec.template.metadata.labels', message: 'is required' }]);
  });
  void it('podTemplates: false opts out', () => {
    const r = set(clusterRule('r', { podTemplates: false }));
    const dep = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'd', namespace: 'default' }, spec: { template } };
    assert.deepEqual(evaluate(r, input(dep)), []);
  });
  void it('does not check a workload subresource (scale) as a template', () => {
    const dep = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'd', namespace: 'default' }, spec: { template } };
    assert.equal(only(evaluate(rs, input(dep, { subResource: 'scale', operation: 'UPDATE' }))).result, 'skip');
  });
  void it('a kind of the same name in another group is not a workload', () => {
    const other = { apiVersion: 'example.com/v1', kind: 'Deployment', metadata: { name: 'd', namespace: 'default' }, spec: { template } };
    assert.deepEqual(evaluate(rs, input(other, { kind: { group: 'example.com', version: 'v1', kind: 'Deployment' } })), []);
  });
  void it('matchedKinds includes the workloads a Pod rule implies', () => {
    const kinds = rs.matchedKinds().map((k) => `${k.group}/${k.kind}`);
    assert.deepEqual(kinds, ['/Pod', '/ReplicationController', 'apps/DaemonSet', 'apps/Deployment', 'apps/ReplicaSet', 'apps/StatefulSet', 'batch/CronJob', 'batch/Job']);
  });
});
