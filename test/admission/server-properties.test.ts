/**
 * Property tests: random and malformed reviews never crash the server, never
 * get an answer without the request's uid, and never get an allow when the
 * engine fails.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { allowAll, makePki, makeServer, podReview, type TestServer } from './helpers.ts';

type Reply = { statusCode: number; body: string };

describe('admission server properties', () => {
  let failing: TestServer;
  let flaky: TestServer;
  let flakyThrows = false;

  before(async () => {
    const pki = await makePki();
    // The engine fails as the pool does: the review is rejected (a worker lost), every time or now and then.
    failing = makeServer(pki, allowAll(), { through: () => Promise.reject(new Error('engine failure')) });
    flaky = makeServer(pki, allowAll(), { through: (body, review) => (flakyThrows ? Promise.reject(new Error('intermittent failure')) : review(body)) });
  });
  after(async () => {
    await Promise.all([failing.app.close(), flaky.app.close()]);
  });

  const post = (s: TestServer, payload: string, contentType = 'application/json'): Promise<Reply> =>
    s.app.inject({ method: 'POST', url: '/validate', headers: { 'content-type': contentType }, payload }).then((r) => ({ statusCode: r.statusCode, body: r.body }));

  const uidOf = (body: unknown): string | undefined => {
    const req = (body as { request?: { uid?: unknown } } | null)?.request;
    return typeof req === 'object' && req !== null && typeof req.uid === 'string' && req.uid !== '' ? req.uid : undefined;
  };

  // Reviews that are structurally close to real ones, with every field free to be wrong.
  const reviewArb = fc.record(
    {
      apiVersion: fc.oneof(fc.constantFrom('admission.k8s.io/v1', 'admission.k8s.io/v1beta1'), fc.string()),
      kind: fc.oneof(fc.constant('AdmissionReview'), fc.string()),
      request: fc.oneof(
        fc.record(
          {
            uid: fc.oneof(fc.uuid(), fc.string(), fc.integer()),
            kind: fc.oneof(fc.record({ group: fc.constantFrom('', 'apps', 'portal.dev'), version: fc.constant('v1'), kind: fc.constantFrom('Pod', 'Deployment', 'Namespace', 'Lease') }), fc.anything()),
            operation: fc.oneof(fc.constantFrom('CREATE', 'UPDATE', 'DELETE', 'CONNECT'), fc.string()),
            namespace: fc.oneof(fc.constantFrom('', 'default', 'kube-system', 'team-a'), fc.anything()),
            name: fc.oneof(fc.string(), fc.anything()),
            object: fc.oneof(fc.constant(null), fc.object(), fc.anything()),
            oldObject: fc.oneof(fc.constant(null), fc.object()),
            dryRun: fc.oneof(fc.boolean(), fc.anything()),
          },
          { requiredKeys: [] },
        ),
        fc.anything(),
      ),
    },
    { requiredKeys: [] },
  );

  it('answers every near-review with its uid and never allows when the engine throws', async () => {
    await fc.assert(
      fc.asyncProperty(reviewArb, async (review) => {
        const reply = await post(failing, JSON.stringify(review));
        assert.ok([200, 400].includes(reply.statusCode), `status ${reply.statusCode}`);
        const body = JSON.parse(reply.body) as { response: { uid: string; allowed: boolean; status?: { code: number } } };
        const uid = uidOf(review);
        if (uid !== undefined) assert.equal(body.response.uid, uid);
        if (reply.statusCode !== 200) assert.equal(body.response.allowed, false);
        else if (body.response.allowed) {
          // Only exemptions are allowed without the (failing) engine.
          const r = review.request as { namespace?: unknown; kind?: { group?: string; kind?: string } };
          const exemptNs = r.namespace === 'kube-system';
          const exemptKind = r.kind?.kind === 'Lease' || r.kind?.group === 'portal.dev' || r.kind?.kind === 'Namespace';
          assert.ok(exemptNs || exemptKind, `allowed without evaluation: ${reply.body}`);
        } else assert.equal(body.response.status?.code, 500, reply.body);
      }),
      { numRuns: 300 },
    );
  });

  it('survives arbitrary bytes and content types, and keeps answering', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.string(), fc.json(), fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b).toString('latin1'))),
        fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/octet-stream'),
        async (payload, contentType) => {
          const reply = await post(failing, payload, contentType);
          assert.ok([200, 400, 415].includes(reply.statusCode), `status ${reply.statusCode} for ${JSON.stringify(payload)}`);
          const parsed = JSON.parse(reply.body) as { response?: { allowed: boolean; uid: string } };
          if (parsed.response) assert.equal(parsed.response.allowed, false);
          let asJson: unknown;
          try {
            asJson = JSON.parse(payload);
          } catch {
            asJson = undefined;
          }
          const uid = contentType.startsWith('application/json') ? uidOf(asJson) : undefined;
          if (uid !== undefined) assert.equal(parsed.response?.uid, uid);
        },
      ),
      { numRuns: 300 },
    );
    const ok = await post(failing, JSON.stringify(podReview({ uid: 'still-alive' })));
    assert.equal(JSON.parse(ok.body).response.uid, 'still-alive');
  });

  it('never allows a request whose evaluation failed, whatever the interleaving', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.boolean(), fc.uuid()), { minLength: 1, maxLength: 30 }), async (steps) => {
        for (const [throws, uid] of steps) {
          flakyThrows = throws;
          const reply = JSON.parse((await post(flaky, JSON.stringify(podReview({ uid })))).body) as { response: { uid: string; allowed: boolean; status?: { code: number } } };
          assert.equal(reply.response.uid, uid);
          assert.equal(reply.response.allowed, !throws);
          if (throws) assert.equal(reply.response.status?.code, 500);
        }
      }),
      { numRuns: 50 },
    );
  });
});
