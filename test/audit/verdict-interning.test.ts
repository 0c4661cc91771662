/**
 * The audit keeps every object's verdicts, and the evaluation pool hands back
 * a fresh clone of each: passing objects must share one frozen verdict per
 * rule (issue 20's replica RSS at 50,000 Pods), while a violation keeps its
 * own verdict with its violations, and a skip keeps the exception it names.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { APP_NS, clusterWithCrds, pod, privilegedRule, startReplica, until } from './support/controller-harness.ts';

const key = (name: string) => `/Pod/${APP_NS}/${name}`;

test('passing objects share one frozen verdict per rule; a failing one keeps its violations', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  assert.equal((await admin.request('POST', '/apis/portal.dev/v1alpha1/portalclusterrules', privilegedRule('no-privileged'))).status, 201);
  for (const [name, privileged] of [['ok-1', false], ['ok-2', false], ['bad', true]] as const) {
    assert.equal((await admin.request('POST', `/api/v1/namespaces/${APP_NS}/pods`, pod(name, privileged))).status, 201);
  }
  const replica = await startReplica(t, api, 'replica-a');
  const verdictOf = (name: string) => replica.controller.objectState(key(name))?.verdicts.find((v) => v.rule === 'no-privileged');
  await until('the three Pods to be evaluated', 10_000, () => ['ok-1', 'ok-2', 'bad'].every((n) => verdictOf(n) !== undefined));

  const [a, b, bad] = [verdictOf('ok-1')!, verdictOf('ok-2')!, verdictOf('bad')!];
  assert.equal(a.result, 'pass');
  assert.equal(a, b, 'two passing Pods hold the same verdict object');
  assert.ok(Object.isFrozen(a), 'the shared verdict is frozen');
  assert.equal(bad.result, 'fail');
  assert.notEqual(bad, a);
  assert.ok(bad.violations.length > 0, 'the failing verdict keeps its violations');
});

test('exempted objects share a skip per exception: skips naming different PortalExceptions stay apart', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  assert.equal((await admin.request('POST', '/apis/portal.dev/v1alpha1/portalclusterrules', privilegedRule('no-privileged'))).status, 201);
  for (const [name, prefix] of [['agent', 'agent-*'], ['batch', 'batch-*']] as const) {
    const exception = {
      apiVersion: 'portal.dev/v1alpha1',
      kind: 'PortalException',
      metadata: { name, namespace: APP_NS },
      spec: { rules: ['no-privileged'], match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: [prefix] }, reason: 'interning test' },
    };
    assert.equal((await admin.request('POST', `/apis/portal.dev/v1alpha1/namespaces/${APP_NS}/portalexceptions`, exception)).status, 201);
  }
  for (const name of ['agent-1', 'agent-2', 'batch-1']) assert.equal((await admin.request('POST', `/api/v1/namespaces/${APP_NS}/pods`, pod(name, true))).status, 201);
  const replica = await startReplica(t, api, 'replica-a');
  const verdictOf = (name: string) => replica.controller.objectState(key(name))?.verdicts.find((v) => v.rule === 'no-privileged');
  await until('the three Pods to be evaluated', 10_000, () => ['agent-1', 'agent-2', 'batch-1'].every((n) => verdictOf(n) !== undefined));

  const [a1, a2, b1] = [verdictOf('agent-1')!, verdictOf('agent-2')!, verdictOf('batch-1')!];
  assert.deepEqual([a1.result, a1.exception], ['skip', `${APP_NS}/agent`]);
  assert.equal(a1, a2, 'two Pods exempted by one exception hold the same verdict object');
  assert.ok(Object.isFrozen(a1));
  assert.deepEqual([b1.result, b1.exception], ['skip', `${APP_NS}/batch`], 'the other exception keeps its own skip');
});
