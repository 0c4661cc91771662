/**
 * Late fencing (kube/fenced-http.ts, kube/fenced-writer.ts): a leader paused
 * between its term check and the socket write must not send when it wakes.
 * The pause is real — the event loop is blocked (Atomics.wait), as by SIGSTOP
 * or a long GC — and it is placed deterministically: right after the caller's
 * check, while the connection is being made, or during the TLS handshake.
 * What is asserted is what reached the embedded API server (its write log)
 * and when (after the term had expired), never how many connections the
 * client opened: that differs between Node versions and is no part of the
 * guarantee.
 */
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import { test, type TestContext } from 'node:test';
import { PatchStrategy } from '@kubernetes/client-node';
import type { ApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import { callOptions, type KubeClient } from '../../src/kube/client.ts';
import { FencedWriter, type WriteTerm } from '../../src/kube/fenced-writer.ts';
import { Term } from '../../src/leader/term.ts';
import { ErrorCode, isPortalError } from '../../src/observability/errors.ts';
import { apiServer, clientFor, freeze } from '../leader/cluster.ts';
import { until } from '../support/until.ts';

/** A term that is valid for `ms` from now (no renewals). */
function shortTerm(ms: number): Term {
  return new Term({ leaseUid: 'lease-uid', transitions: 1 }, performance.now(), ms);
}

const configMap = (name: string) => ({ namespace: 'default', body: { metadata: { name, namespace: 'default' }, data: { k: 'v' } } });

function writesOf(api: ApiServer, user: string, name: string) {
  return api.auditLog().filter((e) => e.user === user && e.resource === 'configmaps' && e.name === name);
}

function writerFor(t: TestContext, client: KubeClient): FencedWriter {
  const writer = new FencedWriter({ kubeConfig: client.kubeConfig, userAgent: client.userAgent });
  t.after(() => writer.close());
  return writer;
}

const isTermExpired = (e: unknown) => isPortalError(e, ErrorCode.TermExpired);

/**
 * A term whose first check passes and schedules a pause for the next
 * macrotask — when the request has started connecting, but neither the TCP
 * connect nor the TLS handshake (which need further event-loop turns) can
 * have completed. `checks` records when each check ran.
 */
function pausedWhileConnecting(term: Term, pauseMs: number): WriteTerm & { checks: number[] } {
  const checks: number[] = [];
  return {
    checks,
    assertValid() {
      checks.push(performance.now());
      term.assertValid();
      if (checks.length === 1) setImmediate(() => freeze(pauseMs));
    },
  };
}

test('control: without the late check, a pause after the check sends a write after the term ended', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'leader');
  const term = shortTerm(300);
  term.assertValid();
  freeze(400); // paused right after the check, past the term's validity
  const expiredAt = Date.now();
  assert.equal(term.isValid(), false);
  await client.core.createNamespacedConfigMap(configMap('late-unfenced'), callOptions({}));
  const writes = writesOf(api, 'leader', 'late-unfenced');
  assert.equal(writes.length, 1, 'the stale write reached the server');
  assert.ok(Date.parse(writes[0]!.time) >= expiredAt - 1, 'and it arrived after the term had expired');
});

test('a pause between the caller’s check and the request: the request is not sent', async (t) => {
  const api = await apiServer(t);
  const writer = writerFor(t, clientFor(api, 'leader'));
  const term = shortTerm(300);
  term.assertValid();
  freeze(400);
  await assert.rejects(writer.core.createNamespacedConfigMap(configMap('late-fenced'), writer.options(term)), isTermExpired);
  assert.deepEqual(writesOf(api, 'leader', 'late-fenced'), []);
});

test('control: a pause during connect sends the write late when only the start of the request is checked', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'leader');
  const term = shortTerm(300);
  const paused = pausedWhileConnecting(term, 400);
  // The old design's first half: one check as the request starts, none at the socket.
  await client.core.createNamespacedConfigMap(configMap('connect-unfenced'), callOptions({ fence: () => (paused.checks.length === 0 ? paused.assertValid() : undefined) }));
  assert.equal(term.isValid(), false);
  const writes = writesOf(api, 'leader', 'connect-unfenced');
  assert.equal(writes.length, 1, 'the stale write reached the server');
  assert.ok(Date.parse(writes[0]!.time) >= performance.timeOrigin + paused.checks[0]! + 300, 'after the term had expired');
});

test('a pause during connect and TLS handshake: the check at the connected socket stops the write', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'leader');
  const writer = writerFor(t, client);
  const term = shortTerm(300);
  const paused = pausedWhileConnecting(term, 400);
  await assert.rejects(writer.core.createNamespacedConfigMap(configMap('connect-fenced'), writer.options(paused)), isTermExpired);
  assert.equal(paused.checks.length, 2, 'checked when the request started and once its socket was connected');
  assert.ok(paused.checks[1]! - paused.checks[0]! >= 400, 'the second check ran after the pause');
  assert.deepEqual(writesOf(api, 'leader', 'connect-fenced'), []);
  // The fenced socket was destroyed, not pooled: the writer still works under a valid term.
  await writer.core.createNamespacedConfigMap(configMap('after'), writer.options(shortTerm(60_000)));
  assert.equal(writesOf(api, 'leader', 'after').length, 1);
});

test('a pause during the TLS handshake: the request waits for the handshake, then is checked and stopped', async (t) => {
  const api = await apiServer(t);
  const writer = writerFor(t, clientFor(api, 'leader'));
  const term = shortTerm(300);
  // Pause once the TCP connection is up but before the handshake finished: the handshake needs
  // further event-loop turns, which the pause delays.
  const onSocket = (message: unknown) => {
    const socket = (message as { socket: Socket }).socket;
    socket.once('connect', () => setImmediate(() => freeze(400)));
  };
  subscribe('net.client.socket', onSocket);
  t.after(() => unsubscribe('net.client.socket', onSocket));
  await assert.rejects(writer.core.createNamespacedConfigMap(configMap('handshake-fenced'), writer.options(term)), isTermExpired);
  assert.deepEqual(writesOf(api, 'leader', 'handshake-fenced'), []);
});

test('on a warm keep-alive connection the check runs at the socket, and a failure sends nothing', async (t) => {
  const api = await apiServer(t);
  const writer = writerFor(t, clientFor(api, 'leader'));
  const term = shortTerm(60_000);
  await writer.core.createNamespacedConfigMap(configMap('warm-up'), writer.options(term)); // a pooled connection now exists
  let checks = 0;
  const ending: WriteTerm = {
    assertValid() {
      checks++;
      if (checks === 2) term.end('lost the lease'); // between the start of the request and the socket
      term.assertValid();
    },
  };
  await assert.rejects(writer.core.createNamespacedConfigMap(configMap('reused-fenced'), writer.options(ending)), isTermExpired);
  assert.equal(checks, 2);
  assert.deepEqual(writesOf(api, 'leader', 'reused-fenced'), []);
  // Sequential writes under a valid term all arrive, in order.
  const next = shortTerm(60_000);
  for (let i = 0; i < 3; i++) await writer.core.createNamespacedConfigMap(configMap(`seq-${i}`), writer.options(next));
  assert.deepEqual([0, 1, 2].map((i) => writesOf(api, 'leader', `seq-${i}`).map((e) => e.code)), [[201], [201], [201]]);
});

test('label/annotate patches through the writer are fenced at the socket, not only by their precondition', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'leader');
  const writer = writerFor(t, client);
  await client.core.createNamespacedConfigMap(configMap('patched'));
  const spec = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'patched', namespace: 'default', labels: { marked: 'yes' } } };
  await writer.objects.resolvePath(spec); // discovery, before the fence (as actions.ts does)
  const term = shortTerm(60_000);
  let checks = 0;
  const ending: WriteTerm = {
    assertValid() {
      if (++checks === 2) term.end('lost the lease'); // after the request started, before its socket write
      term.assertValid();
    },
  };
  await assert.rejects(writer.objects.patch(spec, undefined, undefined, 'portal', undefined, PatchStrategy.MergePatch, writer.objectOptions(ending)), isTermExpired);
  assert.equal(checks, 2);
  assert.deepEqual(writesOf(api, 'leader', 'patched').filter((e) => e.verb === 'patch'), []);
  const stored = await client.core.readNamespacedConfigMap({ name: 'patched', namespace: 'default' });
  assert.equal(stored.metadata?.labels?.['marked'], undefined);
  // Control: under a valid term the same patch lands.
  await writer.objects.patch(spec, undefined, undefined, 'portal', undefined, PatchStrategy.MergePatch, writer.objectOptions(shortTerm(60_000)));
  assert.deepEqual(writesOf(api, 'leader', 'patched').map((e) => `${e.verb} ${e.code}`), ['create 201', 'patch 200']);
});

test('the writer refuses a write without a term, and reads pass', async (t) => {
  const api = await apiServer(t);
  const writer = writerFor(t, clientFor(api, 'leader'));
  await assert.rejects(writer.core.createNamespacedConfigMap(configMap('no-term')), (e: unknown) => isPortalError(e, ErrorCode.Internal) && /without a term/.test((e as Error).message));
  assert.deepEqual(writesOf(api, 'leader', 'no-term'), []);
  const ns = await writer.core.readNamespace({ name: 'default' });
  assert.equal(ns.metadata?.name, 'default');
});

test('close() is idempotent, lets a write in flight finish, and refuses writes started after it', async (t) => {
  const api = await apiServer(t);
  api.faults.setLatency(200, { user: 'leader' });
  const writer = writerFor(t, clientFor(api, 'leader'));
  const term = shortTerm(60_000);
  const inFlight = writer.core.createNamespacedConfigMap(configMap('in-flight'), writer.options(term));
  // Closing while the request waits on the server (held there by the latency fault): it still completes.
  await until('the write to be held on the server', 2000, () => api.faults.delayed('leader').some((r) => r.startsWith('POST ')), { intervalMs: 5 });
  const closed = writer.close();
  assert.equal(writer.close(), closed, 'one close, however often it is called');
  assert.equal(writer.closed, true);
  await inFlight;
  await closed;
  assert.equal(writesOf(api, 'leader', 'in-flight').length, 1);
  assert.throws(() => writer.options(term), (e: unknown) => isPortalError(e, ErrorCode.Closed));
  await assert.rejects(writer.request(`${api.url}/api`, term, { method: 'POST', signal: new AbortController().signal }), (e: unknown) => isPortalError(e, ErrorCode.Closed));
});
