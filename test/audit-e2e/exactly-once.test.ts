/**
 * Exactly once across leader crashes (issue 5, part 4): `portal dev
 * --replicas 3` with short lease timings, a counting Alertmanager stand-in, a
 * rule with `alert` and `annotate` actions, 30 violating pods, then three
 * SIGKILLs of the current leader while more violating pods are created.
 * Every pod ends up reported, alerted and annotated; no firing alert is sent
 * twice; and every leader-only write in the API server's log comes from the
 * replica that held the Lease at that moment (the last successful Lease write
 * before it, in log order, is its own).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { createKubeClient, type KubeClient } from '../../src/kube/client.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const NS = 'default';
const RULE = `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata:
  name: e2e-require-audited
spec:
  enforcement: Audit
  severity: medium
  category: E2E
  match:
    kinds: [{ apiGroups: [""], kinds: [Pod] }]
  validate:
    message: pods must carry the label audited=yes
    schema:
      type: object
      required: [metadata]
      properties:
        metadata:
          type: object
          required: [labels]
          properties:
            labels: { type: object, required: [audited] }
  audit:
    actions:
      - { type: annotate, key: portal.dev/violation, value: e2e-require-audited }
      - { type: alert }
`;

interface State {
  kubeconfig: string;
  apiserver: string;
  replicas: { name: string; pid: number | null; webhook: string; probes: string }[];
}
interface AuditEntry {
  verb: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
  user: string;
  code: number;
  time: string;
}
interface PostedAlert {
  labels: Record<string, string>;
  endsAt: string;
}

async function until<T>(what: string, ms: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function readState(file: string): Promise<State | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as State;
  } catch {
    return undefined;
  }
}

/** A counting Alertmanager: records every POSTed alert with its arrival time. */
async function countingAlertmanager(): Promise<{ url: string; alerts: Array<PostedAlert & { at: number }>; server: Server }> {
  const alerts: Array<PostedAlert & { at: number }> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/api/v2/alerts') {
        for (const a of JSON.parse(Buffer.concat(chunks).toString('utf8')) as PostedAlert[]) alerts.push({ ...a, at: Date.now() });
        res.writeHead(200).end();
      } else if (req.method === 'GET' && req.url?.startsWith('/api/v2/alerts')) {
        // Active alerts, the latest per label set (what a successor asks to settle an unconfirmed intent).
        const latest = new Map<string, PostedAlert>();
        for (const a of alerts) latest.set(JSON.stringify(a.labels), { labels: a.labels, endsAt: a.endsAt });
        const now = Date.now();
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify([...latest.values()].filter((a) => Date.parse(a.endsAt) > now)));
      } else res.writeHead(404).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, alerts, server };
}

async function leaseHolder(kube: KubeClient): Promise<string | undefined> {
  const lease = await kube.coordination.readNamespacedLease({ name: 'portal-leader', namespace: 'portal-system' });
  return lease.spec?.holderIdentity || undefined;
}

/** Writes only the leader may make: reports, rule status, the annotate patch, the ledger. */
const leaderOnly = (e: AuditEntry) =>
  e.code < 300 &&
  e.user.startsWith('system:serviceaccount:portal-system:') &&
  (e.resource === 'policyreports' || e.resource === 'clusterpolicyreports' || (e.resource === 'portalclusterrules' && e.subresource === 'status') || (e.resource === 'pods' && e.verb === 'patch') || (e.resource === 'configmaps' && e.name.startsWith('portal-audit-ledger-')));
const replicaUser = (name: string) => `system:serviceaccount:portal-system:${name}`;
const replicaOf = (identity: string) => identity.slice(0, identity.lastIndexOf('_'));

void test('exactly once: three leader crashes, every pod reported, alerted and annotated once, writes only from the leader of the moment', { timeout: 300_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'portal-e2e-'));
  const stateFile = join(dir, 'state', 'state.json');
  const am = await countingAlertmanager();
  let dev: ChildProcess | undefined;
  let output = '';
  const pids = new Set<number>();
  try {
    await mkdir(join(dir, 'policies'));
    await writeFile(join(dir, 'policies', 'rule.yaml'), RULE);
    dev = spawn(
      process.execPath,
      [
        join(root, 'bin', 'portal.js'), 'dev', '--replicas', '3', '--port', '0', '--state-dir', join(dir, 'state'), '--policies', join(dir, 'policies'),
        '--grace-period', '2s', '--log-level', 'warn',
        '--lease-duration', '3s', '--renew-deadline', '2s', '--retry-period', '500ms', '--audit-interval', '10s', '--alertmanager-url', am.url,
      ],
      { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    dev.stdout?.on('data', (c: Buffer) => (output += c.toString()));
    dev.stderr?.on('data', (c: Buffer) => (output += c.toString()));
    const state = await until('three running replicas', 60_000, async () => {
      const s = await readState(stateFile);
      return s && s.replicas.length === 3 && s.replicas.every((r) => r.pid !== null) ? s : undefined;
    });
    const kube = createKubeClient({ kubeconfigYaml: await readFile(state.kubeconfig, 'utf8'), qps: 200, burst: 200, userAgent: 'e2e' });
    const adminToken = /token: (\S+)/.exec(await readFile(state.kubeconfig, 'utf8'))?.[1] ?? '';

    const auditLog = async () => (await (await fetch(`${state.apiserver}/_portal/audit`, { headers: { authorization: `Bearer ${adminToken}` } })).json()) as AuditEntry[];
    let created = 0;
    const createPods = async (n: number) => {
      for (let i = 0; i < n; i++, created++) {
        const body = { metadata: { name: `v-${created}`, namespace: NS }, spec: { containers: [{ name: 'c', image: 'nginx:1.27' }] } };
        // The webhook fails closed: a call routed to the replica just killed is a 500; retry like a user would.
        await until(`pod v-${created} created`, 20_000, async () => {
          try {
            await kube.core.createNamespacedPod({ namespace: NS, body });
            return true;
          } catch (err) {
            if ((err as { code?: number }).code === 409) return true;
            throw err;
          }
        });
      }
    };
    await until('a leader', 60_000, () => leaseHolder(kube));
    await createPods(30);

    for (let crash = 0; crash < 3; crash++) {
      const holder = (await leaseHolder(kube))!;
      const s = (await readState(stateFile))!;
      const victim = s.replicas.find((r) => r.name === replicaOf(holder));
      assert.ok(victim?.pid, `leader ${holder} has a pid in state.json`);
      for (const r of s.replicas) if (r.pid) pids.add(r.pid);
      const killedAt = Date.now() - 5; // the API server's clock is this machine's
      process.kill(victim.pid, 'SIGKILL');
      await createPods(10);
      const next = await until(`a new leader after crash ${crash + 1}`, 20_000, async () => {
        const h = await leaseHolder(kube);
        return h && h !== holder ? h : undefined;
      });
      // Let the new leader start acting (so it is crashed mid-work, not before it did anything).
      const user = replicaUser(replicaOf(next));
      await until(`${next} acting`, 20_000, async () => ((await auditLog()).some((e) => e.user === user && leaderOnly(e) && Date.parse(e.time) >= killedAt) ? true : undefined));
    }

    const pending = async () => {
      const pods = (await kube.core.listNamespacedPod({ namespace: NS })).items;
      const reports = (await kube.customObjects.listNamespacedCustomObject({ group: 'wgpolicyk8s.io', version: 'v1alpha2', namespace: NS, plural: 'policyreports' })) as { items: Array<{ metadata: { name: string }; summary: { warn: number } }> };
      const reported = new Set(reports.items.filter((r) => r.summary.warn === 1).map((r) => r.metadata.name));
      const alerted = new Set(am.alerts.filter((a) => a.labels.rule === 'e2e-require-audited').map((a) => a.labels.name));
      return pods
        .map((p) => ({
          name: p.metadata?.name ?? '',
          missing: [
            ...(reported.has(p.metadata?.uid ?? '') ? [] : ['report']),
            ...(p.metadata?.annotations?.['portal.dev/violation'] === 'e2e-require-audited' ? [] : ['annotation']),
            ...(alerted.has(p.metadata?.name ?? '') ? [] : ['alert']),
          ],
        }))
        .filter((p) => p.missing.length > 0);
    };
    try {
      // Generous: ~10 s on an idle machine; a loaded 2-core CI box can be several times slower.
      await until('every pod reported, annotated and alerted', 90_000, async () => ((await pending()).length === 0 ? true : undefined));
    } catch (err) {
      throw new Error(`${(err as Error).message}: ${JSON.stringify((await pending()).slice(0, 10))}`, { cause: err });
    }
    assert.equal(created, 60);

    // No firing alert (same labels) twice: the resend interval (1 h default) is far beyond this test.
    const firing = new Map<string, number>();
    for (const a of am.alerts) if (Date.parse(a.endsAt) > a.at) firing.set(JSON.stringify(a.labels), (firing.get(JSON.stringify(a.labels)) ?? 0) + 1);
    const twice = [...firing].filter(([, n]) => n > 1);
    assert.deepEqual(twice, [], 'firing alerts sent more than once');
    assert.equal(firing.size, 60);

    // Leader-only writes come only from the Lease holder of that moment.
    const log = await auditLog();
    let holderUser = '';
    const offenders: AuditEntry[] = [];
    let checked = 0;
    for (const e of log) {
      if (e.resource === 'leases' && e.name === 'portal-leader' && (e.verb === 'update' || e.verb === 'create' || e.verb === 'patch') && e.code < 300) holderUser = e.user;
      else if (leaderOnly(e)) {
        checked++;
        if (e.user !== holderUser) offenders.push(e);
      }
    }
    assert.ok(checked >= 60, `leader-only writes checked: ${checked}`);
    assert.deepEqual(offenders, [], 'leader-only writes from a replica that did not hold the Lease');
    assert.ok(new Set(log.filter(leaderOnly).map((e) => e.user)).size >= 2, 'more than one leader acted');
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- portal dev output (tail) ---\n${output.slice(-3000)}`, { cause: err });
  } finally {
    if (dev && dev.exitCode === null && dev.signalCode === null) {
      const exited = new Promise((r) => dev!.once('exit', r));
      dev.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (dev.exitCode === null) dev.kill('SIGKILL');
    }
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    am.server.close();
    await rm(dir, { recursive: true, force: true });
  }
});
