/**
 * The one report builder (policy/report.ts): both APIs and both
 * granularities, every report valid against the CRD schema of its API (no
 * field the API server would prune), stable across rebuilds, timestamps and
 * epochs kept for unchanged results, and the namespace limits.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { buildNamespaceReport, buildResourceReport, resourceReference, resourceReportIdentity, type ReportSubject } from '../../src/policy/report.ts';
import { MAX_MESSAGE_LENGTH, OMITTED_RESULTS_ANNOTATION, REPORT_APIS } from '../../src/policy/report-api.ts';
import { reportContentEqual } from '../../src/policy/report-compare.ts';
import type { Report } from '../../src/policy/report-shape.ts';
import type { RuleVerdict, Verdict } from '../../src/policy/types.ts';
import { assertValidReport } from '../support/reports.ts';

const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', namespace: 'team-a', uid: '0b3c8a4e-1111-4c1a-9c55-5d2e0f000001' } };
const ns = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'team-a', uid: '0b3c8a4e-2222-4c1a-9c55-5d2e0f000002' } };

function verdict(rule: string, result: Verdict, extra: Partial<RuleVerdict> = {}): RuleVerdict {
  return { rule, ruleKind: 'PortalClusterRule', enforcement: 'Deny', severity: 'high', category: 'Pod Security', result, message: `${rule}: ${result}`, violations: [], ...extra };
}

const now = new Date(Date.UTC(2025, 4, 6, 7, 8, 9, 123));
const limits = { maxResults: 100, statusFilter: ['fail', 'warn', 'error'] as Verdict[] };

for (const api of REPORT_APIS) {
  void test(`${api}, resource: a namespaced object gets a report named by its UID, owned by it, labelled, valid against the CRD`, () => {
    const ref = resourceReference(pod)!;
    const report = buildResourceReport({ ref, verdicts: [verdict('b-rule', 'fail'), verdict('a-rule', 'pass', { ruleKind: 'PortalRule', enforcement: 'Warn', category: '' })] }, { api, epoch: 'lease-uid/3', now })!;
    assert.equal(report.kind, api === 'openreports' ? 'Report' : 'PolicyReport');
    assert.equal(report.apiVersion, api === 'openreports' ? 'openreports.io/v1alpha1' : 'wgpolicyk8s.io/v1alpha2');
    assert.deepEqual(report.metadata, {
      name: pod.metadata.uid,
      namespace: 'team-a',
      labels: {
        'app.kubernetes.io/managed-by': 'portal',
        'reports.portal.dev/granularity': 'resource',
        'reports.portal.dev/kind': 'Pod',
        'reports.portal.dev/name': 'web',
        'reports.portal.dev/uid': pod.metadata.uid,
      },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'web', uid: pod.metadata.uid }],
    });
    assert.deepEqual(report.scope, { apiVersion: 'v1', kind: 'Pod', name: 'web', namespace: 'team-a', uid: pod.metadata.uid });
    assert.deepEqual(report.results.map((r) => r.policy), ['a-rule', 'b-rule'], 'sorted by policy');
    const b = report.results[1]!;
    assert.deepEqual(b.timestamp, { seconds: Math.floor(now.getTime() / 1000), nanos: 123_000_000 });
    assert.deepEqual(b.properties, { epoch: 'lease-uid/3', enforcement: 'Deny', ruleKind: 'PortalClusterRule' });
    assert.equal(b.resources, undefined, 'the scope names the object');
    if (api === 'openreports') {
      assert.equal(report.source, 'portal');
      assert.equal(b.source, undefined, 'the report-level source applies');
      assert.deepEqual(report.configuration, { limits: { maxResults: 2, statusFilter: ['pass', 'fail', 'warn', 'error', 'skip'] } }, 'what the report holds: every result');
    } else {
      assert.equal(report.source, undefined, 'wgpolicyk8s has no report-level source');
      assert.equal(b.source, 'portal');
      assert.equal(report.configuration, undefined);
    }
    assert.equal(b.category, 'Pod Security');
    assert.equal(report.results[0]!.category, undefined, 'empty category omitted');
    assert.deepEqual(report.summary, { pass: 1, fail: 1, warn: 0, error: 0, skip: 0 });
    assertValidReport(report);
  });

  void test(`${api}, resource: a cluster-scoped object gets a cluster report, valid against its CRD`, () => {
    const ref = resourceReference(ns)!;
    assert.deepEqual(resourceReportIdentity(api, ref), { kind: api === 'openreports' ? 'ClusterReport' : 'ClusterPolicyReport', namespace: '', name: ns.metadata.uid });
    const report = buildResourceReport({ ref, verdicts: [verdict('ns-rule', 'warn')] }, { api, epoch: 'e/1', now })!;
    assert.equal(report.kind, api === 'openreports' ? 'ClusterReport' : 'ClusterPolicyReport');
    assert.equal(report.metadata.namespace, undefined);
    assertValidReport(report);
  });

  void test(`${api}, resource: offline objects (no uid) get a DNS-safe name and no owner; a long name gets no name label`, () => {
    const long = 'x'.repeat(100);
    const report = buildResourceReport({ ref: { apiVersion: 'apps/v1', kind: 'Deployment', name: long, namespace: 'default' }, verdicts: [verdict('r', 'fail')] }, { api, now })!;
    assert.equal(report.metadata.name, `deployment-${long}`);
    assert.equal(report.metadata.ownerReferences, undefined);
    assert.equal(report.metadata.labels['reports.portal.dev/name'], undefined, 'not a valid label value');
    assert.deepEqual(report.results[0]!.properties, { enforcement: 'Deny', ruleKind: 'PortalClusterRule' }, 'no epoch offline');
    assertValidReport(report);
  });

  void test(`${api}, namespace: summary of every result (skip: exemptions only), only statusFilter results listed (most important first), with their objects`, () => {
    const subjects: ReportSubject[] = [
      // r4 does not apply to b (say, its match.namespaces leave team-a out): neither counted nor listed.
      { ref: { apiVersion: 'v1', kind: 'Pod', name: 'b', namespace: 'team-a', uid: 'u-b' }, verdicts: [verdict('r1', 'pass'), verdict('r2', 'warn', { severity: 'low' }), verdict('r4', 'skip')] },
      { ref: { apiVersion: 'v1', kind: 'Pod', name: 'a', namespace: 'team-a', uid: 'u-a' }, verdicts: [verdict('r1', 'fail', { severity: 'medium' }), verdict('r2', 'error'), verdict('r3', 'skip', { exception: 'team-a/x' })] },
      { ref: { apiVersion: 'v1', kind: 'Pod', name: 'c', namespace: 'team-a', uid: 'u-c' }, verdicts: [verdict('r1', 'fail', { severity: 'critical' })] },
    ];
    const report = buildNamespaceReport('team-a', subjects, { api, epoch: 'e/1', now, limits })!;
    assert.equal(report.kind, api === 'openreports' ? 'Report' : 'PolicyReport');
    assert.deepEqual(report.metadata, {
      name: 'portal',
      namespace: 'team-a',
      labels: { 'app.kubernetes.io/managed-by': 'portal', 'reports.portal.dev/granularity': 'namespace', 'reports.portal.dev/namespace': 'team-a' },
      annotations: { 'reports.portal.dev/objects': '3' },
    });
    assert.equal(report.scope, undefined);
    assert.deepEqual(report.summary, { pass: 1, fail: 2, warn: 1, error: 1, skip: 1 });
    assert.deepEqual(
      report.results.map((r) => `${r.result} ${r.severity} ${r.policy} ${r.resources?.[0]?.name}`),
      ['fail critical r1 c', 'fail medium r1 a', 'error high r2 a', 'warn low r2 b'],
    );
    assert.deepEqual(report.results[0]!.resources, [{ apiVersion: 'v1', kind: 'Pod', name: 'c', namespace: 'team-a', uid: 'u-c' }]);
    if (api === 'openreports') assert.deepEqual(report.configuration, { limits: { maxResults: 100, statusFilter: ['fail', 'warn', 'error'] } });
    assertValidReport(report);
    const cluster = buildNamespaceReport('', [{ ref: resourceReference(ns)!, verdicts: [verdict('ns', 'fail')] }], { api, now, limits })!;
    assert.equal(cluster.kind, api === 'openreports' ? 'ClusterReport' : 'ClusterPolicyReport');
    assert.equal(cluster.metadata.namespace, undefined);
    assert.deepEqual(cluster.metadata.labels, { 'app.kubernetes.io/managed-by': 'portal', 'reports.portal.dev/granularity': 'namespace' });
    assertValidReport(cluster);
  });

  void test(`${api}, namespace: at most maxResults listed; the annotation says how many were left out; none with nothing to report`, () => {
    const subjects: ReportSubject[] = Array.from({ length: 30 }, (_, i) => ({ ref: { apiVersion: 'v1', kind: 'Pod', name: `p${String(i).padStart(2, '0')}`, namespace: 'n', uid: `u${i}` }, verdicts: [verdict('r', 'fail'), verdict('q', 'pass')] }));
    const report = buildNamespaceReport('n', subjects, { api, now, limits: { maxResults: 10, statusFilter: ['fail'] } })!;
    assert.equal(report.results.length, 10);
    assert.deepEqual(report.summary, { pass: 30, fail: 30, warn: 0, error: 0, skip: 0 });
    assert.equal(report.metadata.annotations?.[OMITTED_RESULTS_ANNOTATION], '20');
    assert.deepEqual(report.results.map((r) => r.resources?.[0]?.name), Array.from({ length: 10 }, (_, i) => `p0${i}`), 'the first ten in a stable order');
    if (api === 'openreports') assert.deepEqual(report.configuration?.limits, { maxResults: 10, statusFilter: ['fail'] });
    assertValidReport(report);
    // The same subjects in another order build the same report.
    assert.deepEqual(buildNamespaceReport('n', [...subjects].reverse(), { api, now, limits: { maxResults: 10, statusFilter: ['fail'] } }), report);
    const all = buildNamespaceReport('n', subjects, { api, now, limits: { maxResults: 100, statusFilter: ['fail'] } })!;
    assert.equal(all.metadata.annotations?.[OMITTED_RESULTS_ANNOTATION], undefined, 'nothing left out: no annotation');
    assert.equal(all.metadata.annotations?.['reports.portal.dev/objects'], '30', 'the summary counts 30 objects');
    assert.equal(buildNamespaceReport('n', [{ ref: subjects[0]!.ref, verdicts: [] }], { api, now, limits }), undefined);
    const passing = buildNamespaceReport('n', [{ ref: subjects[0]!.ref, verdicts: [verdict('q', 'pass')] }], { api, now, limits })!;
    assert.deepEqual(passing.results, [], 'only a summary when nothing matches the filter');
    assertValidReport(passing);
  });

  void test(`${api}: a report says how current it is; that alone is not content (no rewrite for it)`, () => {
    const subjects: ReportSubject[] = [{ ref: { apiVersion: 'v1', kind: 'Pod', name: 'a', namespace: 'n', uid: 'u-a' }, verdicts: [verdict('r', 'fail')] }];
    const at = (iso: string) => buildNamespaceReport('n', subjects, { api, now, currentAsOf: new Date(iso), limits })!;
    const earlier = at('2026-01-01T00:00:00.000Z');
    assert.equal(earlier.metadata.annotations?.['reports.portal.dev/current-as-of'], '2026-01-01T00:00:00.000Z');
    assert.ok(reportContentEqual(earlier, at('2026-01-01T00:05:00.000Z')), 'only the time moved');
    assertValidReport(earlier);
    const resource = buildResourceReport(subjects[0]!, { api, now, currentAsOf: new Date('2026-01-01T00:00:00.000Z') })!;
    assert.equal(resource.metadata.annotations?.['reports.portal.dev/current-as-of'], '2026-01-01T00:00:00.000Z');
    assertValidReport(resource);
  });
}

void test('no verdicts means no report; objects without uid/kind get no reference; long messages are clipped', () => {
  assert.equal(buildResourceReport({ ref: resourceReference(pod)!, verdicts: [] }, { api: 'openreports', now }), undefined);
  assert.equal(resourceReference({ kind: 'Pod', metadata: { name: 'x' } }), undefined);
  const r = buildResourceReport({ ref: resourceReference(pod)!, verdicts: [verdict('r', 'fail', { message: 'm'.repeat(5000) })] }, { api: 'openreports', now })!;
  assert.equal(r.results[0]!.message.length, MAX_MESSAGE_LENGTH);
  assert.ok(r.results[0]!.message.endsWith('…'));
});

const verdictArb = fc.record({
  rule: fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/),
  result: fc.constantFrom<Verdict>('pass', 'fail', 'warn', 'error', 'skip'),
  // A skip is an exemption, or a rule that does not apply (never reported).
  exempted: fc.boolean(),
  severity: fc.constantFrom('critical', 'high', 'medium', 'low', 'info') as fc.Arbitrary<RuleVerdict['severity']>,
  message: fc.string(),
});

void test('property: summary matches results, every report validates, rebuilding is stable, skips that are not exemptions are neither listed nor counted (both APIs, both granularities)', () => {
  fc.assert(
    fc.property(
      fc.constantFrom(...REPORT_APIS),
      fc.uniqueArray(verdictArb, { selector: (v) => v.rule, minLength: 1, maxLength: 12 }),
      fc.integer({ min: 1, max: 4 }),
      fc.integer({ min: 0, max: 10_000_000 }),
      (api, vs, objects, later) => {
        const all = vs.map((v) => verdict(v.rule, v.result, { severity: v.severity, message: v.message, ...(v.exempted ? { exception: 'team-a/x' } : {}) }));
        const verdicts = all.filter((v) => v.result !== 'skip' || v.exception !== undefined);
        const ref = resourceReference(pod)!;
        if (verdicts.length === 0) {
          assert.equal(buildResourceReport({ ref, verdicts: all }, { api, now }), undefined, 'nothing applies: no report');
          return;
        }
        const first = buildResourceReport({ ref, verdicts: all }, { api, epoch: 'u/1', now })!;
        assertValidReport(first);
        for (const outcome of ['pass', 'fail', 'warn', 'error', 'skip'] as const) {
          assert.equal(first.summary[outcome], first.results.filter((r) => r.result === outcome).length);
        }
        assert.equal(first.results.length, verdicts.length);
        // A later pass, by a new leader, with the verdicts in another order: same content, no rewrite,
        // and the stored timestamps and epoch are kept verbatim.
        const second = buildResourceReport({ ref, verdicts: [...all].reverse() }, { api, epoch: 'u/2', now: new Date(now.getTime() + later), previous: first })!;
        assert.equal(reportContentEqual(first, second), true);
        assert.deepEqual(second, first);

        const subjects = Array.from({ length: objects }, (_, i) => ({ ref: { ...ref, name: `p${i}`, uid: `uid-${i}` }, verdicts: all }));
        const nsFirst = buildNamespaceReport('team-a', subjects, { api, epoch: 'u/1', now, limits: { maxResults: 5, statusFilter: ['fail', 'warn', 'error'] } })!;
        assertValidReport(nsFirst);
        const listed = verdicts.filter((v) => v.result === 'fail' || v.result === 'warn' || v.result === 'error').length * objects;
        assert.equal(nsFirst.results.length, Math.min(5, listed));
        assert.equal(nsFirst.metadata.annotations?.[OMITTED_RESULTS_ANNOTATION], listed > 5 ? String(listed - 5) : undefined);
        for (const outcome of ['pass', 'fail', 'warn', 'error', 'skip'] as const) {
          assert.equal(nsFirst.summary[outcome], verdicts.filter((v) => v.result === outcome).length * objects);
        }
        const nsSecond = buildNamespaceReport('team-a', [...subjects].reverse(), { api, epoch: 'u/2', now: new Date(now.getTime() + later), previous: nsFirst, limits: { maxResults: 5, statusFilter: ['error', 'warn', 'fail'] } })!;
        assert.deepEqual(nsSecond, nsFirst);
      },
    ),
    { numRuns: 200 },
  );
});

void test('an exempted object: its skip result names the PortalException in both APIs and both granularities; another exception is a content change', () => {
  const ref = resourceReference(pod)!;
  const skip = (exception: string): RuleVerdict => verdict('no-privileged', 'skip', { exception, message: `no-privileged: skipped: exempted by PortalException ${exception}` });
  for (const api of REPORT_APIS) {
    const own = buildResourceReport({ ref, verdicts: [skip('team-a/agent'), verdict('other', 'fail')] }, { api, now })!;
    assert.deepEqual(
      own.results.map((r) => [r.policy, r.result, r.properties['exception']]),
      [
        ['no-privileged', 'skip', 'team-a/agent'],
        ['other', 'fail', undefined],
      ],
    );
    assertValidReport(own);
    const moved = buildResourceReport({ ref, verdicts: [skip('team-a/batch'), verdict('other', 'fail')] }, { api, now, previous: own })!;
    assert.equal(reportContentEqual(own, moved), false, 'another exception is another result');
    const perNs = buildNamespaceReport('team-a', [{ ref, verdicts: [skip('team-a/agent')] }], { api, now, limits: { maxResults: 10, statusFilter: ['skip'] } })!;
    assert.equal(perNs.results[0]!.properties['exception'], 'team-a/agent');
    assertValidReport(perNs);
  }
});

void test('a changed result is a content change; only that result gets the new timestamp and epoch', () => {
  const ref = resourceReference(pod)!;
  const first = buildResourceReport({ ref, verdicts: [verdict('a', 'pass'), verdict('b', 'pass')] }, { api: 'openreports', epoch: 'u/1', now })!;
  const later = new Date(now.getTime() + 60_000);
  const second = buildResourceReport({ ref, verdicts: [verdict('a', 'pass'), verdict('b', 'fail')] }, { api: 'openreports', epoch: 'u/2', now: later, previous: first })!;
  assert.equal(reportContentEqual(first, second), false);
  assert.deepEqual(second.results[0]!.timestamp, first.results[0]!.timestamp);
  assert.equal(second.results[0]!.properties['epoch'], 'u/1');
  assert.equal(second.results[1]!.timestamp.seconds, Math.floor(later.getTime() / 1000));
  assert.equal(second.results[1]!.properties['epoch'], 'u/2');
  assert.deepEqual(second.summary, { pass: 1, fail: 1, warn: 0, error: 0, skip: 0 });
});

void test('namespace reports: a new pass result changes the summary only; unchanged listed results keep timestamp and epoch', () => {
  const a = { ref: { apiVersion: 'v1', kind: 'Pod', name: 'a', namespace: 'n', uid: 'ua' }, verdicts: [verdict('r', 'fail')] };
  const b = { ref: { apiVersion: 'v1', kind: 'Pod', name: 'b', namespace: 'n', uid: 'ub' }, verdicts: [verdict('r', 'pass')] };
  const first = buildNamespaceReport('n', [a], { api: 'openreports', epoch: 'u/1', now, limits })!;
  const second = buildNamespaceReport('n', [a, b], { api: 'openreports', epoch: 'u/2', now: new Date(now.getTime() + 5000), previous: first, limits })!;
  assert.equal(reportContentEqual(first, second), false, 'the summary changed');
  assert.deepEqual(second.results, first.results, 'the listed result is unchanged, timestamp and epoch included');
});

void test('a stored report with server metadata, foreign labels and reordered keys compares equal to a rebuilt one', () => {
  const ref = resourceReference(pod)!;
  for (const api of REPORT_APIS) {
    const built = buildResourceReport({ ref, verdicts: [verdict('a', 'fail')] }, { api, epoch: 'u/1', now })!;
    const stored = JSON.parse(JSON.stringify({ ...built, metadata: { resourceVersion: '42', creationTimestamp: 'x', uid: 'y', generation: 1, ...built.metadata, labels: { team: 'x', ...built.metadata.labels } } })) as Report;
    stored.results[0] = Object.fromEntries(Object.entries(stored.results[0]!).reverse()) as unknown as Report['results'][number];
    assert.equal(reportContentEqual(stored, buildResourceReport({ ref, verdicts: [verdict('a', 'fail')] }, { api, epoch: 'u/9', now: new Date(0) })), true);
    // A report of the other API, or one without Portal's labels (before issue 20), is different content.
    const unlabelled = { ...stored, metadata: { ...stored.metadata, labels: { 'app.kubernetes.io/managed-by': 'portal' } } };
    assert.equal(reportContentEqual(unlabelled, built), false);
  }
  assert.equal(reportContentEqual(buildResourceReport({ ref, verdicts: [verdict('a', 'fail')] }, { api: 'openreports', now }), buildResourceReport({ ref, verdicts: [verdict('a', 'fail')] }, { api: 'wgpolicyk8s', now })), false);
  assert.equal(reportContentEqual(undefined, undefined), true);
});

void test('hostile: a namespace of 5,000 objects with 10 KB messages and 253-character names stays one bounded report', () => {
  const long = (c: string) => c.repeat(253);
  const subjects: ReportSubject[] = Array.from({ length: 5000 }, (_, i) => ({
    ref: { apiVersion: 'example.com/v1', kind: 'Widget', name: `${long('w').slice(0, 247)}${String(i).padStart(6, '0')}`, namespace: 'n', uid: `uid-${i}` },
    verdicts: ['a', 'b', 'c'].map((r) => verdict(long(r), 'fail', { message: 'x'.repeat(10_000) })),
  }));
  for (const api of REPORT_APIS) {
    const report = buildNamespaceReport('n', subjects, { api, epoch: 'e/1', now, limits: { maxResults: 100, statusFilter: ['fail'] } })!;
    assert.equal(report.results.length, 100);
    assert.equal(report.metadata.annotations?.[OMITTED_RESULTS_ANNOTATION], String(5000 * 3 - 100));
    assert.equal(report.summary.fail, 15_000);
    // 100 results of at most a 1 KiB message, two 253-character names and an object reference.
    const bytes = Buffer.byteLength(JSON.stringify(report));
    assert.ok(bytes < 300_000, `${bytes} bytes`);
    assertValidReport(report);
  }
});
