// Issue 31, item 3: what slow or greedy clients can hold on the webhook
// port, against a real listening server with raw TLS sockets from distinct
// loopback addresses (distinct peers). Bounds are shortened through the
// server's `limits` option so the tests take seconds; upper bounds on time
// are generous multiples, so a slow machine cannot fail them, while the
// old behaviour (held until the request timeout, or refused) always does.
import assert from 'node:assert/strict';
import type { TLSSocket } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import type { AnswerReview } from '../../src/admission/decision.ts';
import type { ConnectionLimits } from '../../src/admission/limits.ts';
import { until } from '../support/until.ts';
import { allowAll, makePki, makeServer, podReview, type TestPki } from './helpers.ts';
import { rawTls, untilClosed } from './sockets.ts';

let pki: TestPki;
before(async () => {
  pki = await makePki();
});

type Server = ReturnType<typeof makeServer>;
const servers: Server[] = [];
after(async () => {
  await Promise.all(servers.map((s) => s.app.close()));
});

type Through = (body: string, review: AnswerReview) => ReturnType<AnswerReview>;

/** A server answering through the real evaluation pool; `through` may hold a review on its way to it (as a busy worker would). */
async function listening(limits: Partial<ConnectionLimits>, through?: Through): Promise<{ s: Server; port: number }> {
  const s = makeServer(pki, allowAll(), through ? { limits, through } : { limits });
  servers.push(s);
  await s.app.listen({ port: 0, host: '127.0.0.1' });
  return { s, port: (s.app.server.address() as { port: number }).port };
}

const tls = (port: number, localAddress?: string): Promise<TLSSocket> => rawTls(pki, port, localAddress);

function head(length: number): string {
  return `POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
}

/** Sends a whole review with Connection: close; resolves with the answer text. */
async function review(port: number, namespace: string, localAddress = '127.0.0.1'): Promise<string> {
  const sock = await tls(port, localAddress);
  const closed = untilClosed(sock);
  const body = JSON.stringify(podReview({ uid: namespace, namespace }));
  sock.write(`${head(Buffer.byteLength(body)).replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n')}${body}`);
  return (await closed).text;
}

async function metric(s: Server, reason: string): Promise<number> {
  const text = await s.registry.metrics();
  return Number(new RegExp(`portal_webhook_connections_closed_total\\{reason="${reason}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
}

describe('a body trickled after its headers', { timeout: 60_000 }, () => {
  it('Content-Length: 100000 then a byte every 300 ms: 408 naming the floor once the grace passes, long before the request timeout', async () => {
    const { s, port } = await listening({ requestMs: 30_000, headersMs: 10_000, bodyGraceMs: 500, checkIntervalMs: 250 });
    const sock = await tls(port, '127.0.0.2');
    const closed = untilClosed(sock);
    const started = performance.now();
    sock.write(head(100_000));
    const drip = setInterval(() => !sock.destroyed && sock.write('{'), 300);
    const end = await closed;
    clearInterval(drip);
    const held = end.at - started;
    assert.match(end.text, /^HTTP\/1\.1 408 /);
    assert.match(end.text, /request body arrived slower than \d+ bytes\/s/);
    assert.ok(held >= 450, `not cut during the grace (${held.toFixed(0)} ms)`);
    assert.ok(held < 15_000, `held ${held.toFixed(0)} ms; the request timeout is 30 s`);
    assert.equal(await metric(s, 'slow_body'), 1);
  });

  it('a body that keeps up the floor is answered', async () => {
    const { port } = await listening({ bodyGraceMs: 200, checkIntervalMs: 100, minBodyBytesPerSecond: 100 });
    const sock = await tls(port);
    const closed = untilClosed(sock);
    const body = JSON.stringify(podReview({ uid: 'steady' }));
    sock.write(head(Buffer.byteLength(body)).replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n'));
    // ~500 bytes/s or more (a 50-byte piece at least every 100 ms), five times the floor, for over a second.
    for (let i = 0; i < body.length; i += 50) {
      sock.write(body.slice(i, i + 50));
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.match((await closed).text, /"uid":"steady","allowed":true/);
  });
});

describe('at the connection cap, the request furthest from complete is closed', { timeout: 60_000 }, () => {
  it('every connection holding an unfinished body: a new client is served, and the body with the least of its promise read is the one closed', async () => {
    const { s, port } = await listening({ maxConnections: 3, maxPerPeer: 3, bodyGraceMs: 60_000 });
    // Counted at the server's own 'request' event: a connection counted open may not have had its request read yet
    // (the new one could then close it as one that never carried a request).
    let requests = 0;
    s.app.server.prependListener('request', () => requests++);
    const holders = await Promise.all([tls(port, '127.0.0.2'), tls(port, '127.0.0.3'), tls(port, '127.0.0.4')]);
    const ends = holders.map((h) => untilClosed(h));
    // Each promises 10,000 bytes; they have sent 5,000, 10 and 2,000 of them.
    holders.forEach((h, i) => h.write(head(10_000) + 'x'.repeat([5_000, 10, 2_000][i] as number)));
    await until('three requests in flight', 10_000, () => requests === 3);
    assert.match(await review(port, 'newcomer', '127.0.0.5'), /"uid":"newcomer","allowed":true/);
    await ends[1];
    assert.equal(holders[0]?.destroyed, false);
    assert.equal(holders[2]?.destroyed, false);
    assert.equal(await metric(s, 'cap_unfinished_closed'), 1);
    assert.equal(await metric(s, 'cap_all_busy'), 0);
    holders.forEach((h) => h.destroy());
  });
});

describe('fair turns per remote address', { timeout: 60_000 }, () => {
  it('a peer over its turns waits behind itself; another peer\'s request goes next', async (t) => {
    const order: string[] = [];
    const held: (() => void)[] = [];
    let ended = false;
    const through: Through = (body, review) => {
      order.push((JSON.parse(body) as { request: { namespace: string } }).request.namespace);
      if (ended) return review(body);
      return new Promise((resolve) => held.push(() => resolve(review(body))));
    };
    // Whatever happens, no review stays held (the server could not close).
    t.after(() => {
      ended = true;
      held.splice(0).forEach((r) => r());
    });
    const { s, port } = await listening({ maxActive: 2, maxActivePerPeer: 2 }, through);
    // The flooding peer: four requests, two take the turns, two wait.
    const flood = ['flood-1', 'flood-2', 'flood-3', 'flood-4'].map((ns) => review(port, ns, '127.0.0.2'));
    await until('two flood requests being decided', 10_000, () => order.length === 2);
    // Another peer arrives after them, while every turn is taken.
    const other = review(port, 'other', '127.0.0.3');
    // Once it waits its turn (two flood requests and it), free one turn.
    await until('three requests waiting', 10_000, async () => (await s.registry.metrics()).includes('portal_webhook_requests_waiting 3'));
    assert.equal(order.length, 2, 'no third request decided while both turns are taken');
    held.shift()?.();
    await until('the next request to be decided', 10_000, () => order.length === 3);
    assert.equal(order[2], 'other', `turn order ${order.join(', ')}`);
    while (order.length < 5 || held.length > 0) {
      held.shift()?.();
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.match(await other, /"uid":"other","allowed":true/);
    for (const [i, f] of flood.entries()) assert.match(await f, new RegExp(`"uid":"flood-${i + 1}","allowed":true`));
  });
});
