import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { PROMTOOL, requireTool } from '../support/external-tool.ts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { HealthChecks, buildProbesServer } from '../../src/admission/probes.ts';
import { ReadinessGate } from '../../src/admission/readiness.ts';
import { DebugVars } from '../../src/observability/debug-vars.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { allowAll, makePki, makeServer, podReview, type TestServer } from './helpers.ts';

describe('ReadinessGate', () => {
  it('is not ready until every source check passes', () => {
    const g = new ReadinessGate();
    let synced = false;
    g.addCheck('informers', () => synced || 'namespaces not synced');
    assert.deepEqual(g.status(), { ready: false, reasons: ['informers: namespaces not synced'] });
    synced = true;
    assert.deepEqual(g.status(), { ready: true, reasons: [] });
  });

  it('ignores errors below the minimum sample, trips above 50% of the last 100, and recovers', () => {
    const g = new ReadinessGate({ window: 100, minSample: 20 });
    for (let i = 0; i < 19; i++) g.record(true);
    assert.equal(g.status().ready, true, '19 errors are below the minimum sample');
    g.record(true);
    assert.equal(g.status().ready, false);
    assert.match(g.status().reasons[0] ?? '', /20 of the last 20/);
    assert.equal(g.synced(), true, 'the error ratio never makes /validate say "not ready"');
    for (let i = 0; i < 80; i++) g.record(false); // 20 errors in 100
    assert.equal(g.status().ready, true);
    for (let i = 0; i < 51; i++) g.record(true); // window now: 29 ok, 71 errors
    assert.equal(g.status().ready, false);
    for (let i = 0; i < 50; i++) g.record(false); // 50 errors of 100: not more than half
    assert.equal(g.status().ready, true);
  });

  it('issue 16: errors age out, so a replica that gets no traffic while unready is ready again within maxAgeMs', () => {
    let now = 0;
    const g = new ReadinessGate({ window: 100, minSample: 20, maxAgeMs: 60_000, now: () => now });
    for (let i = 0; i < 100; i++) {
      now += 10;
      g.record(true);
    }
    assert.equal(g.status().ready, false);
    assert.match(g.status().reasons[0] ?? '', /100 of the last 100 admission requests within 1m \(more than 50%\)/);
    // No traffic: the oldest errors leave the window first.
    now = 60_000 + 505; // the first 50 (recorded at 10 … 500 ms) are older than 60 s
    assert.deepEqual(g.errorRatio(), { errors: 50, sample: 50 });
    assert.equal(g.status().ready, false);
    now = 1000 + 60_000; // all of them
    assert.deepEqual(g.errorRatio(), { errors: 0, sample: 0 });
    assert.equal(g.status().ready, true);
    // Still broken: the next minSample requests take it out again.
    for (let i = 0; i < 20; i++) g.record(true);
    assert.equal(g.status().ready, false);
    // Recent successes are kept while old errors age out.
    now += 30_000;
    for (let i = 0; i < 30; i++) g.record(false);
    assert.equal(g.status().ready, true, '20 errors of 50');
    now += 30_001;
    assert.deepEqual(g.errorRatio(), { errors: 0, sample: 30 });
  });
});

describe('probes server', () => {
  let admission: TestServer;
  let probes: ReturnType<typeof buildProbesServer>;
  const liveness = new HealthChecks();
  const debugVars = new DebugVars();
  let tmp: string;

  before(async () => {
    admission = makeServer(await makePki(), allowAll(), { through: () => Promise.reject(new Error('engine exploded')) });
    probes = buildProbesServer({ registry: admission.registry, gate: admission.gate, liveness, debugVars, logger: silentLogger() });
    tmp = mkdtempSync(join(tmpdir(), 'portal-probes-'));
  });
  after(async () => {
    await Promise.all([admission.app.close(), probes.close()]);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('/healthz and /livez run the pluggable checks', async () => {
    assert.equal((await probes.inject('/healthz')).statusCode, 200);
    let leaderOk: true | string = true;
    const remove = liveness.add('leader-election', () => leaderOk);
    leaderOk = 'renewals overdue by 20s';
    const res = await probes.inject('/livez');
    assert.equal(res.statusCode, 500);
    assert.match(res.body, /\[-\]leader-election failed: renewals overdue by 20s/);
    remove();
    assert.equal((await probes.inject('/livez')).statusCode, 200);
  });

  it('/readyz goes 503 when more than half of the last requests were internal errors, and says why', async () => {
    assert.equal((await probes.inject('/readyz')).statusCode, 200);
    for (let i = 0; i < 25; i++) {
      const r = await admission.app.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(podReview({ uid: `u${i}` })) });
      assert.equal(r.json<{ response: { allowed: boolean } }>().response.allowed, false);
    }
    const res = await probes.inject('/readyz');
    assert.equal(res.statusCode, 503);
    assert.match(res.body, /internal errors: 25 of the last 25/);
  });

  it('/metrics exposes the admission metrics and passes promtool check metrics', async () => {
    const res = await probes.inject('/metrics');
    assert.equal(res.statusCode, 200);
    assert.match(res.headers['content-type'] as string, /text\/plain/);
    for (const name of ['portal_admission_requests_total', 'portal_admission_request_duration_seconds_bucket', 'portal_admission_errors_total', 'portal_admission_in_flight', 'portal_rules_loaded']) {
      assert.ok(res.body.includes(name), name);
    }
    assert.match(res.body, /portal_admission_requests_total\{operation="CREATE",kind="Pod",decision="error"\} 25/);
    assert.match(res.body, /portal_admission_errors_total\{reason="internal"\} 25/);
    const promtool = requireTool(PROMTOOL);
    const file = join(tmp, 'metrics.txt');
    writeFileSync(file, res.body);
    // promtool exits non-zero on format errors and prints lint problems.
    const out = execFileSync('sh', ['-c', `'${promtool}' check metrics < ${file} 2>&1`], { encoding: 'utf8' });
    assert.equal(out.trim(), '');
  });

  it('/debug/vars renders pluggable sections as JSON', async () => {
    debugVars.register('leader_election', () => ({ leader: 'portal-0', epoch: 3 }));
    debugVars.register('broken', () => {
      throw new Error('nope');
    });
    const res = await probes.inject('/debug/vars');
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { leader_election: { leader: 'portal-0', epoch: 3 }, broken: { error: 'nope' } });
  });

  it('issue 31: a request with a body (here a slow POST /metrics) is answered 413 at once, unread, and its connection closed; GETs are served', async () => {
    await probes.listen({ port: 0, host: '127.0.0.1' });
    const port = (probes.server.address() as { port: number }).port;
    const sock = connect({ host: '127.0.0.1', port });
    sock.on('error', () => {});
    const text = await new Promise<string>((resolve) => {
      let got = '';
      sock.on('data', (d: Buffer) => (got += d.toString()));
      sock.once('close', () => resolve(got));
      sock.write('POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{');
    });
    assert.match(text, /^HTTP\/1\.1 413 /);
    assert.match(text, /POST \/metrics: the probes port takes no request body/);
    const chunked = await fetch(`http://127.0.0.1:${port}/readyz`, { method: 'POST', body: new ReadableStream({ start: (c) => c.enqueue(new Uint8Array([1])) }), duplex: 'half' } as RequestInit);
    assert.equal(chunked.status, 413, 'a chunked body too');
    assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
  });
});
