/**
 * Issue 31 item 5, the apply-time check: a tenant applies many 62 KB rules
 * back to back (four at a time, server-side dry runs: every one is checked
 * by `/validate-portal-kinds`, none is stored, so nothing else compiles
 * them) on a real `portal dev`, while another namespace creates Pods through
 * the API server and a third applies a small rule of its own. Before, each
 * check held the replica's main thread for 0.3-0.9 s and the other
 * namespace's reviews waited behind it; now the checks run on their own
 * thread, queued per namespace. (With the check on the main thread, at
 * load 11-15 on the shared 2-vCPU VM, 20 of the other namespace's 108
 * creates failed with "context deadline exceeded"; with it on its thread,
 * none of 140, and 6 of the tenant's 40 applies were told to retry.)
 *
 * Asserted: behaviour, never timing. Every one of the other namespace's
 * creates is admitted; the third namespace's rule is accepted (after a
 * retry if it was told to retry); every answer the tenant gets is an
 * acceptance or a refusal naming its rule (never an internal error); the
 * checks ran on the rule-check thread; the replica neither restarted nor
 * turned unready.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { CoreV1Api, CustomObjectsApi, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { alive, withDev } from '../dev/support.ts';
import { apiMessage, coreApi, percentile, victim } from '../support/victim.ts';
import { bigRule, podRule } from '../support/big-rule.ts';

const GROUP = 'portal.dev';
const VERSION = 'v1alpha1';
/** Rules the tenant applies, and how many at a time. */
const RULES = 40;
const CONCURRENCY = 4;

const pod = (name: string): V1Pod => ({ metadata: { name }, spec: { containers: [{ name: 'app', image: 'nginx:1.27' }] } });

/** tenant-a's applies, CONCURRENCY at a time; each answer: 'accepted' or the API server's message. */
async function tenantApplies(custom: CustomObjectsApi): Promise<{ name: string; answer: string }[]> {
  const answers: { name: string; answer: string }[] = [];
  let next = 0;
  const loop = async (): Promise<void> => {
    for (let i = next++; i < RULES; i = next++) {
      const name = `many-${i}`;
      const body = bigRule(name, 'tenant-a', `m${i}`);
      const answer = await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'tenant-a', plural: 'portalrules', body, dryRun: 'All' }).then(
        () => 'accepted',
        (err: unknown) => apiMessage(err),
      );
      answers.push({ name, answer });
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  return answers;
}

/** tenant-c's one small rule, applied again while it is told to retry (overload); its final answer. */
async function neighbourApply(custom: CustomObjectsApi): Promise<string> {
  const body = podRule('small', 'tenant-c', { type: 'object' });
  for (let attempt = 0; ; attempt++) {
    const answer = await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'tenant-c', plural: 'portalrules', body }).then(
      () => 'accepted',
      (err: unknown) => apiMessage(err),
    );
    if (!answer.includes('Retry the apply') || attempt >= 20) return answer;
  }
}

test('portal dev: a tenant applying many 62 KB rules back to back leaves every other namespace answered', { timeout: 900_000 }, async (t) => {
  const policies = async (dir: string): Promise<string> => {
    await mkdir(join(dir, 'policies'));
    // dev loads at least one rule; this one matches no Pod.
    await writeFile(join(dir, 'policies', 'quiet.yaml'), 'apiVersion: portal.dev/v1alpha1\nkind: PortalClusterRule\nmetadata: {name: quiet}\nspec:\n  match: {kinds: [{apiGroups: [""], kinds: [ConfigMap]}]}\n  validate: {message: m, schema: {type: object}}\n');
    return join(dir, 'policies');
  };
  await withDev({ name: 'rule-check-flood', replicas: 1, policies, logLevel: 'error', flags: ['--audit-interval', '1h'], readyMs: 120_000, outputTail: 20_000 }, async (dev) => {
    const { state } = dev;
    const replica = state.replicas[0]!;
    const kc = new KubeConfig();
    kc.loadFromFile(state.kubeconfig);
    const custom = kc.makeApiClient(CustomObjectsApi);
    const core = kc.makeApiClient(CoreV1Api);
    for (const name of ['tenant-a', 'tenant-b', 'tenant-c']) await core.createNamespace({ body: { metadata: { name } } });

    const other = victim(await coreApi(state.kubeconfig), { namespace: 'tenant-b', pod, rate: 5 });
    const [applies, neighbour] = await Promise.all([tenantApplies(custom), neighbourApply(custom)]);
    const seen = await other.stop();
    t.diagnostic(`tenant-a: ${applies.filter((a) => a.answer === 'accepted').length}/${RULES} accepted; other namespace: ${seen.ok} admitted, ${seen.failed.length} failed, p99 ${percentile(seen.latenciesMs, 99).toFixed(0)} ms (not asserted)`);
    for (const a of applies.filter((x) => x.answer !== 'accepted').slice(0, 3)) t.diagnostic(`${a.name}: ${a.answer.slice(0, 200)}`);

    // The other namespace: every create answered and admitted.
    assert.ok(seen.ok > 0, 'the other namespace created Pods meanwhile');
    assert.deepEqual(seen.failed, [], 'no create of the other namespace failed');
    // The neighbour's rule: accepted (its own flow, not behind the tenant's queue).
    assert.equal(neighbour, 'accepted');
    // The tenant: each answer an acceptance or a refusal that names its rule; never an internal error.
    assert.equal(applies.length, RULES);
    for (const { name, answer } of applies) {
      if (answer === 'accepted') continue;
      assert.match(answer, new RegExp(`PortalRule "${name}" (was not checked: portal is overloaded: .* Retry the apply\\.|is invalid: spec\\.validate: checking this rule )`), `${name}: ${answer}`);
    }
    assert.ok(applies.some((a) => a.answer === 'accepted'), 'the tenant\'s rules are checked, not all refused');

    // The checks ran on the rule-check thread; the replica lived and stayed ready.
    const vars = (await (await fetch(`${replica.probes}/debug/vars`)).json()) as { rule_check?: { batchedItems?: number } };
    assert.ok((vars.rule_check?.batchedItems ?? 0) >= applies.filter((a) => a.answer === 'accepted').length, JSON.stringify(vars.rule_check));
    assert.ok(replica.pid !== null && alive(replica.pid), 'the replica did not restart');
    assert.equal((await fetch(`${replica.probes}/readyz`)).status, 200);
  });
});
