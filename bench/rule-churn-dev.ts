/**
 * Issue 31 item 5 on a real `portal dev` (one replica): a tenant creates N
 * 62 KB rules one after another while a victim namespace creates Pods at
 * 10/s through the API server. Reported: the time until the N rules are
 * created and until the last is Ready, and the victim's p50/p99 and
 * failures meanwhile, against the victim alone for `quiet` seconds before
 * (the baseline, measured in the same run).
 */
import { readFile } from 'node:fs/promises';
import { CoreV1Api, CustomObjectsApi, KubeConfig, Watch, type V1Pod } from '@kubernetes/client-node';
import { withDev } from '../test/dev/support.ts';
import { bigRule } from '../test/support/big-rule.ts';
import { coreApi, percentile, victim, type VictimResult } from '../test/support/victim.ts';
import { allowedAnswerTime } from '../test/support/exposition.ts';

const ref = { group: 'portal.dev', version: 'v1alpha1', namespace: 'tenant-a', plural: 'portalrules' };

/** `many-N`, its schema salted `mN` (the salt is in each of the 1,050 keys: a longer one would pass the 64 KiB bound). */
const rule = (i: number): Record<string, unknown> => bigRule(`many-${i}`, ref.namespace, `m${i}`);
const pod = (name: string): V1Pod => ({ metadata: { name }, spec: { containers: [{ name: 'app', image: 'nginx:1.27' }] } });

function line(what: string, r: VictimResult): string {
  const total = r.ok + r.failed.length;
  return `${what}: ${r.ok}/${total} admitted, p50 ${percentile(r.latenciesMs, 50).toFixed(0)} ms, p99 ${percentile(r.latenciesMs, 99).toFixed(0)} ms`;
}

async function untilReady(custom: CustomObjectsApi, name: string, ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  while (performance.now() < deadline) {
    const o = (await custom.getNamespacedCustomObject({ ...ref, name }).catch(() => undefined)) as { status?: { conditions?: { type: string; status: string }[] } } | undefined;
    if (o?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${name} not Ready within ${ms} ms`);
}

/** CPU seconds a process has used so far, all its threads (utime + stime of /proc/<pid>/stat, at 100 ticks/s). */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

export async function ruleCreationOnDev(rules: number, quietSeconds: number): Promise<void> {
  const policies = { 'quiet.yaml': 'apiVersion: portal.dev/v1alpha1\nkind: PortalClusterRule\nmetadata: {name: quiet}\nspec:\n  match: {kinds: [{apiGroups: [""], kinds: [ConfigMap]}]}\n  validate: {message: m, schema: {type: object}}\n' };
  await withDev({ name: 'bench-rule-churn', replicas: 1, policies, readyMs: 120_000, outputTail: 20_000 }, async ({ state, child }) => {
    const kc = new KubeConfig();
    kc.loadFromFile(state.kubeconfig);
    const custom = kc.makeApiClient(CustomObjectsApi);
    const core = kc.makeApiClient(CoreV1Api);
    for (const name of ['tenant-a', 'tenant-b', 'tenant-c']) await core.createNamespace({ body: { metadata: { name } } });
    const api = await coreApi(state.kubeconfig);
    const quiet = await victim(api, { namespace: 'tenant-c', pod, rate: 10, seconds: quietSeconds }).done;
    // Every write of the `quiet` rule (its status) while tenant-a's rules arrive.
    let quietWrites = 0;
    const watch = await new Watch(kc).watch('/apis/portal.dev/v1alpha1/portalclusterrules', {}, (type) => void (type === 'MODIFIED' && quietWrites++), () => undefined);
    const replica = state.replicas[0]!;
    const cpu0 = [await cpuSeconds(replica.pid as number), await cpuSeconds(child.pid as number)];
    const during = victim(api, { namespace: 'tenant-b', pod, rate: 10 });
    const t0 = performance.now();
    for (let i = 0; i < rules; i++) await custom.createNamespacedCustomObject({ ...ref, body: rule(i) });
    const created = performance.now() - t0;
    await untilReady(custom, `many-${rules - 1}`, 900_000);
    const ready = performance.now() - t0;
    const seen = await during.stop();
    const cpu1 = [await cpuSeconds(replica.pid as number), await cpuSeconds(child.pid as number)];
    watch.abort();
    console.log(`${rules} rules of ${JSON.stringify(rule(0)).length} bytes on portal dev (1 replica): created in ${(created / 1000).toFixed(1)} s, the last Ready after ${(ready / 1000).toFixed(1)} s`);
    console.log(line(`victim alone (${quietSeconds} s, baseline)`, quiet));
    console.log(line('victim while the rules were created', seen));
    console.log(`ratio (victim p99, during/alone): ${(percentile(seen.latenciesMs, 99) / percentile(quiet.latenciesMs, 99)).toFixed(2)}`);
    console.log(`CPU meanwhile: the replica ${(cpu1[0]! - cpu0[0]!).toFixed(1)} s (${(((cpu1[0]! - cpu0[0]!) / rules) * 1000).toFixed(0)} ms per rule), portal dev's API server ${(cpu1[1]! - cpu0[1]!).toFixed(1)} s; writes of another rule (quiet): ${quietWrites}`);
    console.log(`${replica.name}: ${await allowedAnswerTime(replica.probes)}`);
    for (const f of seen.failed.slice(0, 3)) console.log(`  failed: ${f}`);
  });
}
