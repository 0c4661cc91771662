/** JSON patch (fast-json-patch) and merge patch as kube-apiserver answers them (packages/devcluster/src/apiserver/patch.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jsonPatch, mergePatch } from '../../packages/devcluster/src/apiserver/patch.ts';
import { ApiError } from '../../packages/devcluster/src/apiserver/status.ts';

const doc = { metadata: { name: 'a', labels: { x: '1' } }, spec: { list: [1, 2, 3], secret: 'do-not-echo' } };
const fails = (code: number, re: RegExp) => (e: unknown): boolean => {
  assert.ok(e instanceof ApiError, String(e));
  assert.equal(e.code, code);
  assert.match(e.message, re);
  assert.doesNotMatch(e.message, /do-not-echo/); // the document never travels in the message
  return true;
};

test('RFC 6902 operations apply to a copy', () => {
  const out = jsonPatch(doc, [
    { op: 'add', path: '/spec/list/-', value: 4 },
    { op: 'remove', path: '/spec/list/0' },
    { op: 'replace', path: '/metadata/labels/x', value: '2' },
    { op: 'copy', from: '/metadata/name', path: '/metadata/labels/name' },
    { op: 'move', from: '/spec/secret', path: '/spec/moved' },
    { op: 'test', path: '/metadata/labels', value: { name: 'a', x: '2' } }, // key order does not matter
    { op: 'add', path: '/metadata/labels/a~1b', value: 'escaped' },
  ]);
  assert.deepEqual(out, { metadata: { name: 'a', labels: { x: '2', name: 'a', 'a/b': 'escaped' } }, spec: { list: [2, 3, 4], moved: 'do-not-echo' } });
  assert.deepEqual(doc.spec.list, [1, 2, 3]);
});

test('a bad body is 400, a failing operation 422 naming it', () => {
  assert.throws(() => jsonPatch(doc, { op: 'add' }), fails(400, /cannot unmarshal object/));
  assert.throws(() => jsonPatch(doc, [{ op: 'remove', path: '/spec/nothing' }]), fails(422, /operation 0: remove "\/spec\/nothing"/));
  assert.throws(() => jsonPatch(doc, [{ op: 'add', path: '/spec/a', value: 1 }, { op: 'test', path: '/spec/list', value: [1] }]), fails(422, /operation 1: test .*Test operation failed/));
  assert.throws(() => jsonPatch(doc, [{ op: 'add', path: '/spec/list/9', value: 1 }]), fails(422, /operation 0/));
  assert.throws(() => jsonPatch(doc, [{ op: 'frob', path: '/spec' }]), fails(422, /operation 0: frob/));
  assert.throws(() => jsonPatch(doc, ['nope']), fails(422, /operation 0/));
  assert.throws(() => jsonPatch(doc, [{ op: 'remove', path: '' }]), fails(422, /document root/));
  assert.throws(() => jsonPatch(doc, [{ op: 'add', path: '/__proto__/polluted', value: 1 }]), fails(422, /operation 0/));
  assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
});

test('RFC 7396 merge patch: null deletes, objects merge, the target and the patch stay unshared', () => {
  const patch = { metadata: { labels: { x: null, y: '2' } }, spec: { list: [9] } };
  const out = mergePatch(doc, patch) as typeof doc;
  assert.deepEqual(out, { metadata: { name: 'a', labels: { y: '2' } }, spec: { list: [9], secret: 'do-not-echo' } });
  assert.deepEqual(doc.metadata.labels, { x: '1' });
  assert.notEqual(out.spec.list, patch.spec.list);
  const proto = mergePatch({}, JSON.parse('{"__proto__": {"polluted": 1}}')) as Record<string, unknown>;
  assert.deepEqual(Object.keys(proto), ['__proto__']);
  assert.equal(Object.getPrototypeOf(proto), Object.prototype);
});
