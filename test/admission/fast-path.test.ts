// The admission fast path (src/admission/fast-path.ts, issue 9 item 7): over
// real HTTPS, POST /validate as kube-apiserver sends it is answered without
// fastify's request machinery (no fastify hook runs), with exactly the
// answer fastify's route gives for the same body; every other request still
// gets fastify's answers (404, 405, 413, 415, chunked bodies).
import assert from 'node:assert/strict';
import { request, Agent } from 'node:https';
import { after, before, describe, it } from 'node:test';
import type { AddressInfo } from 'node:net';
import type { RuleSet } from '../../src/policy/index.ts';
import { allowAll, denyPrivileged, makePki, makeServer, podReview, type TestPki, type TestServer } from './helpers.ts';

let pki: TestPki;
before(async () => {
  pki = await makePki();
});

interface Res { status: number; headers: Record<string, string | string[] | undefined>; body: string }

function call(port: number, opts: { method?: string; path?: string; headers?: Record<string, string>; body?: string; chunked?: boolean; agent?: Agent }): Promise<Res> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...(opts.headers ?? { 'content-type': 'application/json' }) };
    if (opts.body !== undefined && !opts.chunked) headers['content-length'] = String(Buffer.byteLength(opts.body));
    const req = request({ host: '127.0.0.1', port, servername: 'localhost', ca: pki.ca.cert, method: opts.method ?? 'POST', path: opts.path ?? '/validate', headers, agent: opts.agent ?? false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    if (opts.body !== undefined && opts.chunked) {
      req.write(opts.body.slice(0, 10));
      req.end(opts.body.slice(10));
    } else req.end(opts.body);
  });
}

async function listening(rules: RuleSet, extra: Parameters<typeof makeServer>[2] = {}): Promise<{ s: TestServer; port: number; fastifyRequests: () => number }> {
  const s = makeServer(pki, rules, extra);
  let n = 0;
  // Counts requests that went through fastify over the network (inject's
  // own requests, used below as the reference, carry light-my-request's agent).
  s.app.addHook('onRequest', (req, _reply, done) => {
    if (req.headers['user-agent'] !== 'lightMyRequest') n++;
    done();
  });
  await s.app.listen({ port: 0, host: '127.0.0.1' });
  return { s, port: (s.app.server.address() as AddressInfo).port, fastifyRequests: () => n };
}

/** What fastify's route answers for the same request (inject goes through fastify, never the fast path). */
async function viaFastify(s: TestServer, body: string): Promise<{ status: number; body: string }> {
  const r = await s.app.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: body });
  return { status: r.statusCode, body: r.body };
}

describe('admission fast path', () => {
  const servers: TestServer[] = [];
  after(async () => {
    await Promise.all(servers.map((s) => s.app.close()));
  });

  it('answers kube-apiserver\'s request shape without fastify, byte for byte as fastify\'s route does', async () => {
    // The pool fails the review of the Pod named boom (a worker lost); it decides the others.
    const { s, port, fastifyRequests } = await listening(denyPrivileged(), { through: (body, review) => (body.includes('"name":"boom"') ? Promise.reject(new Error('engine exploded')) : review(body)) });
    servers.push(s);
    const boom = podReview({ uid: 'u-boom' });
    (boom['request'] as { name: string }).name = 'boom';
    const bodies = [
      JSON.stringify(podReview({ uid: 'u-allow' })),
      JSON.stringify(podReview({ uid: 'u-deny', privileged: true })),
      JSON.stringify(podReview({ uid: 'u-beta', apiVersion: 'admission.k8s.io/v1beta1', privileged: true })),
      JSON.stringify(podReview({ uid: 'u-exempt', namespace: 'kube-system', privileged: true })),
      JSON.stringify(boom),
      '{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {',
      JSON.stringify({ apiVersion: 'admission.k8s.io/v2', kind: 'AdmissionReview', request: { uid: 'x' } }),
      '   ',
    ];
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (const body of bodies) {
        for (const path of ['/validate', '/validate?timeout=5s']) {
          const fast = await call(port, { body, path, agent });
          const slow = await viaFastify(s, body);
          assert.equal(fast.status, slow.status, `${path} ${body.slice(0, 60)}`);
          assert.deepEqual(JSON.parse(fast.body), JSON.parse(slow.body), `${path} ${body.slice(0, 60)}`);
          assert.equal(fast.headers['content-type'], 'application/json');
        }
      }
      // charset parameter: still the fast path.
      const withCharset = await call(port, { body: bodies[0]!, headers: { 'content-type': 'application/json; charset=utf-8' }, agent });
      assert.equal(JSON.parse(withCharset.body).response.allowed, true);
    } finally {
      agent.destroy();
    }
    assert.equal(fastifyRequests(), 0, 'no request went through fastify');
  });

  it('the engine\'s denial reaches the client with its uid; not ready denies', async () => {
    const { s, port } = await listening(denyPrivileged());
    servers.push(s);
    const denied = JSON.parse((await call(port, { body: JSON.stringify(podReview({ uid: 'd1', privileged: true })) })).body);
    assert.equal(denied.response.uid, 'd1');
    assert.equal(denied.response.allowed, false);
    assert.equal(denied.response.status.code, 403);
    s.gate.addCheck('rules', () => 'rules not loaded yet');
    const notReady = JSON.parse((await call(port, { body: JSON.stringify(podReview({ uid: 'n1' })) })).body);
    assert.equal(notReady.response.allowed, false);
    assert.match(notReady.response.status.message, /not ready/);
  });

  it('a throw escaping the answer function is a denial with the uid, as fastify\'s error handler gives', async () => {
    const { s, port, fastifyRequests } = await listening(allowAll(), {
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
    const body = JSON.stringify(podReview({ uid: 'u-escape', apiVersion: 'admission.k8s.io/v1beta1' }));
    const fast = await call(port, { body });
    const slow = await viaFastify(s, body);
    assert.equal(fast.status, 200);
    assert.equal(fast.status, slow.status);
    assert.deepEqual(JSON.parse(fast.body), JSON.parse(slow.body));
    const review = JSON.parse(fast.body) as { apiVersion: string; response: { uid: string; allowed: boolean; status: { code: number } } };
    assert.equal(review.apiVersion, 'admission.k8s.io/v1beta1');
    assert.equal(review.response.uid, 'u-escape');
    assert.equal(review.response.allowed, false);
    assert.equal(review.response.status.code, 500);
    // Without a review to echo, a plain 500 Status.
    const garbage = await call(port, { body: 'not json at all' });
    assert.equal(garbage.status, (await viaFastify(s, 'not json at all')).status);
    assert.equal(fastifyRequests(), 0);
  });

  it('every other request is fastify\'s: 404, 405, 413, 415, chunked bodies', async () => {
    const { s, port, fastifyRequests } = await listening(allowAll(), { bodyLimit: 4096 });
    servers.push(s);
    const body = JSON.stringify(podReview({ uid: 'c1' }));
    assert.equal((await call(port, { path: '/other', body })).status, 404);
    const get = await call(port, { method: 'GET' });
    assert.equal(get.status, 405);
    assert.equal(get.headers['allow'], 'POST');
    const tooBig = await call(port, { body: JSON.stringify({ ...podReview(), pad: 'x'.repeat(5000) }) });
    assert.equal(tooBig.status, 413);
    assert.equal((await call(port, { body, headers: { 'content-type': 'text/plain' } })).status, 415);
    const chunked = await call(port, { body, chunked: true });
    assert.equal(chunked.status, 200);
    assert.deepEqual(JSON.parse(chunked.body).response, { uid: 'c1', allowed: true });
    assert.equal(fastifyRequests(), 5);
  });
});
