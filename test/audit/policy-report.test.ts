import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import fc from 'fast-check';
import { buildPolicyReport, reportContentEqual, reportIdentity, resourceReference, type PolicyReport } from '../../src/audit/policy-report.ts';
import type { RuleVerdict, Verdict } from '../../src/policy/types.ts';

const crdDir = new URL('../../charts/portal/files/crds/', import.meta.url);

/**
 * The CRD's openAPIV3Schema, and a strict copy in which every object with
 * `properties` forbids unknown fields: the API server prunes unknown fields
 * silently, so a field the schema does not know would vanish from our reports.
 */
function schemas(file: string): { lax: object; strict: object } {
  const crd = parse(readFileSync(new URL(file, crdDir), 'utf8')) as { spec: { versions: Array<{ name: string; schema: { openAPIV3Schema: object } }> } };
  const lax = crd.spec.versions.find((v) => v.name === 'v1alpha2')!.schema.openAPIV3Schema;
  const strict = JSON.parse(JSON.stringify(lax), function (this: unknown, _k, v: unknown) {
    if (v && typeof v === 'object' && !Array.isArray(v) && 'properties' in v && !('additionalProperties' in v)) return { ...v, additionalProperties: false };
    return v;
  }) as object;
  return { lax, strict };
}

function validator(file: string) {
  const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
  const { lax, strict } = schemas(file);
  const validateLax = ajv.compile(lax);
  const validateStrict = ajv.compile(strict);
  return (report: unknown) => {
    assert.ok(validateLax(report), JSON.stringify(validateLax.errors));
    assert.ok(validateStrict(report), `a field would be pruned: ${JSON.stringify(validateStrict.errors)}`);
  };
}

const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', namespace: 'team-a', uid: '0b3c8a4e-1111-4c1a-9c55-5d2e0f000001' } };
const ns = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'team-a', uid: '0b3c8a4e-2222-4c1a-9c55-5d2e0f000002' } };

function verdict(rule: string, result: Verdict, extra: Partial<RuleVerdict> = {}): RuleVerdict {
  return { rule, ruleKind: 'PortalClusterRule', enforcement: 'Deny', severity: 'high', category: 'Pod Security', result, message: `${rule}: ${result}`, violations: [], ...extra };
}

const now = new Date(Date.UTC(2025, 4, 6, 7, 8, 9, 123));

void test('a namespaced resource gets a PolicyReport named by its UID, owned by it, valid against the CRD', () => {
  const ref = resourceReference(pod)!;
  const report = buildPolicyReport(ref, [verdict('b-rule', 'fail'), verdict('a-rule', 'pass', { ruleKind: 'PortalRule', enforcement: 'Warn', category: '' })], { epoch: 'lease-uid/3', now })!;
  assert.equal(report.kind, 'PolicyReport');
  assert.equal(report.apiVersion, 'wgpolicyk8s.io/v1alpha2');
  assert.deepEqual(report.metadata, {
    name: pod.metadata.uid,
    namespace: 'team-a',
    labels: { 'app.kubernetes.io/managed-by': 'portal' },
    ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'web', uid: pod.metadata.uid }],
  });
  assert.deepEqual(report.scope, { apiVersion: 'v1', kind: 'Pod', name: 'web', namespace: 'team-a', uid: pod.metadata.uid });
  assert.deepEqual(report.results.map((r) => r.policy), ['a-rule', 'b-rule'], 'sorted by policy');
  const b = report.results[1]!;
  assert.deepEqual(b.timestamp, { seconds: Math.floor(now.getTime() / 1000), nanos: 123_000_000 });
  assert.deepEqual(b.properties, { epoch: 'lease-uid/3', enforcement: 'Deny', ruleKind: 'PortalClusterRule' });
  assert.equal(b.source, 'portal');
  assert.equal(b.category, 'Pod Security');
  assert.equal(report.results[0]!.category, undefined, 'empty category omitted');
  assert.deepEqual(b.resources, [report.scope]);
  assert.deepEqual(report.summary, { pass: 1, fail: 1, warn: 0, error: 0, skip: 0 });
  validator('wgpolicyk8s.io_policyreports.yaml')(report);
});

void test('a cluster-scoped resource gets a ClusterPolicyReport, valid against its CRD', () => {
  const ref = resourceReference(ns)!;
  assert.deepEqual(reportIdentity(ref), { kind: 'ClusterPolicyReport', namespace: '', name: ns.metadata.uid });
  const report = buildPolicyReport(ref, [verdict('ns-rule', 'warn')], { epoch: 'e/1', now })!;
  assert.equal(report.kind, 'ClusterPolicyReport');
  assert.equal(report.metadata.namespace, undefined);
  validator('wgpolicyk8s.io_clusterpolicyreports.yaml')(report);
});

void test('no verdicts means no report; objects without uid/kind get no reference', () => {
  assert.equal(buildPolicyReport(resourceReference(pod)!, [], { epoch: 'e', now }), undefined);
  assert.equal(resourceReference({ kind: 'Pod', metadata: { name: 'x' } }), undefined);
});

const verdictArb = fc.record({
  rule: fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/),
  result: fc.constantFrom<Verdict>('pass', 'fail', 'warn', 'error', 'skip'),
  severity: fc.constantFrom('critical', 'high', 'medium', 'low', 'info') as fc.Arbitrary<RuleVerdict['severity']>,
  message: fc.string(),
});

void test('property: summary matches results, every report validates, and rebuilding is stable', () => {
  const validate = validator('wgpolicyk8s.io_policyreports.yaml');
  fc.assert(
    fc.property(fc.uniqueArray(verdictArb, { selector: (v) => v.rule, minLength: 1, maxLength: 12 }), fc.integer({ min: 0, max: 10_000_000 }), (vs, later) => {
      const verdicts = vs.map((v) => verdict(v.rule, v.result, { severity: v.severity, message: v.message }));
      const ref = resourceReference(pod)!;
      const first = buildPolicyReport(ref, verdicts, { epoch: 'u/1', now })!;
      validate(first);
      for (const outcome of ['pass', 'fail', 'warn', 'error', 'skip'] as const) {
        assert.equal(first.summary[outcome], first.results.filter((r) => r.result === outcome).length);
      }
      assert.equal(first.results.length, verdicts.length);
      // A later pass, by a new leader, with the verdicts in another order: same content, no rewrite,
      // and the stored timestamps and epoch are kept verbatim.
      const second = buildPolicyReport(ref, [...verdicts].reverse(), { epoch: 'u/2', now: new Date(now.getTime() + later), previous: first })!;
      assert.equal(reportContentEqual(first, second), true);
      assert.deepEqual(second, first);
    }),
    { numRuns: 200 },
  );
});

void test('a changed result is a content change; only that result gets the new timestamp and epoch', () => {
  const ref = resourceReference(pod)!;
  const first = buildPolicyReport(ref, [verdict('a', 'pass'), verdict('b', 'pass')], { epoch: 'u/1', now })!;
  const later = new Date(now.getTime() + 60_000);
  const second = buildPolicyReport(ref, [verdict('a', 'pass'), verdict('b', 'fail')], { epoch: 'u/2', now: later, previous: first })!;
  assert.equal(reportContentEqual(first, second), false);
  assert.deepEqual(second.results[0]!.timestamp, first.results[0]!.timestamp);
  assert.equal(second.results[0]!.properties.epoch, 'u/1');
  assert.equal(second.results[1]!.timestamp.seconds, Math.floor(later.getTime() / 1000));
  assert.equal(second.results[1]!.properties.epoch, 'u/2');
  assert.deepEqual(second.summary, { pass: 1, fail: 1, warn: 0, error: 0, skip: 0 });
});

void test('a stored report with server metadata and reordered keys compares equal to a rebuilt one', () => {
  const ref = resourceReference(pod)!;
  const built = buildPolicyReport(ref, [verdict('a', 'fail')], { epoch: 'u/1', now })!;
  const stored = JSON.parse(JSON.stringify({ ...built, metadata: { resourceVersion: '42', creationTimestamp: 'x', uid: 'y', generation: 1, ...built.metadata } })) as PolicyReport;
  stored.results[0] = Object.fromEntries(Object.entries(stored.results[0]!).reverse()) as unknown as PolicyReport['results'][number];
  assert.equal(reportContentEqual(stored, buildPolicyReport(ref, [verdict('a', 'fail')], { epoch: 'u/9', now: new Date(0) })), true);
  assert.equal(reportContentEqual(stored, undefined), false);
  assert.equal(reportContentEqual(undefined, undefined), true);
});
