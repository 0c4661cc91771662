// Evaluation problems of a ValidatingAdmissionPolicy on the cluster (issue 12
// item 5): a missing param and an evaluation error show as one Warning Event
// on the policy each, written by the leader only (a follower writes none),
// not repeated by later audit passes nor by the next leader; every replica
// counts them in portal_vap_evaluation_errors_total{policy,reason}.
import assert from 'node:assert/strict';



import { test } from 'node:test';



import { debugVars, readyz, startServe, until, replicaCluster } from './support.ts';

const NS = 'portal-system';
const LEASE = ['--lease-duration', '2s', '--renew-deadline', '1500ms', '--retry-period', '500ms', '--audit-interval', '1s'];
const VAP = '/apis/admissionregistration.k8s.io/v1';

interface Event {
  metadata: { name: string; namespace: string };
  involvedObject: { apiVersion?: string; kind?: string; name?: string; uid?: string };
  reason?: string;
  message?: string;
  type?: string;
  count?: number;
  source?: { component?: string };
  reportingComponent?: string;
  reportingInstance?: string;
}

interface EventStats { pending: number; recorded: number; written: number }

async function eventStats(probes: string): Promise<EventStats | undefined> {
  const vars = (await debugVars(probes)) as { validating_admission_policies?: { events?: EventStats } } | undefined;
  return vars?.validating_admission_policies?.events;
}

async function metric(probes: string, policy: string, reason: string): Promise<number> {
  const text = await (await fetch(`${probes}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const m = new RegExp(`^portal_vap_evaluation_errors_total\\{policy="${policy}",reason="${reason}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

test('VAP evaluation problems: one Warning Event on the policy per problem, by the leader only, kept across a leader change', { timeout: 120_000 }, async (t) => {
  const { admin, kubeconfig: writeKubeconfig } = await replicaCluster(t, 'portal-vap-events-');
  const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web' }, spec: { containers: [{ name: 'c', image: 'nginx:1.27' }] } };
  assert.equal((await admin.request('POST', '/api/v1/namespaces/default/pods', pod)).status, 201);

  const match = { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['pods'] }] };
  // A param that does not exist, under parameterNotFoundAction Deny.
  const needsParams = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: 'needs-params' },
    spec: { paramKind: { apiVersion: 'v1', kind: 'ConfigMap' }, matchConstraints: match, validations: [{ expression: "object.metadata.name != params.data.forbidden" }] },
  };
  // Compiles (dynamic types), fails at run time on every Pod: no such key. The key is computed, so the
  // type check (a TypeCheckWarning Event, test/dev/type-check.test.ts) does not see it: only the runtime problem shows here.
  const badKey = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: 'bad-key' },
    spec: { matchConstraints: match, validations: [{ expression: 'true' }, { expression: "object.spec['noSuch' + 'Field'] == 'x'" }] },
  };
  const uids: Record<string, string> = {};
  for (const p of [needsParams, badKey]) {
    const res = await admin.request('POST', `${VAP}/validatingadmissionpolicies`, p);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    uids[p.metadata.name] = (res.body as { metadata: { uid: string } }).metadata.uid;
  }
  const bindings = [
    { metadata: { name: 'needs-params-binding' }, spec: { policyName: 'needs-params', validationActions: ['Audit'], paramRef: { name: 'absent', namespace: 'default', parameterNotFoundAction: 'Deny' } } },
    { metadata: { name: 'bad-key-binding' }, spec: { policyName: 'bad-key', validationActions: ['Audit'] } },
  ];
  for (const b of bindings) {
    const res = await admin.request('POST', `${VAP}/validatingadmissionpolicybindings`, { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicyBinding', ...b });
    assert.equal(res.status, 201, JSON.stringify(res.body));
  }

  const replica = async (name: string): Promise<Awaited<ReturnType<typeof startServe>>> => {
    const kubeconfig = await writeKubeconfig(`system:serviceaccount:${NS}:${name}`, `kubeconfig-${name}`);
    return startServe(t, ['--kubeconfig', kubeconfig, ...LEASE], { POD_NAME: name, POD_NAMESPACE: NS });
  };
  const a = await replica('portal-0');
  await until('portal-0 to lead', 30_000, async () => (await debugVars(a.probes))?.leader_election?.is_leader === true);
  const b = await replica('portal-1');
  await until('portal-1 ready', 30_000, async () => (await readyz(b.probes)) === 200);

  const vapEvents = async (): Promise<Event[]> => {
    // A ValidatingAdmissionPolicy is cluster-scoped: its Events are in "default" (kube-apiserver requires it).
    const res = await admin.request('GET', '/api/v1/namespaces/default/events');
    return ((res.body as { items?: Event[] }).items ?? []).filter((e) => e.involvedObject.kind === 'ValidatingAdmissionPolicy');
  };
  const events = await until('an Event on each policy', 30_000, async () => {
    const es = await vapEvents();
    return es.length >= 2 ? es : undefined;
  });
  assert.equal(events.length, 2, JSON.stringify(events));
  const byPolicy = new Map(events.map((e) => [e.involvedObject.name, e]));
  const params = byPolicy.get('needs-params');
  const key = byPolicy.get('bad-key');
  assert.ok(params && key, JSON.stringify(events));
  for (const [e, name] of [[params, 'needs-params'], [key, 'bad-key']] as const) {
    assert.deepEqual(e.involvedObject, { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicy', name, uid: uids[name] });
    assert.equal(e.type, 'Warning');
    assert.equal(e.source?.component, 'portal');
    assert.equal(e.reportingComponent, 'portal.dev/audit');
    assert.match(e.reportingInstance ?? '', /^portal-0_/, 'written by the leader');
  }
  assert.equal(params.reason, 'ParamNotFound');
  assert.match(params.message ?? '', /^ValidatingAdmissionPolicy needs-params, binding needs-params-binding: .*no params found/);
  assert.equal(key.reason, 'EvaluationError');
  assert.match(key.message ?? '', /^ValidatingAdmissionPolicy bad-key, binding bad-key-binding, spec\.validations\[1\]\.expression: .*noSuchField/);

  // Every replica counts; later passes count again but write no new Event.
  await until('both replicas to count several evaluations', 30_000, async () => (await metric(a.probes, 'needs-params', 'ParamNotFound')) >= 2 && (await metric(b.probes, 'bad-key', 'EvaluationError')) >= 2);
  assert.equal((await vapEvents()).length, 2);
  assert.equal((await eventStats(b.probes))?.written, 0, 'a follower writes no Event');
  assert.deepEqual(await eventStats(a.probes), { pending: 0, recorded: 2, written: 2 });

  // The leader goes; the new leader finds the Events written (409) and writes none again.
  a.child.kill('SIGTERM');
  await a.exited;
  await until('portal-1 to lead', 30_000, async () => (await debugVars(b.probes))?.leader_election?.is_leader === true);
  await until('portal-1 to have settled both problems', 30_000, async () => (await eventStats(b.probes))?.recorded === 2);
  assert.deepEqual(await eventStats(b.probes), { pending: 0, recorded: 2, written: 0 });
  assert.equal((await vapEvents()).length, 2);
});
