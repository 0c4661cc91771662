/**
 * Hostile: a flood of PortalExceptions naming a rule that does not exist
 * (issue 33 item 5). Whoever may write exceptions in a namespace can create
 * many; each one's status must still tell the truth (READY False,
 * RuleNotFound), flip when the rule appears, and cost the leader a bounded
 * amount: one status write per exception per change of what its status
 * says, every write through the client's write limiter (paced), and none at
 * all for a rule change that alters no exception's status.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createKubeClient } from '../../src/kube/client.ts';
import { APP_NS, clusterWithCrds, privilegedRule, startReplica, until } from '../audit/support/controller-harness.ts';

const FLOOD = 150;
/** The harness's client: qps 50, burst 100 (startReplica). */
const QPS = 50;
const BURST = 100;

function exception(i: number): Record<string, unknown> {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalException',
    metadata: { name: `flood-${i}`, namespace: APP_NS },
    spec: { rules: ['max-replicas-typo'], match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, reason: 'flood' },
  };
}

void test('an exception flood naming an unknown rule: RuleNotFound on each, one paced write per status change, flips when the rule appears', { timeout: 180_000 }, async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  const kube = createKubeClient({ kubeconfigYaml: api.kubeConfig('tester'), qps: 100, burst: 100, userAgent: 'tester' });
  for (let i = 0; i < FLOOD; i++) await admin.apply(exception(i));
  const leader = await startReplica(t, api, 'replica-a');
  const started = performance.now();
  leader.grant();

  const readies = async (): Promise<Map<string, string>> => {
    const list = (await kube.customObjects.listNamespacedCustomObject({ group: 'portal.dev', version: 'v1alpha1', namespace: APP_NS, plural: 'portalexceptions' })) as {
      items: { metadata: { name: string }; status?: { conditions?: { type: string; status: string; reason: string; message: string }[] } }[];
    };
    return new Map(list.items.map((o) => {
      const c = o.status?.conditions?.find((x) => x.type === 'Ready');
      return [o.metadata.name, c ? `${c.status}/${c.reason}` : ''];
    }));
  };
  const all = async (want: string): Promise<boolean> => {
    const r = await readies();
    return r.size === FLOOD && [...r.values()].every((v) => v === want);
  };

  await until('every exception READY False/RuleNotFound', 120_000, () => all('False/RuleNotFound'));
  const elapsed = (performance.now() - started) / 1000;
  const writes = leader.actuator.exceptionStatus.writes;
  assert.equal(writes, FLOOD, 'one status write per exception');
  // Paced: beyond the burst, the limiter lets QPS writes through per second (a lower bound only, so a slow machine cannot fail it).
  assert.ok(elapsed >= (FLOOD - BURST) / QPS, `${FLOOD} writes took ${elapsed.toFixed(2)} s, under the write limiter's pace`);
  const message = (await kube.customObjects.getNamespacedCustomObject({ group: 'portal.dev', version: 'v1alpha1', namespace: APP_NS, plural: 'portalexceptions', name: 'flood-0' })) as {
    status: { conditions: { type: string; message: string }[] };
  };
  assert.match(message.status.conditions.find((c) => c.type === 'Ready')!.message, /"max-replicas-typo"/);

  // A rule that none of them names: the rule set changes, no exception's status does, so nothing is written.
  await admin.apply(privilegedRule('unrelated'));
  await until('the leader holds the unrelated rule', 30_000, () => leader.source.ruleSet.states().some((s) => s.name === 'unrelated'));
  const flushes = leader.actuator.exceptionStatus.flushes;
  await until('a flush after the unrelated rule', 30_000, () => leader.actuator.exceptionStatus.flushes > flushes);
  assert.equal(leader.actuator.exceptionStatus.writes, FLOOD, 'no write for a change that alters no status');

  // The rule appears: every exception flips to Active, once each.
  await admin.apply(privilegedRule('max-replicas-typo'));
  await until('every exception READY True/Active', 120_000, () => all('True/Active'));
  await until('the writer has written them', 30_000, () => leader.actuator.exceptionStatus.writes >= 2 * FLOOD);
  assert.equal(leader.actuator.exceptionStatus.writes, 2 * FLOOD, 'one more write per exception');
});
