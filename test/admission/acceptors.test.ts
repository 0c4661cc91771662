// Several sockets accept the webhook's connections (src/admission/acceptors.ts):
// libuv accepts one connection per listening socket per event-loop turn, so
// a queue of connections drains in as many turns as it is long. Counted in
// turns, not milliseconds: the kernel queues every connection while this
// process is blocked (the client runs synchronously), then each turn of the
// loop is counted until all are accepted.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { test } from 'node:test';
import { addAcceptors } from '../../src/admission/acceptors.ts';
import { queueConnections } from './sockets.ts';

const CONNECTIONS = 300;

/** Turns of the event loop until `n` connections were accepted. */
async function turnsToAccept(server: Server, accepted: () => number, n: number): Promise<number> {
  const port = (server.address() as AddressInfo).port;
  queueConnections(port, n);
  let turns = 0;
  while (accepted() < n) {
    turns++;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return turns;
}

async function serverWith(count: number): Promise<{ server: Server; accepted: () => number; sockets: Socket[] }> {
  const sockets: Socket[] = [];
  const server = createServer((s) => {
    sockets.push(s);
    s.on('error', () => {});
  });
  addAcceptors(server, { count });
  server.listen({ port: 0, host: '127.0.0.1' });
  await once(server, 'listening');
  await new Promise((resolve) => setImmediate(resolve)); // the extra sockets listen in the same turn
  return { server, accepted: () => sockets.length, sockets };
}

test('with 8 sockets a queue of connections is accepted in a fraction of the turns one socket takes; every connection reaches the server\'s own listener', async (t) => {
  const one = await serverWith(1);
  const eight = await serverWith(8);
  t.after(() => {
    for (const s of [one, eight]) {
      for (const sock of s.sockets) sock.destroy();
      s.server.close();
    }
  });
  const single = await turnsToAccept(one.server, one.accepted, CONNECTIONS);
  const several = await turnsToAccept(eight.server, eight.accepted, CONNECTIONS);
  t.diagnostic(`${CONNECTIONS} queued connections: accepted in ${single} turns by 1 socket, ${several} by 8`);
  assert.ok(single >= CONNECTIONS * 0.9, `one socket: about one connection a turn (${single} turns)`);
  // 8 sockets: the kernel spreads connections by their addresses, unevenly; the longest queue decides.
  assert.ok(several <= CONNECTIONS / 2, `8 sockets: ${several} turns`);
  assert.equal(eight.accepted(), CONNECTIONS);
});

test('the extra sockets close with the server: its port is free again', async () => {
  const { server } = await serverWith(4);
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await new Promise((resolve) => setImmediate(resolve));
  // Without SO_REUSEPORT, a listen succeeds only if no socket holds the port.
  const again = createServer();
  again.listen({ port, host: '127.0.0.1' });
  await once(again, 'listening');
  again.close();
});

test('closing the server calls back only when the connections every socket accepted have ended', async () => {
  const { server, sockets } = await serverWith(8);
  const port = (server.address() as AddressInfo).port;
  const { connect } = await import('node:net');
  const own = (): Promise<number> => new Promise((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
  // Keep only connections another socket accepted (the server's own count does not grow): Node's close waits for its own.
  const kept: ReturnType<typeof connect>[] = [];
  while (kept.length < 3) {
    const before = sockets.length;
    const c = connect(port, '127.0.0.1');
    while (sockets.length === before) await new Promise((resolve) => setImmediate(resolve));
    if ((await own()) === 0) kept.push(c);
    else {
      c.destroy();
      while ((await own()) > 0) await new Promise((resolve) => setImmediate(resolve));
    }
  }
  let closed = false;
  const done = new Promise<void>((resolve) => server.close(() => resolve()));
  void done.then(() => (closed = true));
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.equal(closed, false, 'called back while connections accepted by the other sockets were open');
  for (const c of kept) c.destroy();
  await done;
});

test('a server whose own socket is not in the SO_REUSEPORT group keeps serving on it and says why once', async (t) => {
  // listen(port, host) instead of listen(options): the server's socket binds without SO_REUSEPORT, so the extra ones cannot join it.
  const errors: Error[] = [];
  const server = createServer((s) => s.end('hi'));
  t.after(() => server.close());
  addAcceptors(server, { count: 4, onError: (err) => errors.push(err) });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  while (errors.length === 0) await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve)); // the other two fail in the same turn (bind is synchronous, the error a tick later): still one report
  assert.equal(errors.length, 1);
  assert.equal((errors[0] as NodeJS.ErrnoException).code, 'EADDRINUSE');
  const { connect } = await import('node:net');
  const c = connect((server.address() as AddressInfo).port, '127.0.0.1');
  const [data] = (await once(c, 'data')) as [Buffer];
  assert.equal(data.toString(), 'hi');
  c.destroy();
});
