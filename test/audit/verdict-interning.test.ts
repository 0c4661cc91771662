/**
 * The audit keeps every object's verdicts, and the evaluation pool hands back
 * a fresh clone of each: passing objects must share one frozen verdict per
 * rule (issue 20's replica RSS at 50,000 Pods), while a violation keeps its
 * own verdict with its violations.
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
