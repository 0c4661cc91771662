// Issue 9, item 5: a throw after the decision (between deciding and sending)
// used to reach the error handler, which answered a bare Status without the
// request's uid; the API server rejects such an answer. Failures are injected
// through the server's real seams (the evaluation pool's answer, the metrics
// sink, the encoder the worker runs), never by editing code.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { decidedOutcome, readReview, serialize, type Decision } from '../../src/policy/review/answer.ts';
import { allowAll, makePki, makeServer, podReview, type TestPki } from './helpers.ts';

let pki: TestPki;
before(async () => {
  pki = await makePki();
});

interface Answer {
  status: number;
  body: { apiVersion?: string; kind?: string; response?: { uid: string; allowed: boolean; status?: { code: number; message: string } } };
}

describe('every answer carries the uid, even when something fails after the decision', () => {
  const servers: ReturnType<typeof makeServer>[] = [];
  after(async () => {
    await Promise.all(servers.map((s) => s.app.close()));
  });
  async function post(s: ReturnType<typeof makeServer>, uid: string, apiVersion = 'admission.k8s.io/v1'): Promise<Answer> {
    const res = await s.app.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(podReview({ uid, apiVersion })) });
    return { status: res.statusCode, body: res.json() as Answer['body'] };
  }
  function assertDeniedWithUid(a: Answer, uid: string, apiVersion = 'admission.k8s.io/v1'): void {
    assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.equal(a.body.kind, 'AdmissionReview');
    assert.equal(a.body.apiVersion, apiVersion);
    assert.equal(a.body.response?.uid, uid);
    assert.equal(a.body.response?.allowed, false);
    assert.equal(a.body.response?.status?.code, 500);
  }

  it('a review the evaluation pool cannot answer (its worker lost)', async () => {
    const s = makeServer(pki, allowAll(), { through: () => Promise.reject(new Error('worker lost')) });
    servers.push(s);
    const a = await post(s, 'uid-warn');
    assertDeniedWithUid(a, 'uid-warn');
    assert.match(a.body.response?.status?.message ?? '', /internal error evaluating Pod default\/web/);
  });

  it('a review the pool cannot answer either, answered in v1beta1', async () => {
    const s = makeServer(pki, allowAll(), { through: async () => Promise.reject(new Error('worker lost')) });
    servers.push(s);
    assertDeniedWithUid(await post(s, 'uid-async', 'admission.k8s.io/v1beta1'), 'uid-async', 'admission.k8s.io/v1beta1');
  });

  it('a metrics sink that throws while the answer is recorded', async () => {
    const s = makeServer(pki, allowAll(), {
      metrics: (m) => ({
        ...m,
        answered() {
          throw new Error('metrics sink broken');
        },
      }),
    });
    servers.push(s);
    const a = await post(s, 'uid-metrics');
    assertDeniedWithUid(a, 'uid-metrics');
    assert.match(a.body.response?.status?.message ?? '', /metrics sink broken/);
  });

  it('a throw that escapes the route (the in-flight gauge) reaches the error handler, which still echoes the uid', async () => {
    const s = makeServer(pki, allowAll(), {
      metrics: (m) => ({
        ...m,
        inFlight: Object.assign(Object.create(m.inFlight) as typeof m.inFlight, {
          inc() {
            throw new Error('gauge broken');
          },
        }),
      }),
    });
    servers.push(s);
    assertDeniedWithUid(await post(s, 'uid-route', 'admission.k8s.io/v1beta1'), 'uid-route', 'admission.k8s.io/v1beta1');
  });

  it('a denial message that cannot be encoded (by the worker, which sends the text)', () => {
    const read = readReview(JSON.stringify(podReview({ uid: 'uid-encode' })));
    assert.ok(read.ok);
    const bad = { allowed: false, code: 403, message: 10n, warnings: [] } as unknown as Decision;
    const { payload, encodeError } = serialize(decidedOutcome(read.apiVersion, read.request, bad));
    assert.ok(encodeError !== undefined, 'the encode error is reported, to be logged');
    const a: Answer = { status: 200, body: JSON.parse(payload) as Answer['body'] };
    assertDeniedWithUid(a, 'uid-encode');
    assert.match(a.body.response?.status?.message ?? '', /internal error encoding the answer/);
  });
});
