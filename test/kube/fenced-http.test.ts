/**
 * Late fencing (kube/fenced-http.ts): a leader paused between its term check
 * and the socket write must not send when it wakes. The pause is real — the
 * event loop is blocked (Atomics.wait), as by SIGSTOP or a long GC — and it
 * is placed deterministically: right after the caller's check, or while the
 * request is connecting (TCP connect + TLS handshake still to come). The
 * embedded API server's write log shows what reached the server.
 */
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import { test } from 'node:test';
import type { ApiServer } from '../../src/devcluster/apiserver/index.ts';
import { callOptions, type KubeClient } from '../../src/kube/client.ts';
import { Term, type LeaderTerm } from '../../src/leader/term.ts';
import { ErrorCode, isPortalError } from '../../src/observability/errors.ts';
import { apiServer, clientFor, freeze } from '../leader/cluster.ts';

/** A term that is valid for `ms` from now (no renewals). */
function shortTerm(ms: number): Term {
  return new Term({ leaseUid: 'lease-uid', transitions: 1 }, performance.now(), ms);
}

const configMap = (name: string) => ({ namespace: 'default', body: { metadata: { name, namespace: 'default' }, data: { k: 'v' } } });

function writesOf(api: ApiServer, user: string, name: string) {
  return api.auditLog().filter((e) => e.user === user && e.resource === 'configmaps' && e.name === name);
}

/** Counts new client TCP connections while `run` runs. */
async function countConnections<T>(run: () => Promise<T>): Promise<{ result: PromiseSettledResult<T>; connections: number }> {
  let connections = 0;
  const onSocket = () => connections++;
  subscribe('net.client.socket', onSocket);
  try {
    const [result] = await Promise.allSettled([run()]);
    return { result: result!, connections };
  } finally {
    unsubscribe('net.client.socket', onSocket);
  }
}

const isTermExpired = (e: unknown) => isPortalError(e, ErrorCode.TermExpired);

test('control: without the late check, a pause after the check sends a write after the term ended', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'leader');
  const term = shortTerm(300);
  term.assertValid();
  freeze(400); // paused right after the check, past the term's validity
  assert.equal(term.isValid(), false);
  await client.core.createNamespacedConfigMap(configMap('late-unfenced'), callOptions({}));
  assert.equal(writesOf(api, 'leader', 'late-unfenced').length, 1, 'the stale write reached the server');
});

test('a pause between the caller’s check and the request: the request is not sent', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'leader');
  const term = shortTerm(300);
  term.assertValid();
  freeze(400);
  await assert.rejects(client.core.createNamespacedConfigMap(configMap('late-fenced'), callOptions({ fence: () => term.assertValid() })), isTermExpired);
  assert.deepEqual(writesOf(api, 'leader', 'late-fenced'), []);
});

/**
 * The fence passes when the request starts; a pause is scheduled for the
 * next macrotask, when the connection has been started but the TLS
 * handshake (which needs further event-loop turns) has not completed.
 */
function pauseWhileConnecting(term: LeaderTerm, pauseMs: number, checkAtSocket: boolean) {
  const calls: number[] = [];
  const fence = () => {
    calls.push(performance.now());
    if (calls.length === 1) {
      term.assertValid();
      setImmediate(() => freeze(pauseMs));
    } else if (checkAtSocket) term.assertValid();
  };
  return { fence, calls };
}

test('control: a pause during connect sends the write late when only the start of the request is checked', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'leader');
  const term = shortTerm(300);
  const { fence } = pauseWhileConnecting(term, 400, false);
  const { result, connections } = await countConnections(() => client.core.createNamespacedConfigMap(configMap('connect-unfenced'), callOptions({ fence })));
  assert.equal(result.status, 'fulfilled');
  assert.equal(connections, 1, 'a fresh connection (connect + TLS handshake after the pause)');
  assert.equal(term.isValid(), false);
  assert.equal(writesOf(api, 'leader', 'connect-unfenced').length, 1, 'the stale write reached the server');
});

test('a pause during connect and TLS handshake: the socket-level check stops the write', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'leader');
  const term = shortTerm(300);
  const { fence, calls } = pauseWhileConnecting(term, 400, true);
  const started = performance.now();
  const { result, connections } = await countConnections(() => client.core.createNamespacedConfigMap(configMap('connect-fenced'), callOptions({ fence })));
  assert.equal(result.status, 'rejected');
  assert.ok(isTermExpired((result as PromiseRejectedResult).reason), String((result as PromiseRejectedResult).reason));
  assert.equal(connections, 1);
  assert.equal(calls.length, 2, 'checked when the request started and at the socket write');
  assert.ok(calls[1]! - started >= 400, 'the second check ran after the pause, at the write');
  assert.deepEqual(writesOf(api, 'leader', 'connect-fenced'), []);
  // The fenced socket was destroyed, not returned to the pool: the client still works.
  await client.core.createNamespacedConfigMap(configMap('after'), callOptions({}));
  assert.equal(writesOf(api, 'leader', 'after').length, 1);
});

test('a pause during the TLS handshake: the write waits for the handshake, then is checked and stopped', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'leader');
  const term = shortTerm(300);
  // Pause once the TCP connection is up (and the request's first write was attempted) but before the
  // handshake finished: the handshake needs further event-loop turns, which the pause delays.
  const onSocket = (message: unknown) => {
    const socket = (message as { socket: Socket }).socket;
    socket.once('connect', () => setImmediate(() => freeze(400)));
  };
  subscribe('net.client.socket', onSocket);
  t.after(() => unsubscribe('net.client.socket', onSocket));
  await assert.rejects(client.core.createNamespacedConfigMap(configMap('handshake-fenced'), callOptions({ fence: () => term.assertValid() })), isTermExpired);
  assert.deepEqual(writesOf(api, 'leader', 'handshake-fenced'), []);
});

async function warm(client: KubeClient): Promise<void> {
  await client.core.readNamespace({ name: 'default' });
}

test('connections are reused: sequential writes after the first need no new connect', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'leader');
  await warm(client);
  const term = shortTerm(60_000);
  const { result, connections } = await countConnections(async () => {
    for (let i = 0; i < 5; i++) await client.core.createNamespacedConfigMap(configMap(`reuse-${i}`), callOptions({ fence: () => term.assertValid() }));
  });
  assert.equal(result.status, 'fulfilled');
  assert.equal(connections, 0, 'all five writes went over the warm keep-alive connection');
});

test('on a reused connection the check runs at the socket write, and a failure sends nothing', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'leader');
  await warm(client);
  const term = shortTerm(60_000);
  let calls = 0;
  const fence = () => {
    calls++;
    if (calls === 2) term.end('lost the lease'); // between the start of the request and the write
    term.assertValid();
  };
  const { result, connections } = await countConnections(() => client.core.createNamespacedConfigMap(configMap('reused-fenced'), callOptions({ fence })));
  assert.equal(connections, 0, 'the pooled connection was used');
  assert.equal(result.status, 'rejected');
  assert.ok(isTermExpired((result as PromiseRejectedResult).reason));
  assert.equal(calls, 2);
  assert.deepEqual(writesOf(api, 'leader', 'reused-fenced'), []);
});
