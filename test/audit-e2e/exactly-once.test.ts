/**
 * Exactly once across leader changes (issue 5, part 4): `portal dev
 * --replicas 3` with short lease timings, a counting Alertmanager stand-in, a
 * rule with `alert` and `annotate` actions, 30 violating pods, then three
 * SIGKILLs of the current leader and one SIGSTOP of the leader past its lease
 * (SIGCONT after another replica took over and acted), while more violating
 * pods are created. Then, from what a user sees:
 * - every pod is reported, alerted and annotated;
 * - each side effect happened once: one firing alert per pod, one annotate
 *   patch per pod (a repeated identical patch is a repeated side effect too),
 *   one report create per pod and no rewrite (the content never changes) —
 *   with `--report-granularity resource`, the shape where every object has
 *   a report of its own (the namespace granularity's adoption by a new
 *   leader is covered in test/audit/reports.test.ts);
 * - every leader-only write in the API server's log comes from the replica
 *   that held the Lease at that moment (the last successful Lease write before
 *   it, in log order, is its own);
 * - the paused leader says it is not the leader the moment it wakes, and
 *   neither writes nor alerts after the takeover Lease write that ended its term;
 * - a PortalException (issue 18) exempts five pods (reported skip, no action)
 *   and expires while the leader is dead: they are then reported, alerted and
 *   annotated once each, like every other pod, by whichever leader saw it.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { createKubeClient, type KubeClient } from '../../src/kube/client.ts';
import { readState, startDev, type Dev, type DevState } from '../dev/support.ts';
import { debugVars } from '../replica/support.ts';
import { sideApi, sideGet } from '../support/side-api.ts';
import {
  countingAlertmanager, isLeaderOnly, podPatchesByName, replicaLogTails, replicaOf, replicaUser, reportWrites, takeoverAfter, until, writesAfter, writesNotFromHolder,
  type AuditEntry,
} from './harness.ts';

const NS = 'default';
const RULE_NAME = 'e2e-require-audited';
const ANNOTATION = 'portal.dev/violation';
/** --lease-duration / --retry-period below. */
const LEASE_MS = 3000;
const RETRY_MS = 500;
/**
 * After SIGCONT the woken replica gets this long to do anything stale (finish
 * queued work, renew): 4 retry periods, so its elector and work queue have run
 * several times over. It is a window for a negative check, not a wait for a result.
 */
const WAKE_WINDOW_MS = 4 * RETRY_MS;
/** --audit-workers below: each worker has at most one write in flight, the status writer one more. */
const WORKERS = 4;
/** The report flusher's writes in flight at most (ReportFlusher's default concurrency). */
const REPORT_WRITERS = 4;
/**
 * A request that passed `term.assertValid()` just before SIGSTOP is sent
 * when the process wakes: a pause can land between any check and the socket
 * write, and only server-side fencing (which the Kubernetes API does not
 * offer across objects) could refuse it. Such a request reaches the API
 * server right after SIGCONT (wake-up + the rest of the request code + the
 * admission webhook for a pod patch: tens of ms; 500 ms for a loaded 2-core
 * machine). Anything later was started after waking, which the fence forbids.
 */
const IN_FLIGHT_MS = 500;
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

/** Pods the exception exempts until it expires during the first crash. */
const EXEMPT = ['x-0', 'x-1', 'x-2', 'x-3', 'x-4'];
function exception(expiresAt: Date): Record<string, unknown> {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalException',
    metadata: { name: 'x-pods', namespace: NS },
    spec: { rules: [RULE_NAME], match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: ['x-*'] }, expiresAt: expiresAt.toISOString(), reason: 'e2e: expires during a leader change' },
  };
}

async function leaseHolder(kube: KubeClient): Promise<string | undefined> {
  const lease = await kube.coordination.readNamespacedLease({ name: 'portal-leader', namespace: 'portal-system' });
  return lease.spec?.holderIdentity || undefined;
}

void test('exactly once: three leader crashes and a paused leader; every pod reported, alerted and annotated once; writes only from the leader of the moment', { timeout: 300_000 }, async (t) => {
  const am = await countingAlertmanager();
  let dev: Dev | undefined;
  const pids = new Set<number>();
  const figures: string[] = [];
  const t0 = performance.now();
  const wall0 = Date.now();
  /** Leader changes as the test saw them, for failure messages. */
  const timeline: string[] = [];
  try {
    dev = await startDev({
      name: 'e2e',
      replicas: 3,
      policies: { 'rule.yaml': RULE },
      flags: [
        '--grace-period', '2s',
        '--lease-duration', `${LEASE_MS}ms`, '--renew-deadline', '2s', '--retry-period', `${RETRY_MS}ms`, '--audit-interval', '10s', '--audit-workers', String(WORKERS),
        '--alertmanager-url', am.url, '--report-granularity', 'resource',
      ],
      waitFor: 'running',
      readyMs: 60_000,
    });
    const { stateFile } = dev;
    const state = async (): Promise<DevState | undefined> => {
      const s = await readState(stateFile);
      // Replicas run in their own process groups: collect every pid so none outlives the test.
      for (const r of s?.replicas ?? []) if (r.pid) pids.add(r.pid);
      return s;
    };
    const first = dev.state;
    for (const r of first.replicas) if (r.pid) pids.add(r.pid);
    const kube = createKubeClient({ kubeconfigYaml: await readFile(first.kubeconfig, 'utf8'), qps: 200, burst: 200, userAgent: 'e2e' });

    const side = await sideApi(first.kubeconfig);
    const auditLog = async () => sideGet<AuditEntry[]>(side, '/_portal/audit');
    let created = 0;
    const createPods = async (n: number) => {
      for (let i = 0; i < n; i++, created++) {
        const body = { metadata: { name: `v-${created}`, namespace: NS }, spec: { containers: [{ name: 'c', image: 'nginx:1.27' }] } };
        // The webhook fails closed: a call routed to a killed or paused replica fails; retry like a user would.
        await until(`pod v-${created} created`, 30_000, async () => {
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
    /** The current Lease holder's replica (name, pid, probes). */
    const currentLeader = async () => {
      const holder = (await leaseHolder(kube))!;
      const replica = (await state())?.replicas.find((r) => r.name === replicaOf(holder));
      assert.ok(replica?.pid, `leader ${holder} has a pid in state.json`);
      return { holder, replica: { ...replica, pid: replica.pid } };
    };
    const newLeader = (old: string, ms: number) =>
      until(`a leader other than ${old}`, ms, async () => {
        const h = await leaseHolder(kube);
        return h && h !== old ? h : undefined;
      });
    /** Waits for the first leader-only write by `identity` at or after `since` (so it is stopped mid-work, not idle). */
    const acting = (identity: string, since: number) => {
      const user = replicaUser(replicaOf(identity));
      return until(`${identity} acting`, 30_000, async () => ((await auditLog()).some((e) => e.user === user && isLeaderOnly(e) && Date.parse(e.time) >= since) ? true : undefined));
    };

    await until('a leader', 60_000, () => leaseHolder(kube));
    await createPods(30);

    // Five pods exempted by an exception (its expiry is moved into the first crash below).
    const exceptionApi = { group: 'portal.dev', version: 'v1alpha1', namespace: NS, plural: 'portalexceptions' };
    await kube.customObjects.createNamespacedCustomObject({ ...exceptionApi, body: exception(new Date(Date.now() + 3_600_000)) });
    for (const name of EXEMPT) {
      await until(`pod ${name} created`, 30_000, async () => {
        try {
          await kube.core.createNamespacedPod({ namespace: NS, body: { metadata: { name, namespace: NS }, spec: { containers: [{ name: 'c', image: 'nginx:1.27' }] } } });
          return true;
        } catch (err) {
          if ((err as { code?: number }).code === 409) return true;
          throw err;
        }
      });
    }
    const exemptReports = async () => {
      const list = (await kube.customObjects.listNamespacedCustomObject({ group: 'openreports.io', version: 'v1alpha1', namespace: NS, plural: 'reports' })) as { items: Array<{ scope: { name: string }; results: { result: string; properties?: Record<string, string> }[] }> };
      return list.items.filter((r) => EXEMPT.includes(r.scope.name));
    };
    await until('the exempted pods reported skip with the exception', 30_000, async () => {
      const rs = await exemptReports();
      return rs.length === EXEMPT.length && rs.every((r) => r.results[0]?.result === 'skip' && r.results[0]?.properties?.['exception'] === `${NS}/x-pods`) ? true : undefined;
    });
    const exemptPods = (await kube.core.listNamespacedPod({ namespace: NS })).items.filter((p) => EXEMPT.includes(p.metadata?.name ?? ''));
    assert.deepEqual(exemptPods.filter((p) => p.metadata?.annotations?.[ANNOTATION]).map((p) => p.metadata?.name), [], 'no action on an exempted pod');
    let expiresAt = 0;

    for (let crash = 0; crash < 3; crash++) {
      const { holder, replica } = await currentLeader();
      if (crash === 0) {
        // The exception now ends 1.5 s from here: after the leader's death, before
        // anyone can take over (the lease lasts 3 s), so the followers' timers see it.
        expiresAt = Date.now() + 1500;
        const current = (await kube.customObjects.getNamespacedCustomObject({ ...exceptionApi, name: 'x-pods' })) as { metadata: { resourceVersion: string } };
        const edited = exception(new Date(expiresAt));
        await kube.customObjects.replaceNamespacedCustomObject({ ...exceptionApi, name: 'x-pods', body: { ...edited, metadata: { ...(edited['metadata'] as object), resourceVersion: current.metadata.resourceVersion } } });
      }
      const killedAt = Date.now() - 5; // the API server's clock is this machine's
      process.kill(replica.pid, 'SIGKILL');
      await createPods(10);
      const next = await newLeader(holder, 20_000);
      timeline.push(`SIGKILL ${holder} +${killedAt - wall0} ms -> ${next}`);
      if (crash === 0) figures.push(`exception expired ${expiresAt - killedAt} ms after the leader's SIGKILL`);
      await acting(next, killedAt);
    }

    // The paused leader: SIGSTOP past its lease while it works, another replica
    // takes over and acts on pods created meanwhile, then SIGCONT.
    const paused = await currentLeader();
    const pausedUser = replicaUser(paused.replica.name);
    const pausedVars = await until(`${paused.holder} to report its term`, 10_000, async () => {
      const le = (await debugVars(paused.replica.probes))?.leader_election;
      return le?.is_leader && le.epoch ? le : undefined;
    });
    const pausedAt = Date.now();
    process.kill(paused.replica.pid, 'SIGSTOP');
    let contAt: number;
    let successor: string;
    try {
      await createPods(10);
      // Well past leaseDuration + 2 × 2.2 × retryPeriod (the takeover bound), with room for a loaded machine.
      successor = await newLeader(paused.holder, LEASE_MS + 2 * 2.2 * RETRY_MS + 15_000);
      await acting(successor, pausedAt);
    } finally {
      contAt = Date.now();
      process.kill(paused.replica.pid, 'SIGCONT');
    }
    timeline.push(`SIGSTOP ${paused.holder} (epoch ${pausedVars.epoch}) +${pausedAt - wall0} ms -> ${successor}, SIGCONT +${contAt - wall0} ms`);
    figures.push(`paused ${contAt - pausedAt} ms (lease ${LEASE_MS} ms)`);
    const woke = await until(`${paused.holder} to answer after SIGCONT`, 10_000, async () => (await debugVars(paused.replica.probes, 2000))?.leader_election);
    assert.equal(woke.is_leader, false, 'the first /debug/vars answer after waking says it is not the leader');
    // Pods created after waking give the woken replica fresh work to evaluate (as a follower).
    await createPods(5);
    await until(`${paused.holder} to see ${successor} hold the Lease`, 10_000, async () => ((await debugVars(paused.replica.probes))?.leader_election?.lease_holder === successor ? true : undefined));
    await until('the wake window to pass', WAKE_WINDOW_MS + 5000, () => Promise.resolve(Date.now() - contAt >= WAKE_WINDOW_MS ? true : undefined));
    assert.equal((await debugVars(paused.replica.probes))?.leader_election?.is_leader, false, 'still not the leader after the wake window');

    const pending = async () => {
      const pods = (await kube.core.listNamespacedPod({ namespace: NS })).items;
      const reports = (await kube.customObjects.listNamespacedCustomObject({ group: 'openreports.io', version: 'v1alpha1', namespace: NS, plural: 'reports' })) as { items: Array<{ metadata: { name: string }; summary: { warn: number } }> };
      const reported = new Set(reports.items.filter((r) => r.summary.warn === 1).map((r) => r.metadata.name));
      const alerted = new Set(am.alerts.filter((a) => a.labels.rule === RULE_NAME).map((a) => a.labels.name));
      return pods
        .map((p) => ({
          name: p.metadata?.name ?? '',
          missing: [
            ...(reported.has(p.metadata?.uid ?? '') ? [] : ['report']),
            ...(p.metadata?.annotations?.[ANNOTATION] === RULE_NAME ? [] : ['annotation']),
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
    assert.equal(created, 75);
    const log = await auditLog();
    const pods = (await kube.core.listNamespacedPod({ namespace: NS })).items;
    assert.equal(pods.length, created + EXEMPT.length);

    // Alerts: no firing alert (same labels) twice; the resend interval (1 h default) is far beyond this test.
    const firing = new Map<string, number>();
    for (const a of am.alerts) if (Date.parse(a.endsAt) > a.at) firing.set(JSON.stringify(a.labels), (firing.get(JSON.stringify(a.labels)) ?? 0) + 1);
    const twice = [...firing].filter(([, n]) => n > 1).map(([labels]) => ({
      labels,
      posts: am.alerts.filter((a) => JSON.stringify(a.labels) === labels).map((a) => `+${a.at - wall0} ms epoch ${a.annotations?.epoch ?? '?'}`),
    }));
    assert.deepEqual(twice, [], `firing alerts sent more than once; leaders: ${timeline.join(', ')}`);
    assert.equal(firing.size, created + EXEMPT.length);

    // Annotate: exactly one merge patch per pod across all leader changes, and
    // it is the write that left the pod as it is (its resourceVersion).
    const patches = podPatchesByName(log, NS);
    const annotateProblems = pods.flatMap((p): string[] => {
      const name = p.metadata?.name ?? '';
      const mine = patches.get(name) ?? [];
      if (mine.length !== 1) return [`${name}: ${mine.length} patches (${mine.map((e) => `${e.user} ${e.time}`).join(', ')})`];
      return mine[0]?.resourceVersion === p.metadata?.resourceVersion ? [] : [`${name}: patched to rv ${mine[0]?.resourceVersion}, now rv ${p.metadata?.resourceVersion}`];
    });
    assert.deepEqual(annotateProblems, [], 'pods not annotated by exactly one patch');
    assert.deepEqual([...patches.keys()].filter((n) => !pods.some((p) => p.metadata?.name === n)), [], 'patches of unknown pods');

    // Reports: the log names no object on create, but a create of an
    // existing name is a 409, so with no delete every successful create is a
    // distinct report; one per pod means exactly one create per report name.
    // The content never changes here, so there is no rewrite at all, and each
    // report is still the object its create returned.
    const reports = (await kube.customObjects.listNamespacedCustomObject({ group: 'openreports.io', version: 'v1alpha1', namespace: NS, plural: 'reports' })) as { items: Array<{ metadata: { name: string; resourceVersion: string } }> };
    const rw = reportWrites(log, NS);
    // The exempted pods' reports change once, at the expiry (skip -> warn); nothing else changes.
    const exemptUids = new Set(pods.filter((p) => EXEMPT.includes(p.metadata?.name ?? '')).map((p) => p.metadata?.uid ?? ''));
    assert.deepEqual(rw.deletes, [], 'no report deleted');
    assert.deepEqual(rw.rewrites.filter((e) => !exemptUids.has(e.name)), [], 'no other report rewritten (its content never changed)');
    assert.deepEqual([...exemptUids].map((uid) => rw.rewrites.filter((e) => e.name === uid).length), EXEMPT.map(() => 1), 'each exempted pod report rewritten once, at the expiry');
    assert.equal(reports.items.length, created + EXEMPT.length, 'one report per pod');
    assert.equal(rw.creates.length, reports.items.length, 'one report create per report');
    const createdRvs = new Set([...rw.creates, ...rw.rewrites].map((e) => e.resourceVersion));
    assert.deepEqual(reports.items.filter((r) => !createdRvs.has(r.metadata.resourceVersion)).map((r) => r.metadata.name), [], 'reports not as their last write left them');

    // The paused leader: its term ended with the successor's takeover Lease write.
    const takeover = takeoverAfter(log, pausedUser, pausedAt);
    assert.ok(takeover, 'a takeover Lease write after the pause');
    assert.equal(takeover.entry.user, replicaUser(replicaOf(successor)), 'the successor wrote the takeover');
    assert.ok(log.slice(0, takeover.index).some((e) => e.user === pausedUser && isLeaderOnly(e)), 'the paused leader had acted in its term');
    assert.ok(log.slice(takeover.index).some((e) => e.user === replicaUser(replicaOf(successor)) && isLeaderOnly(e) && Date.parse(e.time) < contAt), 'the successor acted while the old leader was paused');
    // After the takeover, in the server's order of writes, nothing from it — except
    // requests that had passed its fence before SIGSTOP and go out as it wakes:
    // no client can recall those (see IN_FLIGHT_MS). Whether they repeated a side
    // effect is what the exactly-once checks above decide.
    const late = writesAfter(log, pausedUser, takeover.index);
    const inFlight = late.filter((e) => isLeaderOnly(e) && Date.parse(e.time) >= contAt && Date.parse(e.time) <= contAt + IN_FLIGHT_MS);
    assert.deepEqual(late.filter((e) => !inFlight.includes(e)), [], 'writes by the paused leader after its term ended');
    assert.ok(inFlight.length <= WORKERS + REPORT_WRITERS + 1, `${inFlight.length} requests in flight at the pause (at most one per worker, per report writer and the status writer)`);
    if (inFlight.length > 0) figures.push(`${inFlight.length} request(s) in flight at the pause committed ${inFlight.map((e) => `${e.resource}/${e.name || '(create)'} +${Date.parse(e.time) - contAt} ms`).join(', ')} after SIGCONT`);

    // Leader-only writes come only from the Lease holder of that moment (the in-flight ones aside).
    const { checked, offenders } = writesNotFromHolder(log);
    assert.ok(checked >= 2 * created, `leader-only writes checked: ${checked}`);
    assert.deepEqual(offenders.filter((e) => !inFlight.includes(e)), [], 'leader-only writes from a replica that did not hold the Lease');
    assert.ok(new Set(log.filter(isLeaderOnly).map((e) => e.user)).size >= 2, 'more than one leader acted');
    const takeoverAt = Date.parse(takeover.entry.time);
    figures.push(`takeover ${takeoverAt - pausedAt} ms after SIGSTOP`);
    // Alerts carry the epoch of the term that sent them: none from the paused term after it ended.
    const staleAlerts = am.alerts.filter((a) => a.annotations?.epoch === pausedVars.epoch && a.at > takeoverAt && !(a.at >= contAt && a.at <= contAt + IN_FLIGHT_MS));
    assert.deepEqual(staleAlerts, [], `alerts from the paused term ${pausedVars.epoch} after its end`);
    figures.push(`${created} pods, ${checked} leader-only writes, ${am.alerts.length} alerts, ${Math.round(performance.now() - t0)} ms`);
    t.diagnostic(figures.join('; '));
  } catch (err) {
    if (!dev) throw err; // startDev's error carries dev's output
    const logs = await replicaLogTails(join(dev.dir, 'state', 'logs'), 4000);
    throw new Error(`${(err as Error).message}\n--- portal dev output (tail) ---\n${dev.output().slice(-3000)}\n${logs}`, { cause: err });
  } finally {
    // A replica still stopped would ignore dev's SIGTERM until its grace period ran out.
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // already gone
      }
    }
    await dev?.cleanup();
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    am.server.close();
  }
});
