/**
 * The audit's reports in every shape (issue 20): both APIs (openreports.io,
 * wgpolicyk8s.io) × both granularities (resource, namespace), against the
 * embedded API server. Each stored report is validated against the CRD
 * schema of its API. Covered per shape:
 * - what the reports say (summary, listed results, limits, omitted count)
 *   and the labels that find them (`-l reports.portal.dev/...`);
 * - full passes write nothing; one changed object → exactly one report
 *   write; a burst of changes in one namespace is coalesced; a deleted
 *   object leaves its report (or its namespace's);
 * - a new leader adopts what it finds: after a failover it writes nothing,
 *   and after a change made while nobody led, exactly that report;
 * and switching the API or the granularity removes what Portal wrote in the
 * other shape (never another engine's reports).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import type { DevApiClient } from '../../packages/devcluster/src/dev/api-client.ts';
import { REPORT_API_INFO, type ReportApi, type ReportGranularity } from '../../src/policy/report-api.ts';
import type { Report } from '../../src/policy/report-shape.ts';
import { assertValidReport, listReports, REPORT_SHAPES } from '../support/reports.ts';
import { APP_NS, clusterWithCrds, pod, privilegedRule, reportConfig, startReplica, until, writesBy } from './support/controller-harness.ts';

const OTHER_NS = 'shop';

/** Successful report writes by `user` in the API of `api` (both kinds). */
function reportWrites(api: ApiServer, user: string, reportApi: ReportApi) {
  const { namespaced, cluster } = REPORT_API_INFO[reportApi];
  return writesBy(api, user).filter((e) => (e.resource === namespaced.plural || e.resource === cluster.plural) && e.code < 300);
}

async function allReports(admin: DevApiClient, api: ReportApi): Promise<Report[]> {
  const out: Report[] = [];
  for (const ns of [APP_NS, OTHER_NS, '']) out.push(...(await listReports(admin, api, ns)));
  for (const r of out) assertValidReport(r);
  return out;
}

async function createPod(admin: DevApiClient, name: string, privileged: boolean, namespace = APP_NS): Promise<string> {
  const res = await admin.request('POST', `/api/v1/namespaces/${namespace}/pods`, pod(name, privileged, namespace));
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return (res.body as { metadata: { uid: string } }).metadata.uid;
}

/** The report that describes pod `name` (its own, or its namespace's), found by label as an operator would. */
async function reportOf(admin: DevApiClient, api: ReportApi, granularity: ReportGranularity, name: string, namespace = APP_NS): Promise<Report[]> {
  const info = REPORT_API_INFO[api];
  const selector = granularity === 'resource' ? `reports.portal.dev/kind=Pod,reports.portal.dev/name=${name}` : `reports.portal.dev/namespace=${namespace}`;
  const res = await admin.request('GET', `/apis/${info.group}/${info.version}/namespaces/${namespace}/${info.namespaced.plural}?labelSelector=${encodeURIComponent(selector)}`);
  assert.equal(res.status, 200);
  return (res.body as { items: Report[] }).items;
}

/** Results about pod `name` in the reports given (the one-object view of a namespace report). */
function resultsFor(reports: Report[], name: string): string[] {
  return reports.flatMap((r) => r.results.filter((x) => (x.resources?.[0]?.name ?? r.scope?.name) === name).map((x) => `${x.policy}=${x.result}`));
}

for (const shape of REPORT_SHAPES) {
  const { api, granularity } = shape;
  const perNamespace = granularity === 'namespace';
  const info = REPORT_API_INFO[api];

  void test(`${api}/${granularity}: valid, labelled reports; passes write nothing; one change is one write; bursts coalesce; deletes clean up`, async (t) => {
    const { api: server, admin } = await clusterWithCrds(t);
    await admin.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: OTHER_NS } });
    await admin.apply(privilegedRule('no-privileged'));
    for (const [name, priv] of [['bad-1', true], ['bad-2', true], ['good', false]] as const) await createPod(admin, name, priv);
    await createPod(admin, 'bad-3', true, OTHER_NS);
    const flushMs = 2000;
    const leader = await startReplica(t, server, 'replica-a', { reports: reportConfig(shape, { flushMs, maxResults: 2 }) });
    leader.grant();

    const expected = perNamespace ? 2 : 4;
    await until(`${expected} reports`, 15_000, async () => (await allReports(admin, api)).length === expected && leader.controller.idle() && leader.actuator.flusher.backlog === 0);
    const reports = await allReports(admin, api);
    assert.ok(reports.every((r) => r.kind === info.namespaced.kind), 'namespaced reports only (no cluster-scoped object matched)');
    assert.ok(reports.every((r) => r.metadata.labels['app.kubernetes.io/managed-by'] === 'portal' && r.metadata.labels['reports.portal.dev/granularity'] === granularity));
    if (api === 'openreports') assert.ok(reports.every((r) => r.source === 'portal' && r.configuration?.limits !== undefined));

    // Found by label: the pod's own report, or its namespace's.
    const ofBad1 = await reportOf(admin, api, granularity, 'bad-1');
    assert.equal(ofBad1.length, 1);
    assert.deepEqual(resultsFor(ofBad1, 'bad-1'), ['no-privileged=fail']);
    if (perNamespace) {
      const apps = ofBad1[0]!;
      assert.equal(apps.metadata.name, 'portal');
      assert.deepEqual(apps.summary, { pass: 1, fail: 2, warn: 0, error: 0, skip: 0 }, 'the summary counts every result');
      assert.deepEqual(apps.results.map((r) => `${r.resources?.[0]?.name} ${r.result}`), ['bad-1 fail', 'bad-2 fail'], 'only failures listed');
      assert.equal(apps.metadata.annotations?.['reports.portal.dev/omitted-results'], undefined);
      if (api === 'openreports') assert.deepEqual(apps.configuration, { limits: { maxResults: 2, statusFilter: ['fail', 'warn', 'error'] } });
    } else {
      assert.equal(ofBad1[0]!.scope?.name, 'bad-1');
      assert.deepEqual(resultsFor(await reportOf(admin, api, granularity, 'good'), 'good'), ['no-privileged=pass']);
    }

    // Full passes rewrite nothing that is right.
    const before = reportWrites(server, 'replica-a', api).length;
    for (let i = 0; i < 2; i++) {
      const n = leader.controller.passes;
      leader.controller.fullPass();
      await until('full pass', 10_000, () => leader.controller.passes > n && leader.controller.idle() && leader.actuator.flusher.backlog === 0);
    }
    assert.equal(reportWrites(server, 'replica-a', api).length, before, 'no report rewrite across full passes');

    // One new violating pod: exactly one report write (its own report, or its namespace's).
    const uid4 = await createPod(admin, 'bad-4', true);
    await until('bad-4 reported', 10_000, async () => resultsFor(await reportOf(admin, api, granularity, 'bad-4'), 'bad-4').length > 0 || (perNamespace && (await reportOf(admin, api, granularity, 'bad-4'))[0]?.summary.fail === 3));
    await until('idle', 10_000, () => leader.controller.idle() && leader.actuator.flusher.backlog === 0);
    const one = reportWrites(server, 'replica-a', api).slice(before);
    assert.deepEqual(one.map((e) => `${e.verb} ${e.namespace}/${e.name}`), [perNamespace ? `update ${APP_NS}/portal` : `create ${APP_NS}/${uid4}`], 'exactly one report write');
    if (perNamespace) {
      const apps = (await reportOf(admin, api, granularity, 'bad-4'))[0]!;
      assert.equal(apps.results.length, 2, 'maxResults');
      assert.equal(apps.metadata.annotations?.['reports.portal.dev/omitted-results'], '1', 'one failure left out, and said so');
      assert.deepEqual(apps.summary, { pass: 1, fail: 3, warn: 0, error: 0, skip: 0 });
      assertValidReport(apps);
    }

    // A burst in one namespace, within one flush interval: the namespace report is written at most twice
    // (at once, then once at the end of the interval with the rest); per resource, one create per pod.
    const burstFrom = reportWrites(server, 'replica-a', api).length;
    await Promise.all(Array.from({ length: 6 }, (_, i) => createPod(admin, `burst-${i}`, false)));
    await until('the burst reported', 15_000, async () => {
      const rs = await allReports(admin, api);
      return perNamespace ? rs.find((r) => r.metadata.namespace === APP_NS)?.summary.pass === 7 : rs.length === 5 + 6;
    });
    await until('idle', 10_000, () => leader.controller.idle() && leader.actuator.flusher.backlog === 0);
    const burst = reportWrites(server, 'replica-a', api).slice(burstFrom);
    if (perNamespace) assert.ok(burst.length >= 1 && burst.length <= 2 && burst.every((e) => e.name === 'portal' && e.namespace === APP_NS), `coalesced: ${burst.map((e) => e.verb).join(', ')}`);
    else assert.equal(burst.filter((e) => e.verb === 'create').length, 6);

    // A deleted pod leaves its report (resource) or its namespace report (namespace).
    await admin.request('DELETE', `/api/v1/namespaces/${OTHER_NS}/pods/bad-3`);
    await until('the report of bad-3 gone', 15_000, async () => (await listReports(admin, api, OTHER_NS)).length === 0);
    await admin.request('DELETE', `/api/v1/namespaces/${APP_NS}/pods/bad-1`);
    await until('bad-1 no longer reported', 15_000, async () => resultsFor(await listReports(admin, api, APP_NS), 'bad-1').length === 0);
    await allReports(admin, api);
    assert.ok(writesBy(server).every((e) => e.user !== 'replica-a' || e.code < 300 || e.code === 404 || e.code === 409), 'no failing writes');
  });

  void test(`${api}/${granularity}: a new leader adopts the reports it finds and rewrites only those that differ`, async (t) => {
    const { api: server, admin } = await clusterWithCrds(t);
    await admin.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: OTHER_NS } });
    await admin.apply(privilegedRule('no-privileged'));
    for (let i = 0; i < 4; i++) await createPod(admin, `bad-${i}`, true, i % 2 ? APP_NS : OTHER_NS);
    await createPod(admin, 'good', false);
    const config = { reports: reportConfig(shape) };
    const [a, b] = await Promise.all([startReplica(t, server, 'replica-a', config), startReplica(t, server, 'replica-b', config)]);
    a.grant();
    const expected = perNamespace ? 2 : 5;
    await until('reports by a', 15_000, async () => (await allReports(admin, api)).length === expected && a.actuator.flusher.backlog === 0);
    await until('b saw them', 10_000, () => b.controller.reports.size === expected && b.controller.idle() && b.controller.completePasses > 0);
    await a.revoke();

    b.grant();
    await until('b compared every report', 10_000, () => b.actuator.reportsReconciled && b.controller.idle() && b.actuator.flusher.backlog === 0);
    assert.deepEqual(reportWrites(server, 'replica-b', api), [], 'the new leader wrote no report');

    // A change while nobody leads: the next leader writes exactly that report.
    await b.revoke();
    await createPod(admin, 'late', true, OTHER_NS);
    await until('a evaluated it as a follower', 10_000, () => a.controller.violations('no-privileged') === 5 && a.controller.idle());
    a.grant();
    await until('a compared every report', 10_000, () => a.actuator.reportsReconciled && a.controller.idle() && a.actuator.flusher.backlog === 0);
    await until('late reported', 10_000, async () => resultsFor(await listReports(admin, api, OTHER_NS), 'late').length === 1 || (perNamespace && (await listReports(admin, api, OTHER_NS))[0]?.summary.fail === 3));
    const writesOfA = reportWrites(server, 'replica-a', api);
    const afterTakeover = writesOfA.slice(writesOfA.length - 1);
    assert.equal(writesOfA.length, expected + 1, `one write after the second takeover: ${writesOfA.map((e) => `${e.verb} ${e.namespace}/${e.name}`).join(', ')}`);
    assert.equal(afterTakeover[0]?.namespace, OTHER_NS);
    await allReports(admin, api);
  });

  void test(`${api}/${granularity}: an exempted object's result is skip and names its PortalException; another exception, another skip; the exception's removal is a content change`, async (t) => {
    const { api: server, admin } = await clusterWithCrds(t);
    await admin.apply(privilegedRule('no-privileged'));
    for (const [name, prefix] of [['agent', 'agent-*'], ['batch', 'batch-*']] as const) {
      await admin.apply({
        apiVersion: 'portal.dev/v1alpha1',
        kind: 'PortalException',
        metadata: { name, namespace: APP_NS },
        spec: { rules: ['no-privileged'], match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: [prefix] }, reason: 'reports test' },
      });
    }
    for (const name of ['agent-1', 'batch-1', 'bad-1']) await createPod(admin, name, true);
    // Namespace reports list skips only when the status filter asks for them.
    const leader = await startReplica(t, server, 'replica-a', { reports: reportConfig(shape, { statusFilter: ['fail', 'warn', 'error', 'skip'] }) });
    leader.grant();

    const exemptions = async (): Promise<Record<string, string>> => {
      const out: Record<string, string> = {};
      for (const name of ['agent-1', 'batch-1', 'bad-1']) {
        for (const r of await reportOf(admin, api, granularity, name)) {
          assertValidReport(r);
          for (const x of r.results.filter((y) => (y.resources?.[0]?.name ?? r.scope?.name) === name)) out[name] = `${x.result} ${x.properties['exception'] ?? '-'}`;
        }
      }
      return out;
    };
    const expected = { 'agent-1': `skip ${APP_NS}/agent`, 'batch-1': `skip ${APP_NS}/batch`, 'bad-1': 'fail -' };
    await until('skips naming each exception', 15_000, async () => JSON.stringify(await exemptions()) === JSON.stringify(expected));

    // The exception goes: batch-1 is judged again and its report rewritten (fail, no exception).
    const res = await admin.request('DELETE', `/apis/portal.dev/v1alpha1/namespaces/${APP_NS}/portalexceptions/batch`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const after = { ...expected, 'batch-1': 'fail -' };
    await until('batch-1 fails without an exception', 15_000, async () => JSON.stringify(await exemptions()) === JSON.stringify(after));
  });
}

void test('switching the report API or granularity removes what Portal wrote in the other shape, never other engines\' reports', async (t) => {
  const { api: server, admin } = await clusterWithCrds(t);
  await admin.apply(privilegedRule('no-privileged'));
  for (const name of ['bad-1', 'bad-2']) await createPod(admin, name, true);
  // Another engine's report in the old API: not Portal's to delete.
  const foreign = await admin.request('POST', `/apis/wgpolicyk8s.io/v1alpha2/namespaces/${APP_NS}/policyreports`, {
    apiVersion: 'wgpolicyk8s.io/v1alpha2',
    kind: 'PolicyReport',
    metadata: { name: 'kyverno-owned', namespace: APP_NS, labels: { 'app.kubernetes.io/managed-by': 'kyverno' } },
    summary: { pass: 1 },
    results: [],
  });
  assert.equal(foreign.status, 201, JSON.stringify(foreign.body));

  const old = await startReplica(t, server, 'replica-old', { reports: reportConfig({ api: 'wgpolicyk8s', granularity: 'resource' }) });
  old.grant();
  await until('wgpolicyk8s reports', 15_000, async () => (await listReports(admin, 'wgpolicyk8s', APP_NS)).length === 3);
  await old.stop();

  // Upgrade to OpenReports, per resource: the wgpolicyk8s reports Portal wrote go.
  const perResource = await startReplica(t, server, 'replica-new', { reports: reportConfig({ api: 'openreports', granularity: 'resource' }) });
  perResource.grant();
  await until('openreports reports', 15_000, async () => (await listReports(admin, 'openreports', APP_NS)).length === 2);
  await until('old reports gone', 15_000, async () => (await listReports(admin, 'wgpolicyk8s', APP_NS)).map((r) => r.metadata.name).join() === 'kyverno-owned');
  // The server may list them gone a moment before the replica has read both delete responses.
  await until('both deletes counted', 5000, () => perResource.controller.reports.purged === 2);
  await perResource.stop();

  // Then to one report per namespace: the per-object reports go, the namespace report comes.
  const perNamespace = await startReplica(t, server, 'replica-ns', { reports: reportConfig({ api: 'openreports', granularity: 'namespace' }) });
  perNamespace.grant();
  await until('one namespace report', 15_000, async () => (await listReports(admin, 'openreports', APP_NS)).map((r) => r.metadata.name).join() === 'portal');
  const [report] = await listReports(admin, 'openreports', APP_NS);
  assertValidReport(report);
  assert.deepEqual(report!.summary, { pass: 0, fail: 2, warn: 0, error: 0, skip: 0 });
  assert.deepEqual(
    reportWrites(server, 'replica-ns', 'openreports').map((e) => e.verb).sort(),
    ['create', 'delete', 'delete'],
    'one namespace report created, the two resource reports deleted',
  );
});

void test('a namespace report waits for a pass over every audited kind: a leader whose Pods are not listed yet writes no report from half a namespace', async (t) => {
  const { api: server, admin } = await clusterWithCrds(t);
  await admin.apply(privilegedRule('no-privileged'));
  const pods = 12;
  for (let i = 0; i < pods; i++) await createPod(admin, `bad-${i}`, true);
  // The replica's list (and watch) of Pods is held until the fault is cleared: its first pass evaluates no Pod.
  server.faults.setLatency(600_000, { user: 'replica-a', path: '/api/v1/pods', methods: ['GET'] });
  const a = await startReplica(t, server, 'replica-a', { reports: reportConfig({ api: 'openreports', granularity: 'namespace' }, { flushMs: 60_000 }) });
  a.grant();
  await until('a first pass while the Pod list is held', 15_000, () => a.controller.passes > 0 && server.faults.delayed('replica-a').some((r) => r.includes('/api/v1/pods')));
  assert.equal(a.controller.completePasses, 0, 'a pass that began before the Pods were listed is not complete');

  server.faults.clear();
  await until('the namespace report with every Pod', 20_000, async () => (await listReports(admin, 'openreports', APP_NS))[0]?.summary.fail === pods);
  // One write: a report written from the first Pods evaluated would be rewritten within the flush interval (60 s here) — or, before this, at once.
  assert.deepEqual(
    reportWrites(server, 'replica-a', 'openreports').map((e) => `${e.verb} ${e.namespace}/${e.name}`),
    [`create ${APP_NS}/portal`],
  );
});
