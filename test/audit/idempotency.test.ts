import assert from 'node:assert/strict';
import { test } from 'node:test';
import { actionKey, IdempotencyStore } from '../../src/audit/idempotency.ts';
import { actionAnnotation, actionAnnotationKey, parseActionAnnotations } from '../../src/audit/action-annotation.ts';
import { allLedgerShardNames, compactLedger, decodeLedgerEntry, encodeLedgerEntry, ledgerPatch, ledgerShardName } from '../../src/audit/ledger.ts';

const pod = { group: '', version: 'v1', kind: 'Pod' };
const parts = { rule: 'no-privileged', gvk: pod, namespace: 'default', name: 'web', actionType: 'alert' as const };

void test('actionKey is sha256 hex of the tuple and distinguishes every field', () => {
  const k = actionKey(parts);
  assert.match(k, /^[0-9a-f]{64}$/);
  assert.equal(actionKey({ ...parts }), k, 'stable');
  const variants = [
    { ...parts, rule: 'other' },
    { ...parts, gvk: { ...pod, version: 'v2' } },
    { ...parts, namespace: 'prod' },
    { ...parts, name: 'api' },
    { ...parts, actionType: 'label' as const },
    // field boundaries are unambiguous: moving a character across fields changes the key
    { ...parts, namespace: 'defaul', name: 'tweb' },
  ];
  assert.equal(new Set(variants.map(actionKey).concat(k)).size, variants.length + 1);
});

void test('has() is true inside the window and false after it (TTL on an injected clock)', () => {
  let now = 1_000_000;
  const store = new IdempotencyStore({ ttlMs: 1000, now: () => now });
  store.record('a', { epoch: 'u/1', at: now, state: 'done' });
  store.record('b', { epoch: 'u/1', at: now, state: 'intent', until: now + 5000 });
  now += 999;
  assert.equal(store.has('a'), true);
  now += 2;
  assert.equal(store.has('a'), false, 'default TTL over');
  assert.equal(store.has('b'), true, 'until wins over the default TTL');
  now += 4000;
  assert.equal(store.has('b'), false);
});

void test('bounded: the least recently used key goes first', () => {
  const store = new IdempotencyStore({ max: 2 });
  store.record('a', { epoch: 'e', at: 1, state: 'done' });
  store.record('b', { epoch: 'e', at: 1, state: 'done' });
  store.has('a');
  store.get('a');
  store.record('c', { epoch: 'e', at: 1, state: 'done' });
  assert.deepEqual(['a', 'b', 'c'].map((k) => store.has(k)), [true, false, true]);
  assert.equal(store.size, 2);
});

void test('a late, older observation never reopens or shortens a newer record', () => {
  let now = 10_000;
  const store = new IdempotencyStore({ now: () => now });
  store.record('k', { epoch: 'u/2', at: 9_000, state: 'done', until: 20_000 });
  store.record('k', { epoch: 'u/1', at: 5_000, state: 'done', until: 6_000 }); // already expired and older
  assert.equal(store.get('k')?.epoch, 'u/2');
  now = 19_000;
  assert.equal(store.has('k'), true);
});

void test('followers learn label/annotate actions from provenance annotations on objects', () => {
  const store = new IdempotencyStore();
  const at = Date.UTC(2025, 0, 1);
  const [k1, v1] = actionAnnotation({ rule: 'team-a/require-owner', actionType: 'label', epoch: 'uid-1/3', at });
  const [k2, v2] = actionAnnotation({ rule: 'no-privileged', actionType: 'annotate', epoch: 'uid-1/3', at });
  assert.match(k1, /^actions\.portal\.dev\/label\.[0-9a-f]{16}$/);
  assert.ok(k1.split('/')[1]!.length <= 63);
  const object = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'web',
      namespace: 'team-a',
      annotations: {
        [k1]: v1,
        [k2]: v2,
        'actions.portal.dev/label.0000000000000000': v1, // value does not match the key: ignored
        'actions.portal.dev/evict.x': 'not json',
        'other/annotation': 'x',
      },
    },
  };
  assert.equal(store.observeObject(pod, object), 2);
  assert.equal(store.has(actionKey({ rule: 'team-a/require-owner', gvk: pod, namespace: 'team-a', name: 'web', actionType: 'label' })), true);
  assert.equal(store.get(actionKey({ rule: 'no-privileged', gvk: pod, namespace: 'team-a', name: 'web', actionType: 'annotate' }))?.epoch, 'uid-1/3');
  assert.deepEqual(parseActionAnnotations({ [actionAnnotationKey('r', 'alert')]: JSON.stringify({ rule: 'r', epoch: 'e', at: 'nope' }) }), []);
});

void test('followers learn alert/evict records from the ledger; removed keys are forgotten', () => {
  let now = 50_000;
  const store = new IdempotencyStore({ now: () => now });
  const intent = { state: 'intent' as const, epoch: 'u/4', at: now, until: now + 3_600_000, startsAt: now - 10 };
  const v1 = { a: encodeLedgerEntry(intent), b: encodeLedgerEntry({ state: 'done', epoch: 'u/4', at: now }), junk: '{' };
  assert.equal(store.observeLedger(v1), 2);
  assert.deepEqual(store.get('a'), intent, 'intent is kept and treated as emitted');
  const v2 = { b: v1.b };
  store.observeLedger(v2, v1);
  assert.equal(store.has('a'), false, 'leader removed it (resolved): window closed');
  assert.equal(store.has('b'), true);
  now += 1;
});

void test('ledger codec, sharding, merge patch and compaction', () => {
  const e = { state: 'done' as const, epoch: 'u/1', at: 5, until: 10, startsAt: 4 };
  assert.deepEqual(decodeLedgerEntry(encodeLedgerEntry(e)), e);
  const eviction = { state: 'intent' as const, epoch: 'u/2', at: 5, until: 10, uid: '3f1c2b9e-0000-4000-8000-000000000001' };
  assert.deepEqual(decodeLedgerEntry(encodeLedgerEntry(eviction)), eviction, 'the evicted pod uid survives the ledger');
  assert.equal(decodeLedgerEntry('{"s":"maybe","e":"x","t":1}'), undefined);
  assert.equal(decodeLedgerEntry('null'), undefined);
  assert.equal(ledgerShardName('c0ffee'), 'portal-audit-ledger-c');
  assert.equal(allLedgerShardNames().length, 16);
  assert.deepEqual(ledgerPatch({ k: e }, ['old']), { data: { old: null, k: encodeLedgerEntry(e) } });
  const data = {
    expired: encodeLedgerEntry({ state: 'done', epoch: 'x', at: 1, until: 99 }),
    defaultExpired: encodeLedgerEntry({ state: 'done', epoch: 'x', at: 1 }),
    live1: encodeLedgerEntry({ state: 'done', epoch: 'x', at: 50, until: 1000 }),
    live2: encodeLedgerEntry({ state: 'intent', epoch: 'x', at: 60, until: 1000 }),
    live3: encodeLedgerEntry({ state: 'done', epoch: 'x', at: 70 }),
    junk: 'x',
  };
  assert.deepEqual(compactLedger(data, 100, 50).sort(), ['defaultExpired', 'expired', 'junk']);
  assert.deepEqual(compactLedger(data, 100, 50, 1).sort(), ['defaultExpired', 'expired', 'junk', 'live1', 'live2']);
});
