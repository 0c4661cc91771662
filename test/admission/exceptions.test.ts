// PortalExceptions at admission (issue 18): the real evaluation pool with a
// RuleSet holding a rule and an exception, over real HTTPS (the fast path)
// and through fastify's route: the exempted rule neither denies nor warns,
// the answer carries the audit annotation `portal.dev/exception`, and
// portal_exceptions_applied_total counts the (exception, rule) pair.
import assert from 'node:assert/strict';
import { request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { RuleSet } from '../../src/policy/index.ts';
import { clusterRule, exception } from '../policy/support.ts';
import { makePki, makeServer, podReview, type TestPki } from './helpers.ts';

let pki: TestPki;
before(async () => {
  pki = await makePki();
});

function post(port: number, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, servername: 'localhost', ca: pki.ca.cert, method: 'POST', path: '/validate', headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

void describe('PortalExceptions at admission', () => {
  const rules = new RuleSet({ exceptionNamespaces: ['portal-system'] });
  rules.upsert(clusterRule('disallow-privileged-containers'));
  rules.upsert(clusterRule('warn-privileged', { enforcement: 'Warn' }));
  let s: ReturnType<typeof makeServer>;
  let port = 0;
  before(async () => {
    s = makeServer(pki, rules);
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    port = (s.app.server.address() as AddressInfo).port;
  });
  after(() => s.app.close());

  void it('exempts in its namespace only, with the audit annotation, over HTTPS and through fastify alike', async () => {
    const review = (namespace: string) => JSON.stringify(podReview({ uid: `u-${namespace}`, namespace, privileged: true }));
    let r = JSON.parse((await post(port, review('monitoring'))).body) as { response: { allowed: boolean; warnings?: string[]; auditAnnotations?: Record<string, string> } };
    assert.equal(r.response.allowed, false, 'denied before any exception');

    rules.upsertException(exception('monitoring', 'agent', { rules: ['disallow-privileged-containers', 'warn-privileged'] }));
    rules.upsertException(exception('team-b', 'other', { rules: ['disallow-privileged-containers'] }));
    const wire = await post(port, review('monitoring'));
    r = JSON.parse(wire.body);
    assert.deepEqual(r.response, { uid: 'u-monitoring', allowed: true, auditAnnotations: { 'portal.dev/exception': 'monitoring/agent' } });
    const injected = await s.app.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: review('monitoring') });
    assert.equal(injected.body, wire.body, 'the fast path and fastify give the same bytes');

    // Another namespace: team-b's exception does not reach it, monitoring's neither.
    r = JSON.parse((await post(port, review('default'))).body);
    assert.equal(r.response.allowed, false);
    assert.equal(r.response.auditAnnotations, undefined);

    const metrics = await s.registry.metrics();
    assert.match(metrics, /portal_exceptions_applied_total\{exception="monitoring\/agent",rule="disallow-privileged-containers"\} 2/);
    assert.match(metrics, /portal_exceptions_applied_total\{exception="monitoring\/agent",rule="warn-privileged"\} 2/);
  });

  void it('several exceptions are comma-joined; a denial by another rule still carries the annotation', async () => {
    rules.upsertException(exception('ops', 'a', { rules: ['disallow-privileged-containers'] }));
    const body = JSON.stringify(podReview({ uid: 'u2', namespace: 'ops', privileged: true }));
    let r = JSON.parse((await post(port, body)).body) as { response: { allowed: boolean; warnings?: string[]; auditAnnotations?: Record<string, string> } };
    assert.equal(r.response.allowed, true);
    assert.equal(r.response.warnings?.length, 1, 'warn-privileged is not exempted here');
    assert.deepEqual(r.response.auditAnnotations, { 'portal.dev/exception': 'ops/a' });
    rules.upsertException(exception('ops', 'b', { rules: ['warn-privileged'] }));
    r = JSON.parse((await post(port, body)).body);
    assert.deepEqual(r.response, { uid: 'u2', allowed: true, auditAnnotations: { 'portal.dev/exception': 'ops/a,ops/b' } });
    rules.removeException('PortalException/ops/a');
    r = JSON.parse((await post(port, body)).body);
    assert.equal(r.response.allowed, false);
    assert.deepEqual(r.response.auditAnnotations, { 'portal.dev/exception': 'ops/b' });
  });
});
