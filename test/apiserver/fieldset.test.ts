/** The pure field-set module (structured-merge-diff semantics) and managedFields bookkeeping. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  decodeFieldsV1, encodeFieldsV1, members, mergeApplied, pathKey, pathString, removePath,
} from '../../packages/devcluster/src/apiserver/apply/fieldset.ts';
import { recordApply, recordUpdate, managerFromUserAgent, type Writer } from '../../packages/devcluster/src/apiserver/apply/managed.ts';
import { typeModel } from '../../packages/devcluster/src/apiserver/openapi/model.ts';
import { Registry } from '../../packages/devcluster/src/apiserver/registry.ts';
import { ApiError } from '../../packages/devcluster/src/apiserver/status.ts';

const reg = new Registry();
const podModel = typeModel(reg.get('', 'v1', 'pods')!)!;
const svcModel = typeModel(reg.get('', 'v1', 'services')!)!;
const t = { nav: podModel, root: podModel.root };

const pod = {
  apiVersion: 'v1', kind: 'Pod',
  metadata: { name: 'p', labels: { app: 'a' }, finalizers: ['x'] },
  spec: {
    containers: [{ name: 'c', image: 'i', ports: [{ containerPort: 80 }], args: ['a', 'b'], securityContext: {} }],
    nodeSelector: { zone: 'z' },
  },
};

test('members: list-maps by key (protocol defaulted), sets by value, atomic lists and structs whole, map entries', () => {
  const all = members(t.nav, t.root, pod);
  assert.deepEqual([...all].filter(([, m]) => m.container).map(([k]) => pathString(k)).sort(), ['.metadata.labels', '.spec.nodeSelector'], 'maps, not structs');
  const keys = [...all].filter(([, m]) => !m.container).map(([k]) => pathString(k)).sort();
  assert.deepEqual(keys, [
    '.apiVersion', '.kind',
    '.metadata.finalizers[="x"]', '.metadata.labels.app', '.metadata.name',
    '.spec.containers[name="c"]', '.spec.containers[name="c"].args', '.spec.containers[name="c"].image', '.spec.containers[name="c"].name',
    '.spec.containers[name="c"].ports[containerPort=80,protocol="TCP"]', '.spec.containers[name="c"].ports[containerPort=80,protocol="TCP"].containerPort',
    '.spec.containers[name="c"].securityContext',
    '.spec.nodeSelector.zone',
  ]);
  const svc = members(svcModel, svcModel.root, { spec: { selector: { app: 'a' }, ports: [{ port: 443, protocol: 'UDP' }] } });
  assert.ok(svc.has(pathKey(['f:spec', 'f:ports', 'k:{"port":443,"protocol":"UDP"}', 'f:port'])));
  const dep = typeModel(reg.get('apps', 'v1', 'deployments')!)!;
  const d = members(dep, dep.root, { spec: { selector: { matchLabels: { a: 'b' } } } });
  assert.deepEqual([...d.keys()].map(pathString), ['.spec.selector'], 'LabelSelector is atomic');
});

test('FieldsV1 round trip, with "." on members that have children', () => {
  const set = new Set([...members(t.nav, t.root, pod)].filter(([, m]) => !m.container).map(([k]) => k));
  const f = encodeFieldsV1(set);
  const containers = ((f['f:spec'] as Record<string, unknown>)['f:containers'] as Record<string, Record<string, unknown>>)['k:{"name":"c"}']!;
  assert.deepEqual(containers['.'], {});
  assert.deepEqual(containers['f:image'], {});
  assert.deepEqual(decodeFieldsV1(f), set);
  assert.deepEqual(decodeFieldsV1({ 'f:a': 'junk', 'f:b': {} }), new Set([pathKey(['f:b'])]));
});

test('mergeApplied merges list-maps by key and replaces atomic lists; removePath takes out one item', () => {
  const merged = mergeApplied(t.nav, t.root, pod, { spec: { containers: [{ name: 'd', image: 'j' }, { name: 'c', args: ['z'] }] } }) as typeof pod;
  assert.deepEqual(merged.spec.containers.map((c) => [c.name, c.image, c.args]), [['c', 'i', ['z']], ['d', 'j', undefined]]);
  removePath(t.nav, t.root, merged, pathKey(['f:spec', 'f:containers', 'k:{"name":"d"}']));
  removePath(t.nav, t.root, merged, pathKey(['f:metadata', 'f:finalizers', 'v:"x"']));
  removePath(t.nav, t.root, merged, pathKey(['f:nope', 'f:deeper']));
  assert.deepEqual(merged.spec.containers.map((c) => c.name), ['c']);
  assert.deepEqual(merged.metadata.finalizers, []);
});

const w = (manager: string, now = '2026-01-01T00:00:00Z'): Writer => ({ manager, apiVersion: 'v1', subresource: '', hasStatus: true, now });

test('recordUpdate: changed fields move to the writer, removed fields leave everyone, status and stripped metadata are not tracked', () => {
  const created = { ...structuredClone(pod), metadata: { ...pod.metadata, uid: 'u', managedFields: [] as unknown[] }, status: { phase: 'Pending' } };
  created.metadata.managedFields = recordUpdate(t, undefined, created, w('create'));
  const f = created.metadata.managedFields[0] as { fieldsV1: Record<string, unknown>; operation: string };
  assert.equal(f.operation, 'Update');
  assert.equal(f.fieldsV1['f:status'], undefined);
  assert.deepEqual(Object.keys(f.fieldsV1['f:metadata'] as object), ['f:finalizers', 'f:labels']);
  const next = structuredClone(created);
  next.metadata.labels = { app: 'b' };
  const entries = recordUpdate(t, created, next, w('edit', '2026-01-02T00:00:00Z'));
  assert.deepEqual(entries.map((e) => e.manager), ['create', 'edit']);
  assert.deepEqual(entries[1]!.fieldsV1, { 'f:metadata': { 'f:labels': { 'f:app': {} } } });
  assert.deepEqual((entries[0]!.fieldsV1['f:metadata'] as Record<string, unknown>)['f:labels'], {}, 'the creator keeps the map it added, not the label');
});

test('recordApply: conflict message and causes for several managers, force moves ownership, pruning', () => {
  const live = structuredClone(pod) as Record<string, unknown> & typeof pod & { metadata: { managedFields?: unknown[] } };
  live.metadata.managedFields = recordUpdate(t, undefined, live, w('one'));
  const config = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', labels: { app: 'b' } }, spec: { containers: [{ name: 'c', image: 'k' }] } };
  assert.throws(() => recordApply(t, live, config, w('two'), false), (e: unknown) => {
    assert.ok(e instanceof ApiError);
    assert.equal(e.code, 409);
    assert.equal(e.message, 'Apply failed with 2 conflicts: conflicts with "one" using v1:\n- .metadata.labels.app\n- .spec.containers[name="c"].image');
    return true;
  });
  const forced = recordApply(t, live, config, w('two'), true);
  assert.equal((forced.object as typeof pod).spec.containers[0]!.image, 'k');
  const two = forced.managedFields.find((e) => e.manager === 'two')!;
  assert.equal(two.operation, 'Apply');
  const again = recordApply(t, { ...forced.object, metadata: { ...(forced.object['metadata'] as object), managedFields: forced.managedFields } },
    { ...config, metadata: { name: 'p' } }, w('two'), false);
  assert.deepEqual((again.object as typeof pod).metadata.labels, {}, 'the label only two applied is pruned');
  assert.equal((again.object as typeof pod).spec.containers[0]!.image, 'k', 'still applied');
});

test('managerFromUserAgent takes the product before the first slash', () => {
  assert.equal(managerFromUserAgent('kubectl/v1.35.0 (linux/amd64) kubernetes/abc'), 'kubectl');
  assert.equal(managerFromUserAgent(undefined), '');
});

test('recordUpdate starts from the managedFields the writer sent: a migration replaces them, [{}] clears them', () => {
  const old = structuredClone(pod) as typeof pod & { metadata: { managedFields?: unknown[] } };
  old.metadata.managedFields = recordUpdate(t, undefined, old, w('create'));
  const next = structuredClone(old);
  next.spec.containers[0]!.image = 'j';
  const migrated = [{ manager: 'mine', operation: 'Apply', apiVersion: 'v1', time: '2026-01-01T00:00:00Z', fieldsType: 'FieldsV1', fieldsV1: { 'f:metadata': { 'f:labels': { 'f:app': {} } } } }];
  assert.deepEqual(recordUpdate(t, old, next, w('edit'), migrated).map((e) => e.manager), ['mine', 'edit']);
  assert.deepEqual(recordUpdate(t, old, next, w('edit'), [{}]).map((e) => e.manager), ['edit']);
});
