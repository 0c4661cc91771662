/**
 * VapInformerSource: policies, bindings and params from the embedded API
 * server into the VAP evaluator, as the audit on every replica would read
 * them: verdicts follow changes to the policy, the params and the bindings.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { VapInformerSource } from '../../src/sources/vap-informers.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { verdictOf, type VapAttributes } from '../../src/policy/vap/index.ts';
import { apiServer, clientFor, until } from '../leader/cluster.ts';

const VAP = '/apis/admissionregistration.k8s.io/v1';

test('policies, bindings and params reach the evaluator; verdicts follow their changes', async (t) => {
  const api = await apiServer(t);
  const call = async (method: string, path: string, body?: unknown): Promise<void> => {
    const r = await fetch(`${api.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${api.adminToken}`, 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    assert.ok(r.ok, `${method} ${path}: ${await r.text()}`);
  };
  await call('POST', `${VAP}/validatingadmissionpolicies`, {
    metadata: { name: 'replica-limit' },
    spec: {
      paramKind: { apiVersion: 'v1', kind: 'ConfigMap' },
      matchConstraints: { resourceRules: [{ apiGroups: ['apps'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['deployments'] }] },
      validations: [{ expression: 'object.spec.replicas <= int(params.data.max)', messageExpression: "'at most ' + params.data.max" }],
    },
  });
  await call('POST', `${VAP}/validatingadmissionpolicybindings`, {
    metadata: { name: 'replica-limit' },
    spec: { policyName: 'replica-limit', validationActions: ['Deny'], paramRef: { name: 'limits', parameterNotFoundAction: 'Deny' } },
  });
  await call('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'limits' }, data: { max: '3' } });

  const source = new VapInformerSource(clientFor(api, 'audit'), silentLogger());
  const controller = new AbortController();
  const done = source.start(controller.signal);
  t.after(() => {
    controller.abort();
    return done;
  });
  await source.waitForSync();
  // Synced; ready once every watch (the param informer's too) is established.
  await until('the source to be ready', 5000, () => source.ready());

  const deployment = (replicas: number): VapAttributes => ({
    operation: 'AUDIT',
    kind: { group: 'apps', version: 'v1', kind: 'Deployment' },
    resource: { group: 'apps', version: 'v1', resource: 'deployments' },
    subResource: '',
    namespace: 'default',
    name: 'web',
    namespaced: true,
    object: { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web', namespace: 'default' }, spec: { replicas } },
    oldObject: null,
  });
  const ns = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'default' } };
  const results = (replicas: number): string[] => source.evaluate(deployment(replicas), ns).map((r) => `${r.binding} ${verdictOf(r).result} ${verdictOf(r).message}`);

  assert.deepEqual(results(5), ["replica-limit fail ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit' denied request: at most 3 (params default/limits)"]);
  assert.equal(source.evaluate(deployment(2), ns)[0]?.result, 'pass');

  await call('PATCH', '/api/v1/namespaces/default/configmaps/limits', { data: { max: '10' } });
  await until('the new param value', 5000, () => source.evaluate(deployment(5), ns)[0]?.result === 'pass');

  await call('DELETE', '/api/v1/namespaces/default/configmaps/limits');
  await until('the missing param', 5000, () => /no params found/.test(verdictOf(source.evaluate(deployment(5), ns)[0]!).message));

  await call('DELETE', `${VAP}/validatingadmissionpolicybindings/replica-limit`);
  await until('the binding to be gone', 5000, () => source.evaluate(deployment(5), ns).length === 0);
  assert.deepEqual([...source.compileErrors().keys()], []);
});
