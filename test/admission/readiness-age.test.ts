// Issue 16, item 3: a replica that internal errors took out of its Service
// used to stay unready forever: with no traffic, nothing pushed the errors
// out of the window. Now they age out (--readiness-error-max-age).
//
// Real listening servers (the admission server over HTTPS, the probes server
// over HTTP) and the real clock, with a short age. The internal errors come
// from a decider that throws, standing for a bug in Portal itself: since
// issue 16 no client input produces one (deep input is a 400, a rule that
// fails on its input is an `error` verdict), so there is no way to cause
// them from outside a real process. Every wait is on the /readyz flip.
import assert from 'node:assert/strict';
import { request } from 'node:https';
import { after, before, test } from 'node:test';
import { HealthChecks, buildProbesServer } from '../../src/admission/probes.ts';
import { ReadinessGate } from '../../src/admission/readiness.ts';
import { DebugVars } from '../../src/observability/debug-vars.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { until } from '../support/until.ts';
import { allowAll, makePki, makeServer, podReview, type TestPki, type TestServer } from './helpers.ts';

let pki: TestPki;
let admission: TestServer;
let probes: ReturnType<typeof buildProbesServer>;
let webhookPort = 0;
let probesUrl = '';
let broken = true;

before(async () => {
  pki = await makePki();
  // Long enough that a burst of 25 concurrent requests is recorded within it
  // even on a loaded machine, short enough to wait for.
  const gate = new ReadinessGate({ maxAgeMs: 8_000 });
  // While `broken`, the pool fails every review (as a bug in Portal would); then it answers them.
  admission = makeServer(pki, allowAll(), { gate, through: (body, review) => (broken ? Promise.reject(new Error('a bug in Portal')) : review(body)) });
  probes = buildProbesServer({ registry: admission.registry, gate, liveness: new HealthChecks(), debugVars: new DebugVars(), logger: silentLogger() });
  await admission.app.listen({ port: 0, host: '127.0.0.1' });
  webhookPort = (admission.app.server.address() as { port: number }).port;
  probesUrl = await probes.listen({ port: 0, host: '127.0.0.1' });
});
after(() => Promise.all([admission.app.close(), probes.close()]));

function review(uid: string): Promise<{ allowed: boolean; status?: { code: number } }> {
  const body = JSON.stringify(podReview({ uid }));
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port: webhookPort, path: '/validate', method: 'POST', ca: pki.ca.cert, servername: 'localhost', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve((JSON.parse(text) as { response: { allowed: boolean; status?: { code: number } } }).response));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function readyz(): Promise<{ status: number; text: string }> {
  const res = await fetch(`${probesUrl}/readyz`);
  return { status: res.status, text: await res.text() };
}

test('internal errors take /readyz to 503; with no traffic it reads 200 again once they age out; a replica still broken goes out again', { timeout: 60_000 }, async () => {
  assert.equal((await readyz()).status, 200);
  for (const r of await Promise.all(Array.from({ length: 25 }, (_, i) => review(`bug-${i}`)))) {
    assert.equal(r.allowed, false, 'an internal error is a denial');
    assert.equal(r.status?.code, 500);
  }
  const out = await readyz();
  assert.equal(out.status, 503);
  assert.match(out.text, /internal errors: 25 of the last 25 admission requests within 8s/);

  // No request from here on: the flip back is the errors ageing out.
  const back = await until('/readyz to read 200 with no traffic', 30_000, async () => {
    const r = await readyz();
    return r.status === 200 ? r : undefined;
  });
  assert.equal(back.text, 'ok\n');

  // Still broken: the next minimum sample (20) takes it out again.
  for (const r of await Promise.all(Array.from({ length: 20 }, (_, i) => review(`again-${i}`)))) assert.equal(r.status?.code, 500);
  assert.equal((await readyz()).status, 503);

  // Fixed: once the errors age out it is ready, and stays so under traffic.
  broken = false;
  await until('/readyz to read 200 after the fix', 30_000, async () => (await readyz()).status === 200);
  for (let i = 0; i < 25; i++) assert.equal((await review(`ok-${i}`)).allowed, true);
  assert.equal((await readyz()).status, 200);
});
