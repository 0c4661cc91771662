// Issue 31, attack 1 (a tenant's stored object puts every replica into an
// OOM crash loop), against real `portal dev` replicas: alice stores an Audit
// PortalRule whose evaluation allocates (test/evaluation/memory-hog.ts) and a
// Pod with 250,000 args. The replicas run their evaluation threads with a
// small heap (--evaluation-memory), so the audit's thread exhausts it on
// that pair: the thread is replaced, no replica restarts, their peak RSS
// stays under 2 GiB, the rule's status and an Event name the Pod, and bob,
// creating Pods in another namespace at a steady rate meanwhile, stays
// ≥ 99% successful. Without the guard the rule would end with CostExceeded
// and the status would never name the Pod: the test cannot pass without it.
// (The issue's own JSON Schema rule is the compiler's to refuse; this one
// passes every apply-time bound, so it tests the runtime guard alone.)
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { until } from '../support/until.ts';
import { coreApi, victim, type Victim } from '../support/victim.ts';
import { alive, kubectl, withDev } from '../dev/support.ts';
import { bigPod, HOG_LIMIT_MIB, hogRule } from '../evaluation/memory-hog.ts';
import { peakRss } from './floods.ts';

const GIB = 1024 * 1024 * 1024;

interface Condition { type: string; status: string; reason?: string; message?: string }

test('a stored object that exhausts an evaluation thread: no restart, bounded RSS, status and Event name it, other namespaces unaffected', { timeout: 600_000 }, async () => {
  const policies = async (dir: string): Promise<string> => {
    await mkdir(join(dir, 'policies'));
    // portal dev wants a rule to start with: one that passes every Pod.
    await writeFile(
      join(dir, 'policies', 'pods-pass.yaml'),
      'apiVersion: portal.dev/v1alpha1\nkind: PortalClusterRule\nmetadata: {name: pods-pass}\nspec:\n  enforcement: Deny\n  match: {kinds: [{apiGroups: [""], kinds: [Pod]}]}\n  validate: {cel: {expressions: [{expression: "true"}]}}\n',
    );
    return join(dir, 'policies');
  };
  let bob: Victim | undefined;
  const options = { name: 'memory-poison', replicas: 2, policies, flags: ['--evaluation-memory', String(HOG_LIMIT_MIB)], readyMs: 120_000 };
  await withDev(options, async (dev) => {
    const { state, stateFile } = dev;
    const kc = state.kubeconfig;
    const pids = state.replicas.map((r) => r.pid!);
    for (const ns of ['tenant-a', 'tenant-b']) assert.equal((await kubectl(kc, ['create', 'namespace', ns])).code, 0);

    // bob: a Pod in tenant-b every 100 ms until stopped.
    bob = victim(await coreApi(kc), { namespace: 'tenant-b', pod: (name) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name }, spec: { containers: [{ name: 'c', image: 'busybox' }] } }), rate: 10, prefix: 'bob' });
    const rule = await kubectl(kc, ['apply', '-f', '-'], JSON.stringify(hogRule('tenant-a', 'args-hog', 'Audit')));
    assert.equal(rule.code, 0, rule.stderr);
    const stored = await kubectl(kc, ['create', '-f', '-'], JSON.stringify(bigPod('tenant-a', 'big')));
    assert.equal(stored.code, 0, stored.stderr);

    // The leader's status names the Pod (its replica's audit met the pair).
    const condition = await until('the rule status names the Pod', 240_000, async () => {
      const r = await kubectl(kc, ['get', 'portalrule', '-n', 'tenant-a', 'args-hog', '-o', 'json']);
      const conditions = r.code === 0 ? ((JSON.parse(r.stdout) as { status?: { conditions?: Condition[] } }).status?.conditions ?? []) : [];
      return conditions.find((c) => c.type === 'MemoryExhausted');
    });
    assert.equal(condition.status, 'True');
    assert.equal(condition.reason, 'OutOfMemory');
    assert.match(condition.message ?? '', new RegExp(`Pod tenant-a/big \\(resourceVersion \\d+\\) exhausted an evaluation thread's memory \\(${HOG_LIMIT_MIB} MiB heap\\)`));
    const event = await until('an OutOfMemory Event on the rule names the Pod', 60_000, async () => {
      const r = await kubectl(kc, ['get', 'events', '-n', 'tenant-a', '-o', 'json']);
      const items = r.code === 0 ? (JSON.parse(r.stdout) as { items: { reason: string; message: string; involvedObject: { name: string } }[] }).items : [];
      return items.find((e) => e.reason === 'OutOfMemory' && e.involvedObject.name === 'args-hog');
    });
    assert.match(event.message, /evaluation failed on Pod tenant-a\/big \(audit\): evaluating it on Pod tenant-a\/big/);

    // Enough of bob's requests to judge, also when the guard acted within a second or two (a quiet machine).
    await until('bob to make 20 requests', 120_000, async () => (bob!.answered() >= 20 ? true : undefined));
    const { ok, failed } = await bob.stop();
    assert.ok(ok + failed.length >= 20, `bob made ${ok + failed.length} requests`);
    assert.ok(ok / (ok + failed.length) >= 0.99, `bob: ${failed.length} of ${ok + failed.length} failed: ${failed.slice(0, 3).join(' | ')}`);

    const now = (await until('state.json', 10_000, async () => JSON.parse(readFileSync(stateFile, 'utf8')) as typeof state));
    assert.deepEqual(now.replicas.map((r) => r.pid), pids, 'no replica restarted');
    for (const pid of pids) {
      assert.ok(alive(pid));
      const peak = await peakRss(pid);
      assert.ok(peak > 0 && peak <= 2 * GIB, `replica ${pid}: peak RSS ${Math.round(peak / 1048576)} MiB`);
      console.log(`replica ${pid}: peak RSS ${Math.round(peak / 1048576)} MiB`);
    }
  }).finally(() => bob?.stop());
});
