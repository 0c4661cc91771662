// Per-rule admission series on a spawned cluster-mode replica (issue 33,
// Deliver 2; issue 31, Deliver 4): portal_admission_results_total and the
// per-rule duration histogram count what the workers decided, the counters
// that name a rule or an exception (errors, exceptions applied) too, and
// every one of those series leaves /metrics once its rule or exception is
// deleted. /debug/vars and /metrics agree on leader transitions.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { join } from 'node:path';
import { families, parseExposition, type Sample } from '../support/exposition.ts';
import { debugVars, podReview, readyz, review, root, startServe, until, replicaCluster } from './support.ts';

const NS = 'portal-system';
const ENV = { POD_NAME: 'portal-0', POD_NAMESPACE: NS };
const LEASE = ['--lease-duration', '2s', '--renew-deadline', '1500ms', '--retry-period', '500ms'];

function privileged(name: string, enforcement: string): Record<string, unknown> {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalClusterRule',
    metadata: { name },
    spec: {
      enforcement,
      match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] },
      validate: {
        message: 'no privileged containers',
        cel: { expressions: [{ expression: "object.spec.containers.all(c, !c.?securityContext.?privileged.orValue(false))" }] },
      },
    },
  };
}

/** A rule that errs on every Pod (a missing key), with failurePolicy Ignore so that it does not deny. */
const erring = {
  apiVersion: 'portal.dev/v1alpha1',
  kind: 'PortalClusterRule',
  metadata: { name: 'erring-typo' },
  spec: {
    enforcement: 'Deny',
    failurePolicy: 'Ignore',
    match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] },
    validate: { cel: { expressions: [{ expression: 'object.spec.replcas <= 10' }] } },
  },
};

const exception = {
  apiVersion: 'portal.dev/v1alpha1',
  kind: 'PortalException',
  metadata: { name: 'let-web-be', namespace: NS },
  spec: { rules: ['warn-privileged'], match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], namespaces: ['team-x'] }, reason: 'test' },
};

async function scrapeText(probes: string): Promise<string> {
  return (await fetch(`${probes}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
}

async function scrape(probes: string): Promise<Sample[]> {
  return parseExposition(await scrapeText(probes));
}

/** The metric names of docs/operations.md's table ("## Metrics"): the first cell of each row, a trailing `*` a prefix. */
async function documentedMetrics(): Promise<string[]> {
  const text = await readFile(join(root, 'docs', 'operations.md'), 'utf8');
  const section = text.slice(text.indexOf('\n## Metrics\n'), text.indexOf('\n### ', text.indexOf('\n## Metrics\n')));
  return [...section.matchAll(/^\| `([a-z_:*]+)` \|/gm)].map((m) => m[1]!);
}

/** Exposed families no row names, and rows that name no exposed family. */
function tableDiff(exposed: readonly string[], documented: readonly string[]): { undocumented: string[]; notExposed: string[] } {
  const covers = (row: string, name: string) => (row.endsWith('*') ? name.startsWith(row.slice(0, -1)) : row === name);
  return {
    undocumented: exposed.filter((name) => !documented.some((row) => covers(row, name))),
    notExposed: documented.filter((row) => !exposed.some((name) => covers(row, name))),
  };
}

const value = (samples: Sample[], name: string, labels: Record<string, string>): number | undefined =>
  samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;

test('per-rule results, times, errors and exemptions on /metrics, and none of them once the rules and the exception are deleted', { timeout: 120_000 }, async (t) => {
  const { admin, kubeconfig: writeKubeconfig } = await replicaCluster(t, 'portal-rule-series-');
  await admin.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'team-x' } });
  for (const o of [privileged('deny-privileged', 'Deny'), privileged('warn-privileged', 'Warn'), erring, exception]) await admin.apply(o);
  const kubeconfig = await writeKubeconfig(`system:serviceaccount:${NS}:portal-0`);
  const s = await startServe(t, ['--kubeconfig', kubeconfig, ...LEASE], ENV);
  await until('/readyz 200', 30_000, async () => (await readyz(s.probes)) === 200);
  await until('the replica to lead', 15_000, async () => (await debugVars(s.probes))?.leader_election?.is_leader === true);
  const ca = await readFile(s.caFile);

  for (let i = 0; i < 3; i++) assert.equal((await review(s.webhook, ca, podReview({ privileged: false }))).allowed, true);
  for (let i = 0; i < 2; i++) assert.equal((await review(s.webhook, ca, podReview({ privileged: true }))).allowed, false);
  // In team-x the exception exempts warn-privileged; deny-privileged still denies.
  assert.equal((await review(s.webhook, ca, podReview({ namespace: 'team-x', privileged: true }))).allowed, false);

  const before = await scrape(s.probes);
  const results = 'portal_admission_results_total';
  assert.equal(value(before, results, { rule: 'deny-privileged', enforcement: 'Deny', result: 'pass' }), 3);
  assert.equal(value(before, results, { rule: 'deny-privileged', enforcement: 'Deny', result: 'fail' }), 3);
  assert.equal(value(before, results, { rule: 'warn-privileged', enforcement: 'Warn', result: 'pass' }), 3);
  assert.equal(value(before, results, { rule: 'warn-privileged', enforcement: 'Warn', result: 'warn' }), 2);
  assert.equal(value(before, results, { rule: 'warn-privileged', enforcement: 'Warn', result: 'skip' }), 1);
  assert.equal(value(before, results, { rule: 'erring-typo', enforcement: 'Deny', result: 'error' }), 6);
  // Exemptions are not timed: 5 evaluations of warn-privileged, 6 of the others.
  assert.equal(value(before, 'portal_admission_rule_duration_seconds_count', { rule: 'warn-privileged' }), 5);
  assert.equal(value(before, 'portal_admission_rule_duration_seconds_count', { rule: 'deny-privileged' }), 6);
  assert.equal(value(before, 'portal_admission_rule_duration_seconds_bucket', { rule: 'deny-privileged', le: '+Inf' }), 6);
  assert.equal(value(before, 'portal_rule_evaluation_errors_total', { rule: 'erring-typo', path: 'admission' }), 6);
  assert.equal(value(before, 'portal_exceptions_applied_total', { exception: `${NS}/let-web-be`, rule: 'warn-privileged' }), 1);
  // The standard process and Node.js series.
  for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_seconds']) {
    assert.ok(before.some((x) => x.name === name), `${name} exposed`);
  }
  // One info line per denial: the rules, the request's identifiers and the user, never the object.
  const denials = s.lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'admission request denied');
  assert.equal(denials.length, 3);
  assert.deepEqual(
    { rules: denials[0]!.rules, kind: denials[0]!.kind, namespace: denials[0]!.namespace, name: denials[0]!.name, user: denials[0]!.user, level: denials[0]!.level },
    { rules: ['deny-privileged'], kind: 'Pod', namespace: 'default', name: 'web', user: 'alice', level: 30 },
  );
  assert.equal(typeof denials[0]!.uid, 'string');
  assert.ok(!('object' in denials[0]!) && !JSON.stringify(denials[0]).includes('nginx'), 'the object is never logged');
  // docs/operations.md's metrics table is the set a cluster-mode replica exposes (issue 33).
  assert.deepEqual(tableDiff([...families(await scrapeText(s.probes)).keys()], await documentedMetrics()), { undocumented: [], notExposed: [] });
  // /debug/vars reads the transitions /metrics counts (issue 33, Deliver 5).
  const vars = (await (await fetch(`${s.probes}/debug/vars`)).json()) as { leader_election: { transitions: number } };
  assert.equal(vars.leader_election.transitions, value(before, 'portal_leader_transitions_total', {}));

  for (const name of ['deny-privileged', 'warn-privileged', 'erring-typo']) {
    assert.equal((await admin.request('DELETE', `/apis/portal.dev/v1alpha1/portalclusterrules/${name}`)).status, 200);
  }
  assert.equal((await admin.request('DELETE', `/apis/portal.dev/v1alpha1/namespaces/${NS}/portalexceptions/let-web-be`)).status, 200);
  const named = /deny-privileged|warn-privileged|erring-typo|let-web-be/;
  await until('no series of the deleted rules and exception', 15_000, async () => {
    const left = (await scrape(s.probes)).filter((x) => Object.values(x.labels).some((v) => named.test(v)));
    return left.length === 0 ? true : undefined;
  });
});
