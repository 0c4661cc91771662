/**
 * The pods/ephemeralcontainers subresource (issue 9 item 2): what kubectl
 * debug sends (a strategic merge patch), PUT and GET, only
 * spec.ephemeralContainers changing, and admission seeing an UPDATE of kind
 * Pod with subResource "ephemeralcontainers" and the whole Pod. Before, the
 * server answered 404 for the subresource.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AdmissionAttributes } from '../../packages/devcluster/src/apiserver/admission-hook.ts';
import { caller, withServer } from './helpers.ts';

const POD = { metadata: { name: 'web', labels: { app: 'web' } }, spec: { containers: [{ name: 'app', image: 'nginx:1.27' }] } };
const BASE = '/api/v1/namespaces/default/pods/web';
const SMP = 'application/strategic-merge-patch+json';

function ephemeral(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  // `resources: {}` is what kubectl debug sends (Go's zero value): not "set".
  return { name, image: 'busybox:1.36', stdin: true, tty: true, resources: {}, terminationMessagePolicy: 'File', ...extra };
}

test('a strategic merge patch on pods/NAME/ephemeralcontainers adds a container, through admission as an UPDATE of the Pod', async () => {
  const seen: AdmissionAttributes[] = [];
  let deny = false;
  await withServer({
    admission: {
      admit: (a) => {
        seen.push(a);
        return Promise.resolve(deny
          ? { allowed: false, warnings: [], status: { code: 403, reason: 'Forbidden', message: 'no debug containers here' } }
          : { allowed: true, warnings: [] });
      },
    },
  }, async (s) => {
    const call = caller(s, s.adminToken);
    assert.equal((await call('POST', '/api/v1/namespaces/default/pods', POD)).status, 201);
    seen.length = 0;

    // What kubectl debug sends: the two-way merge patch of the Pod.
    const res = await call('PATCH', `${BASE}/ephemeralcontainers`, { spec: { ephemeralContainers: [ephemeral('debugger')] } }, SMP);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body['kind'], 'Pod');
    const spec = res.body['spec'] as { ephemeralContainers: { name: string }[]; containers: unknown[] };
    assert.deepEqual(spec.ephemeralContainers.map((c) => c.name), ['debugger']);
    assert.equal(spec.containers.length, 1);

    assert.equal(seen.length, 1);
    const a = seen[0]!;
    assert.equal(a.operation, 'UPDATE');
    assert.equal(a.subResource, 'ephemeralcontainers');
    assert.deepEqual(a.kind, { group: '', version: 'v1', kind: 'Pod' });
    assert.deepEqual(a.resource, { group: '', version: 'v1', resource: 'pods' });
    assert.equal(a.name, 'web');
    assert.equal((a.object?.['spec'] as { ephemeralContainers: unknown[] }).ephemeralContainers.length, 1);
    assert.equal((a.oldObject?.['spec'] as { ephemeralContainers?: unknown }).ephemeralContainers, undefined);

    // GET on the subresource returns the Pod; the main resource shows the container.
    const got = await call('GET', `${BASE}/ephemeralcontainers`);
    assert.equal(got.status, 200);
    assert.equal(got.body['kind'], 'Pod');
    const main = await call('GET', BASE);
    assert.deepEqual((main.body['spec'] as { ephemeralContainers: { name: string }[] }).ephemeralContainers.map((c) => c.name), ['debugger']);

    // A denial leaves the Pod untouched and reaches the client.
    deny = true;
    const denied = await call('PATCH', `${BASE}/ephemeralcontainers`, { spec: { ephemeralContainers: [ephemeral('second')] } }, SMP);
    assert.equal(denied.status, 403);
    assert.match(String(denied.body['message']), /no debug containers here/);
    const after = await call('GET', BASE);
    assert.equal((after.body['spec'] as { ephemeralContainers: unknown[] }).ephemeralContainers.length, 1);
  });
});

test('only spec.ephemeralContainers changes; PUT works; existing ones cannot change; names must be unique', () =>
  withServer({}, async (s) => {
    const call = caller(s, s.adminToken);
    assert.equal((await call('POST', '/api/v1/namespaces/default/pods', POD)).status, 201);
    const pod = (await call('GET', BASE)).body as { metadata: Record<string, unknown>; spec: Record<string, unknown> };

    // PUT with other changes: labels and containers are ignored, the ephemeral container is added.
    const put = await call('PUT', `${BASE}/ephemeralcontainers`, {
      ...pod,
      metadata: { ...pod.metadata, labels: { app: 'changed' } },
      spec: { ...pod.spec, containers: [{ name: 'app', image: 'evil:1' }], ephemeralContainers: [ephemeral('one')] },
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    const stored = (await call('GET', BASE)).body as { metadata: { labels: Record<string, string> }; spec: { containers: { image: string }[]; ephemeralContainers: unknown[] } };
    assert.deepEqual(stored.metadata.labels, { app: 'web' });
    assert.equal(stored.spec.containers[0]!.image, 'nginx:1.27');
    assert.equal(stored.spec.ephemeralContainers.length, 1);

    // Stale resourceVersion: 409 as for any update.
    const stale = await call('PUT', `${BASE}/ephemeralcontainers`, { ...pod, spec: { ...pod.spec, ephemeralContainers: [ephemeral('one'), ephemeral('two')] } });
    assert.equal(stale.status, 409);

    const cases: [string, unknown, RegExp][] = [
      ['removing', { spec: { ephemeralContainers: [{ name: 'one', $patch: 'delete' }] } }, /existing ephemeral containers "one" may not be removed or changed/],
      ['changing', { spec: { ephemeralContainers: [{ name: 'one', image: 'other:1' }] } }, /existing ephemeral containers "one" may not be removed or changed/],
      ['a duplicate name', { spec: { ephemeralContainers: [ephemeral('app')] } }, /spec\.ephemeralContainers\[1\]\.name: Duplicate value: "app"/],
      ['no image', { spec: { ephemeralContainers: [{ name: 'noimage' }] } }, /spec\.ephemeralContainers\[1\]\.image: Required value/],
      ['ports', { spec: { ephemeralContainers: [ephemeral('p', { ports: [{ containerPort: 80 }] })] } }, /ports: Forbidden: cannot be set for an Ephemeral Container/],
    ];
    for (const [what, patch, message] of cases) {
      const res = await call('PATCH', `${BASE}/ephemeralcontainers`, patch, SMP);
      assert.equal(res.status, 422, `${what}: ${JSON.stringify(res.body)}`);
      assert.match(String(res.body['message']), message, what);
      assert.match(String(res.body['message']), /^Pod "web" is invalid: /);
    }

    // Other resources do not have the subresource; a missing Pod is a 404 naming it.
    assert.equal((await call('PATCH', '/api/v1/namespaces/default/configmaps/x/ephemeralcontainers', { spec: {} }, SMP)).status, 404);
    const missing = await call('PATCH', '/api/v1/namespaces/default/pods/nope/ephemeralcontainers', { spec: {} }, SMP);
    assert.equal(missing.status, 404);
    assert.equal((missing.body['details'] as { name: string }).name, 'nope');

    // Discovery lists it, after pods (client-node takes the first entry of a kind).
    const list = (await call('GET', '/api/v1')).body as { resources: { name: string; verbs: string[] }[] };
    const names = list.resources.map((r) => r.name);
    assert.ok(names.indexOf('pods/ephemeralcontainers') > names.indexOf('pods'));
    assert.deepEqual(list.resources.find((r) => r.name === 'pods/ephemeralcontainers')?.verbs, ['get', 'patch', 'update']);
  }));
