/**
 * Hostile PortalExceptions (issue 18): whatever an exception's author writes,
 * the rule set never throws, an exception never exempts by accident (an
 * error, a cost overrun, a deadline, a malformed field all mean "not
 * exempted"), and the work per request stays bounded. A tenant who may write
 * exceptions in its namespace can name no rule by wildcard, reach no other
 * namespace and no cluster-scoped object, outlive no lifetime cap (not by
 * editing expiresAt later either), and the webhook for Portal's own kinds
 * refuses all of that at apply.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { portalKinds } from '../../src/policy/portal-kinds.ts';
import { decideAdmission, RuleSet, validateExceptionShape, type EvaluationInput, type PortalExceptionObject } from '../../src/policy/index.ts';
import { allowAll, makePki, makeServer, type TestPki } from '../admission/helpers.ts';
import { clusterRule, exception, input, pod } from '../policy/support.ts';

const NOW = Date.parse('2026-06-01T00:00:00Z');
const privileged = () => input(pod({ privileged: true, namespace: 'monitoring', name: 'node-agent-1' }), { now: NOW });

void describe('hostile PortalExceptions', () => {
  void it('garbage never throws out of upsertException and exempts nothing', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    const garbage: unknown[] = [
      null,
      [],
      'a string',
      { kind: 'PortalException' },
      { apiVersion: 'portal.dev/v1alpha1', kind: 'PortalException', metadata: { name: 'x', namespace: 'monitoring' }, spec: { rules: { no: 'priv' }, match: [], reason: 5 } },
      { ...exception('monitoring', 'y'), spec: { ...exception('monitoring', 'y').spec, rules: ['no-priv'], match: { kinds: 'Pod' } } },
      exception('monitoring', 'far', { expiresAt: '99999-01-01T00:00:00Z' }),
      exception('monitoring', 'long-reason', { reason: 'x'.repeat(1_000_000) }),
      exception('monitoring', 'many-names', { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: Array.from({ length: 10_000 }, (_, i) => `n${i}`) } }),
      exception('monitoring', 'many-rules', { rules: Array.from({ length: 10_000 }, (_, i) => `r${i}`) }),
    ];
    for (const g of garbage) {
      const state = rs.upsertException(g);
      assert.equal(state.valid, false, JSON.stringify(g)?.slice(0, 120));
    }
    assert.equal(decideAdmission(rs, privileged()).allowed, false);
  });

  void it('a matchCondition that runs past its cost limit does not exempt, and is cut short', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    const big = `[${Array.from({ length: 200 }, (_, i) => i).join(',')}]`;
    const ex = exception('monitoring', 'costly', { matchConditions: [{ name: 'spin', expression: `${big}.all(a, ${big}.all(b, ${big}.all(c, a + b + c >= 0)))` }] });
    assert.equal(validateExceptionShape(ex).ok, true);
    rs.upsertException(ex);
    const started = process.cpuUsage();
    assert.equal(decideAdmission(rs, privileged()).allowed, false);
    const used = process.cpuUsage(started);
    // 8,000,000 iterations would take seconds; the per-call limit (1,000,000 units) stops it.
    assert.ok((used.user + used.system) / 1000 < 2000, `${(used.user + used.system) / 1000} ms of CPU`);
  });

  void it('past the evaluation deadline no matchCondition runs: not exempted, never a late allow', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    rs.upsertException(exception('monitoring', 'cel', { matchConditions: [{ name: 'yes', expression: 'true' }] }));
    assert.equal(decideAdmission(rs, privileged()).allowed, true);
    let t = 0;
    const late = decideAdmission(rs, privileged(), { deadline: 0, now: () => ++t, ms: 0 });
    assert.equal(late.allowed, false);
    assert.equal(late.exempted, undefined);
  });

  void it('a thousand exceptions in the namespace of the request, none covering: bounded, not exempted', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    for (let i = 0; i < 1000; i++) rs.upsertException(exception('monitoring', `e${i}`, { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: [`other-${i}-*`] }, matchConditions: [{ name: 'c', expression: 'object.spec.containers.size() > 0' }] }));
    const started = process.cpuUsage();
    for (let i = 0; i < 10; i++) assert.equal(decideAdmission(rs, privileged()).allowed, false);
    const used = process.cpuUsage(started);
    // The names miss before any CEL runs: ~1,000 cheap checks per request.
    assert.ok((used.user + used.system) / 1000 / 10 < 200, `${(used.user + used.system) / 1000 / 10} ms per request`);
  });

  void it('a matchCondition reading a missing field errs: not exempted', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    rs.upsertException(exception('monitoring', 'err', { matchConditions: [{ name: 'missing', expression: "object.metadata.labels['nope'] == 'x'" }] }));
    assert.equal(decideAdmission(rs, privileged()).allowed, false);
  });
});

const DAY = 86_400_000;
const ANY_KIND = { kinds: [{ apiGroups: ['*'], kinds: ['*'] }] };
const podIn = (namespace: string, name = 'web'): EvaluationInput => input(pod({ privileged: true, namespace, name }), { now: NOW });
/** A cluster-scoped object a rule matches (a Namespace without the label the rule asks for). */
const namespaceObject = (): EvaluationInput =>
  input({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'team-b' } }, { now: NOW, namespace: '', name: 'team-b', namespaceLabels: {} });
function labelledNamespaces(): RuleSet {
  const rs = new RuleSet({ exceptionNamespaces: ['portal-system'] });
  rs.upsert(clusterRule('no-priv'));
  rs.upsert(
    clusterRule('team-label', {
      match: { kinds: [{ apiGroups: [''], kinds: ['Namespace'] }] },
      validate: { message: 'namespaces need a team label', schema: { type: 'object', required: ['metadata'], properties: { metadata: { type: 'object', required: ['labels'] } } } },
    }),
  );
  return rs;
}

void describe('hostile PortalExceptions: who may exempt what', () => {
  void it('no wildcard rule: "*", a glob, "*/*" are refused and exempt nothing', () => {
    const rs = labelledNamespaces();
    for (const rules of [['*'], ['no-*'], ['*/*'], ['team-a/*'], ['']]) {
      const state = rs.upsertException(exception('team-a', 'all-rules', { rules, match: ANY_KIND }));
      assert.equal(state.valid, false, JSON.stringify(rules));
      assert.equal(decideAdmission(rs, podIn('team-a')).allowed, false, JSON.stringify(rules));
    }
    assert.match(validateExceptionShape(exception('team-a', 'all-rules', { rules: ['*'] })).ok ? '' : JSON.stringify(validateExceptionShape(exception('team-a', 'all-rules', { rules: ['*'] }))), /is not a rule name/);
  });

  void it('an overbroad match in a tenant namespace is bounded by that namespace: every kind, every name, every namespace glob', () => {
    const rs = labelledNamespaces();
    rs.upsertException(
      exception('team-a', 'everything', {
        rules: ['no-priv', 'team-label'],
        match: { ...ANY_KIND, names: ['*'], namespaces: ['*'], namespaceSelector: {}, objectSelector: {} },
      }),
    );
    const own = decideAdmission(rs, podIn('team-a'));
    assert.equal(own.allowed, true, 'its own namespace: exempted');
    assert.deepEqual(own.exempted, [{ rule: 'no-priv', exception: 'team-a/everything' }]);
    for (const ns of ['team-b', 'kube-system', 'portal-system', 'team-a-2', 'team']) assert.equal(decideAdmission(rs, podIn(ns)).allowed, false, `not in ${ns}`);
    assert.equal(decideAdmission(rs, namespaceObject()).allowed, false, 'never a cluster-scoped object');
    assert.equal(rs.mayExempt('team-b'), false, 'a request elsewhere does not even look at it');
  });

  void it('only --exception-namespaces hold cluster-wide exceptions, matched by exact name (no prefix, no look-alike)', () => {
    const rs = labelledNamespaces();
    const wide = (ns: string): PortalExceptionObject => exception(ns, 'wide', { rules: ['no-priv', 'team-label'], match: ANY_KIND });
    for (const ns of ['portal-system-x', 'portal', 'portal-systen', 'kube-system', 'default']) {
      rs.upsertException(wide(ns));
      assert.equal(decideAdmission(rs, podIn('team-b')).allowed, false, `an exception in ${ns} does not reach team-b`);
      assert.equal(decideAdmission(rs, namespaceObject()).allowed, false, `an exception in ${ns} does not reach a cluster-scoped object`);
    }
    rs.upsertException(wide('portal-system'));
    assert.equal(decideAdmission(rs, podIn('team-b')).allowed, true, 'the install namespace does');
    assert.equal(decideAdmission(rs, namespaceObject()).allowed, true);
  });

  void it('--max-exception-lifetime: never expiring, expiring too late, or pushed later by an edit: refused', () => {
    const rs = new RuleSet({ maxLifetimeMs: 30 * DAY });
    rs.upsert(clusterRule('no-priv'));
    const created = new Date(NOW - 29 * DAY).toISOString();
    const monitoring = (): EvaluationInput => privileged();
    const cases: [string, Partial<PortalExceptionObject['spec']>, boolean][] = [
      ['never expires', {}, false],
      ['a century', { expiresAt: new Date(NOW + 36_500 * DAY).toISOString() }, false],
      // Created 29 days ago: an edit that moves expiresAt 2 days on makes it 31 days long.
      ['extended by an edit', { expiresAt: new Date(NOW + 2 * DAY).toISOString() }, false],
      ['within the cap', { expiresAt: new Date(NOW + 0.5 * DAY).toISOString() }, true],
    ];
    for (const [what, spec, exempts] of cases) {
      rs.upsertException(exception('monitoring', 'agent', spec, { creationTimestamp: created, generation: Math.random() }));
      assert.equal(decideAdmission(rs, monitoring()).allowed, exempts, what);
    }
    // A creationTimestamp is the API server's; one in the future (a file, a forged object) does not lengthen the cap either.
    rs.upsertException(exception('monitoring', 'agent', { expiresAt: new Date(NOW + 40 * DAY).toISOString() }, { creationTimestamp: new Date(NOW + 20 * DAY).toISOString(), generation: 99 }));
    assert.equal(decideAdmission(rs, monitoring()).allowed, false, 'a creationTimestamp in the future counts as now: 40 days from now is over the cap');
  });

  void it('huge lists are refused by size before anything is compiled; a hundred thousand exceptions elsewhere cost a request nothing', () => {
    for (const [what, spec] of [
      ['65 rules', { rules: Array.from({ length: 65 }, (_, i) => `r${i}`) }],
      ['65 names', { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: Array.from({ length: 65 }, (_, i) => `n${i}`) } }],
      ['65 kinds entries', { match: { kinds: Array.from({ length: 65 }, () => ({ apiGroups: [''], kinds: ['Pod'] })) } }],
      ['65 matchConditions', { matchConditions: Array.from({ length: 65 }, (_, i) => ({ name: `c${i}`, expression: 'true' })) }],
      ['an expression of 1 MiB', { matchConditions: [{ name: 'c', expression: `${'true && '.repeat(131_072)}true` }] }],
    ] as const) {
      const started = process.cpuUsage();
      const v = validateExceptionShape(exception('monitoring', 'big', spec as Partial<PortalExceptionObject['spec']>));
      const used = process.cpuUsage(started);
      assert.equal(v.ok, false, what);
      assert.ok((used.user + used.system) / 1000 < 1000, `${what}: ${(used.user + used.system) / 1000} ms`);
    }
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    for (let i = 0; i < 100_000; i++) rs.upsertException(exception(`ns-${i % 1000}`, `e${i}`));
    const clean = podIn('team-a');
    decideAdmission(rs, clean); // builds the index once
    const started = process.cpuUsage();
    for (let i = 0; i < 1000; i++) assert.equal(decideAdmission(rs, clean).allowed, false);
    const used = process.cpuUsage(started);
    assert.ok((used.user + used.system) / 1000 < 2000, `${(used.user + used.system) / 1000} ms for 1,000 requests`);
  });
});

void describe('hostile PortalExceptions sent to the webhook for Portal\'s own kinds', () => {
  let pki: TestPki;
  before(async () => {
    pki = await makePki();
  });

  async function answer(object: Record<string, unknown>, maxLifetimeMs?: number): Promise<{ allowed: boolean; code?: number; message: string }> {
    const server = makeServer(pki, allowAll(), { portalKinds: portalKinds({ maxLifetimeMs }) });
    const meta = object['metadata'] as { name?: string; namespace?: string } | undefined;
    const res = await server.app.inject({
      method: 'POST',
      url: '/validate-portal-kinds',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: { uid: 'u', kind: { group: 'portal.dev', version: 'v1alpha1', kind: 'PortalException' }, name: meta?.name ?? '', namespace: meta?.namespace ?? '', operation: 'CREATE', object, oldObject: null },
      }),
    });
    await server.app.close();
    assert.equal(res.statusCode, 200);
    const r = (res.json() as { response: { allowed: boolean; status?: { code: number; message: string } } }).response;
    return { allowed: r.allowed, ...(r.status ? { code: r.status.code } : {}), message: r.status?.message ?? '' };
  }

  void it('a wildcard rule, an oversized list and a blank reason are refused as invalid (422), naming the field', async () => {
    const bad = exception('team-a', 'x', { rules: ['*'], match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: Array.from({ length: 65 }, (_, i) => `n${i}`) }, reason: ' ' });
    const r = await answer(bad as unknown as Record<string, unknown>);
    assert.equal(r.allowed, false);
    assert.equal(r.code, 422);
    assert.match(r.message, /PortalException "x" is invalid/);
    assert.match(r.message, /spec\.match\.names/);
    const wildcard = await answer(exception('team-a', 'x', { rules: ['*'] }) as unknown as Record<string, unknown>);
    assert.match(wildcard.message, /spec\.rules\[0\]: "\*" is not a rule name/);
  });

  void it('with --max-exception-lifetime: one that never expires is refused at apply, one within the cap is admitted', async () => {
    const forever = await answer(exception('team-a', 'x', {}, { creationTimestamp: new Date().toISOString() }) as unknown as Record<string, unknown>, 30 * DAY);
    assert.equal(forever.allowed, false);
    assert.match(forever.message, /spec\.expiresAt: .*--max-exception-lifetime/);
    const soon = await answer(exception('team-a', 'x', { expiresAt: new Date(Date.now() + DAY).toISOString() }, { creationTimestamp: new Date().toISOString() }) as unknown as Record<string, unknown>, 30 * DAY);
    assert.equal(soon.allowed, true, soon.message);
    // Without the cap, the same never-expiring exception is valid.
    assert.equal((await answer(exception('team-a', 'x') as unknown as Record<string, unknown>)).allowed, true);
  });
});
