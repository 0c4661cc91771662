import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RuleSet } from '../../src/policy/index.ts';
import { clusterRule } from '../policy/support.ts';
import { makePki, makeServer, allowAll, denyEveryPod, denyPrivileged, podReview, type TestPki, type TestServerExtra } from './helpers.ts';
import { MAX_JSON_DEPTH } from '../../src/policy/review/json-depth.ts';
import { ADMISSION_BODY_LIMIT } from '../../src/admission/limits.ts';

let pki: TestPki;
before(async () => {
  pki = await makePki();
});

async function post(t: ReturnType<typeof makeServer>, payload: unknown, headers: Record<string, string> = { 'content-type': 'application/json' }) {
  const res = await t.app.inject({ method: 'POST', url: '/validate', headers, payload: typeof payload === 'string' ? payload : JSON.stringify(payload) });
  return { status: res.statusCode, body: res.json() as { apiVersion: string; kind: string; response: { uid: string; allowed: boolean; status?: { code: number; message: string }; warnings?: string[] }; code?: number; message?: string } };
}

describe('POST /validate decisions', () => {
  const servers: ReturnType<typeof makeServer>[] = [];
  after(async () => {
    await Promise.all(servers.map((s) => s.app.close()));
  });
  const server = (rules: RuleSet, extra?: TestServerExtra) => {
    const s = makeServer(pki, rules, extra);
    servers.push(s);
    return s;
  };

  it('allows a compliant Pod in v1 and echoes uid and version', async () => {
    const s = server(denyPrivileged());
    const { status, body } = await post(s, podReview({ uid: 'abc-123' }));
    assert.equal(status, 200);
    assert.equal(body.apiVersion, 'admission.k8s.io/v1');
    assert.equal(body.kind, 'AdmissionReview');
    assert.deepEqual(body.response, { uid: 'abc-123', allowed: true });
  });

  it('denies in v1beta1 with 403 and the rule name, answering in v1beta1', async () => {
    const s = server(denyPrivileged());
    const { status, body } = await post(s, podReview({ uid: 'b1', apiVersion: 'admission.k8s.io/v1beta1', privileged: true }));
    assert.equal(status, 200);
    assert.equal(body.apiVersion, 'admission.k8s.io/v1beta1');
    assert.equal(body.response.uid, 'b1');
    assert.equal(body.response.allowed, false);
    assert.equal(body.response.status?.code, 403);
    assert.match(body.response.status?.message ?? '', /disallow-privileged-containers/);
  });

  it('allows with warnings, each under 120 characters', async () => {
    // Two Warn rules every Pod violates, one with a message far over the bound.
    const rules = new RuleSet();
    const everyPod = { required: ['never-present'] };
    rules.upsert(clusterRule('disallow-privilege-escalation', { enforcement: 'Warn', validate: { message: 'set allowPrivilegeEscalation: false', schema: everyPod } }));
    rules.upsert(clusterRule('restrict-seccomp-strict', { enforcement: 'Warn', validate: { message: 'x'.repeat(300), schema: everyPod } }));
    const s = server(rules);
    const { body } = await post(s, podReview());
    assert.equal(body.response.allowed, true);
    assert.equal(body.response.warnings?.length, 2);
    assert.match(body.response.warnings?.[0] ?? '', /^disallow-privilege-escalation: set allowPrivilegeEscalation: false/);
    for (const w of body.response.warnings ?? []) assert.ok(w.length < 120, w);
  });

  it('evaluates dry-run requests like any other', async () => {
    const s = server(denyPrivileged());
    const { body } = await post(s, podReview({ dryRun: true, privileged: true }));
    assert.equal(body.response.allowed, false);
    assert.equal(s.calls, 1);
  });

  it('allows exempt namespaces, exempt Namespace objects and exempt kinds without evaluating', async () => {
    // A rule every Pod fails: an exempt Pod allowed was not evaluated.
    const s = server(denyEveryPod());
    for (const ns of ['kube-system', 'kube-public', 'kube-node-lease', 'portal-system']) {
      const { body } = await post(s, podReview({ namespace: ns, privileged: true }));
      assert.equal(body.response.allowed, true, ns);
    }
    const nsReview = podReview();
    Object.assign(nsReview.request as object, { kind: { group: '', version: 'v1', kind: 'Namespace' }, name: 'kube-system', namespace: '' });
    assert.equal((await post(s, nsReview)).body.response.allowed, true);
    const lease = podReview();
    Object.assign(lease.request as object, { kind: { group: 'coordination.k8s.io', version: 'v1', kind: 'Lease' } });
    assert.equal((await post(s, lease)).body.response.allowed, true);
    assert.equal((await post(s, podReview({ namespace: 'default' }))).body.response.allowed, false, 'the rule denies where it is evaluated');
  });

  it('denies with "not ready" until the rule source is synced', async () => {
    const s = server(allowAll());
    let loaded = false;
    s.gate.addCheck('rules', () => loaded || 'rules not loaded yet');
    const { body } = await post(s, podReview({ uid: 'nr' }));
    assert.equal(body.response.uid, 'nr');
    assert.equal(body.response.allowed, false);
    assert.match(body.response.status?.message ?? '', /not ready.*rules not loaded yet/);
    assert.equal(s.calls, 0);
    loaded = true;
    assert.equal((await post(s, podReview())).body.response.allowed, true);
  });

  it('turns a failed evaluation (a worker lost, a closed pool) into a 500 denial, never an allow', async () => {
    const failures: (TestServerExtra | 'closed')[] = [{ through: () => Promise.reject(new Error('async boom')) }, { through: async () => Promise.reject(new Error('worker lost')) }, 'closed'];
    for (const f of failures) {
      const s = server(allowAll(), f === 'closed' ? {} : f);
      if (f === 'closed') await s.pool.close();
      const { status, body } = await post(s, podReview({ uid: 'ie' }));
      assert.equal(status, 200);
      assert.equal(body.response.uid, 'ie');
      assert.equal(body.response.allowed, false);
      assert.equal(body.response.status?.code, 500);
      assert.match(body.response.status?.message ?? '', /^internal error evaluating Pod default\/web/);
    }
  });
});

describe('POST /validate bad input', () => {
  let s: ReturnType<typeof makeServer>;
  before(() => {
    s = makeServer(pki, allowAll());
  });
  after(() => s.app.close());

  const cases: [string, unknown, number, RegExp, string?][] = [
    ['malformed JSON', '{"apiVersion": ', 400, /malformed JSON/],
    ['empty body', '', 400, /empty body/],
    ['a JSON array', '[]', 400, /JSON object/],
    ['missing request', { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }, 400, /no "request"/],
    ['missing uid', { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { kind: { kind: 'Pod' }, operation: 'CREATE' } }, 400, /uid/],
    ['unknown apiVersion (uid echoed)', { ...podReview({ uid: 'u-v2' }), apiVersion: 'admission.k8s.io/v2' }, 400, /unsupported apiVersion/, 'u-v2'],
    ['wrong kind (uid echoed)', { ...podReview({ uid: 'u-k' }), kind: 'TokenReview' }, 400, /unsupported kind/, 'u-k'],
    ['bad operation (uid echoed)', podReview({ uid: 'u-op', operation: 'PATCH' }), 400, /operation/, 'u-op'],
  ];
  for (const [name, payload, code, re, uid] of cases) {
    it(`rejects ${name} with ${code}`, async () => {
      const { status, body } = await post(s, payload);
      assert.equal(status, code);
      assert.equal(body.response.allowed, false);
      assert.match(body.response.status?.message ?? '', re);
      if (uid) assert.equal(body.response.uid, uid);
    });
  }

  it('issue 16: a review nested past the depth bound is a 400 naming the bound, never decided, never an internal error', async () => {
    const deep = podReview({ uid: 'deep' });
    let v: unknown = 1;
    for (let i = 0; i < MAX_JSON_DEPTH + 10; i++) v = { a: v };
    (deep.request as { object: { spec: Record<string, unknown> } }).object.spec.x = v;
    const invalid = async () => Number(/portal_admission_requests_total\{operation="",kind="",decision="invalid"\} (\d+)/.exec(await s.registry.metrics())?.[1] ?? 0);
    const invalidBefore = await invalid();
    const before = s.gate.errorRatio();
    const { status, body } = await post(s, deep);
    assert.equal(status, 400);
    assert.equal(body.response.allowed, false);
    assert.equal(body.response.status?.code, 400);
    assert.match(body.response.status?.message ?? '', /nests objects and arrays more than 1000 levels deep \(at character \d+\)/);
    assert.equal(await invalid(), invalidBefore + 1, 'answered as invalid, never decided');
    assert.deepEqual(s.gate.errorRatio(), before, 'nothing recorded against readiness');
    // The same review at the bound is decided as usual.
    let ok: unknown = 1;
    for (let i = 0; i < MAX_JSON_DEPTH - 10; i++) ok = { a: ok };
    (deep.request as { object: { spec: Record<string, unknown> } }).object.spec.x = ok;
    assert.equal((await post(s, deep)).body.response.allowed, true);
  });

  it('issue 16: the kind label holds only kinds the rules name; any other is `other`', async () => {
    for (const kind of ['Zz1', 'Zz2', 'x'.repeat(10_000)]) {
      const r = podReview({ uid: `k-${kind.length}` });
      (r.request as { kind: { kind: string } }).kind.kind = kind;
      assert.equal((await post(s, r)).body.response.allowed, true);
    }
    const text = await s.registry.metrics();
    assert.match(text, /portal_admission_requests_total\{operation="CREATE",kind="other",decision="allow"\} 3/);
    assert.doesNotMatch(text, /Zz1|xxxx/);
  });

  it('answers other methods on /validate with 405 and Allow: POST', async () => {
    for (const method of ['GET', 'PUT', 'DELETE'] as const) {
      const res = await s.app.inject({ method, url: '/validate' });
      assert.equal(res.statusCode, 405, method);
      assert.equal(res.headers['allow'], 'POST');
    }
  });

  it('rejects a wrong or missing content type with 415', async () => {
    for (const headers of [{ 'content-type': 'text/plain' }, { 'content-type': 'application/yaml' }, {}]) {
      const res = await s.app.inject({ method: 'POST', url: '/validate', headers, payload: JSON.stringify(podReview()) });
      assert.equal(res.statusCode, 415, JSON.stringify(headers));
      assert.match(res.json<{ message: string }>().message, /application\/json/);
    }
  });

  it('rejects a body over the ~8 MiB limit with 413 and keeps serving', async () => {
    const big = podReview();
    (big.request as { object: { data: string } }).object.data = 'x'.repeat(ADMISSION_BODY_LIMIT);
    const res = await s.app.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(big) });
    assert.equal(res.statusCode, 413);
    assert.match(res.json<{ message: string }>().message, /larger than the limit/);
    // A 6 MiB UPDATE (object + oldObject of 3 MiB) is within the limit.
    const update = podReview({ operation: 'UPDATE' });
    const r = update.request as { object: Record<string, unknown>; oldObject: Record<string, unknown> };
    r.object.data = 'y'.repeat(3 * 1024 * 1024 - 1024);
    r.oldObject = { ...r.object };
    assert.equal((await post(s, update)).body.response.allowed, true);
  });

  it('counts invalid requests in the metrics', async () => {
    const text = await s.registry.metrics();
    assert.match(text, /portal_admission_requests_total\{operation="",kind="",decision="invalid"\} [1-9]/);
    assert.match(text, /portal_admission_errors_total\{reason="invalid_input"\} [1-9]/);
    assert.match(text, /portal_admission_requests_total\{operation="UPDATE",kind="Pod",decision="allow"\} 1/);
  });
});
