/**
 * Leader-only writes after a pause (issue 4 fencing, issue 5 exactly-once):
 * ledger writes and alerts are re-checked at the socket, and ledger writes
 * are conditional on the shard's resourceVersion. Real embedded API server,
 * real Alertmanager; pauses are real event-loop blocks (Atomics.wait).
 */
import assert from 'node:assert/strict';
import { after, before, test, type TestContext } from 'node:test';
import { AlertmanagerClient } from '../../src/audit/alertmanager.ts';
import { firingAlert, type ViolationAlert } from '../../src/audit/alert-scheduler.ts';
import type { EmittedAction } from '../../src/audit/idempotency.ts';
import { LedgerWriter } from '../../src/audit/ledger-writer.ts';
import { ledgerShardName } from '../../src/audit/ledger.ts';
import { Term } from '../../src/leader/term.ts';
import type { LeaderTerm } from '../../src/util/leader-term.ts';
import { ErrorCode, isPortalError } from '../../src/observability/errors.ts';
import { apiServer, clientFor, freeze } from '../leader/cluster.ts';
import { startAlertmanager, type RunningAlertmanager } from './support/alertmanager.ts';
import { StatusWriter } from '../../src/audit/status-writer.ts';
import { mergePatchOptions, type KubeClient } from '../../src/kube/client.ts';
import { FencedWriter } from '../../src/kube/fenced-writer.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import type { RuleState } from '../../src/policy/index.ts';
import type { KubeObject, RuleStatus } from '../../src/policy/types.ts';
import { clusterWithCrds, privilegedRule } from './support/controller-harness.ts';

/** The replica's leader-only writer for `client`'s credentials, closed after the test. */
function writerFor(t: TestContext, client: KubeClient): FencedWriter {
  const writer = new FencedWriter({ kubeConfig: client.kubeConfig, userAgent: client.userAgent });
  t.after(() => writer.close());
  return writer;
}

const isTermExpired = (e: unknown) => isPortalError(e, ErrorCode.TermExpired);
const signal = new AbortController().signal;

function shortTerm(ms: number): Term {
  return new Term({ leaseUid: 'lease-uid', transitions: 1 }, performance.now(), ms);
}

/** A term whose first successful check is followed by a pause of `pauseMs` (the process stopped right after checking). */
function pausedAfterFirstCheck(term: Term, pauseMs: number): LeaderTerm {
  let paused = false;
  return {
    epoch: term.epoch,
    epochString: term.epochString,
    signal: term.signal,
    isValid: () => term.isValid(),
    validUntil: () => term.validUntil(),
    assertValid: () => {
      term.assertValid();
      if (!paused) {
        paused = true;
        freeze(pauseMs);
      }
    },
  };
}

const entry = (): EmittedAction => ({ state: 'intent', epoch: 'lease-uid/1', at: Date.now(), until: Date.now() + 60_000 });
/** Keys that land in shard 'a' (the shard is the key's first hex digit). */
const KEY = (n: number) => `a${String(n).padStart(63, '0')}`;

test('ledger: a leader paused after its check writes nothing when it wakes', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'leader');
  const ledger = new LedgerWriter({ writer: writerFor(t, client), namespace: 'default', writeLimiter: client.writeLimiter });
  const term = pausedAfterFirstCheck(shortTerm(300), 400);
  await assert.rejects(ledger.write({ [KEY(1)]: entry() }, [], term, signal), isTermExpired);
  assert.deepEqual(api.auditLog().filter((e) => e.user === 'leader'), []);
});

test('ledger: patches carry the shard resourceVersion; a conflict is re-read and retried only while the term is valid', async (t) => {
  const api = await apiServer(t);
  const a = clientFor(api, 'a');
  const b = clientFor(api, 'b');
  const ledgerA = new LedgerWriter({ writer: writerFor(t, a), namespace: 'default', writeLimiter: a.writeLimiter });
  const ledgerB = new LedgerWriter({ writer: writerFor(t, b), namespace: 'default', writeLimiter: b.writeLimiter });
  const termA = shortTerm(60_000);
  const termB = shortTerm(60_000);
  await ledgerA.write({ [KEY(1)]: entry() }, [], termA, signal); // creates the shard
  await ledgerA.write({ [KEY(2)]: entry() }, [], termA, signal); // patch with the rv it created
  await ledgerB.write({ [KEY(3)]: entry() }, [], termB, signal); // another writer: the shard moves on
  await ledgerA.write({ [KEY(4)]: entry() }, [], termA, signal); // A's rv is stale now
  const writesA = api.auditLog().filter((e) => e.user === 'a').map((e) => `${e.verb} ${e.code}`);
  assert.deepEqual(writesA, ['create 201', 'patch 200', 'patch 409', 'patch 200']);
  const shard = await a.core.readNamespacedConfigMap({ name: ledgerShardName(KEY(1)), namespace: 'default' });
  assert.deepEqual(Object.keys(shard.data ?? {}).sort(), [KEY(1), KEY(2), KEY(3), KEY(4)]);

  // A stale leader: its write conflicts, and the retry is fenced.
  await ledgerB.write({ [KEY(5)]: entry() }, [], termB, signal);
  let checks = 0;
  const ending: LeaderTerm = {
    epoch: termA.epoch,
    epochString: termA.epochString,
    signal: termA.signal,
    isValid: () => termA.isValid(),
    validUntil: () => termA.validUntil(),
    assertValid: () => {
      // Valid through the first attempt (the writer's check, the transport's, the socket's); ended before the retry.
      if (++checks === 4) termA.end('lost the lease');
      termA.assertValid();
    },
  };
  await assert.rejects(ledgerA.write({ [KEY(6)]: entry() }, [], ending, signal), isTermExpired);
  assert.deepEqual(api.auditLog().filter((e) => e.user === 'a').map((e) => `${e.verb} ${e.code}`).slice(4), ['patch 409']);
  const after = await a.core.readNamespacedConfigMap({ name: ledgerShardName(KEY(1)), namespace: 'default' });
  assert.equal(after.data?.[KEY(6)], undefined);
});

let am: RunningAlertmanager;
before(async () => {
  am = await startAlertmanager();
});
after(async () => {
  await am?.close();
});

function alert(name: string) {
  const v: ViolationAlert = { rule: 'fencing', severity: 'high', kind: 'Pod', namespace: 'team-a', name, message: 'm', epoch: 'lease-uid/1' };
  return firingAlert(v, Date.now(), Date.now() + 3_600_000);
}

test('alerts: a pause while connecting to Alertmanager is caught at the socket; nothing arrives', async (t) => {
  const api = await apiServer(t);
  const client = new AlertmanagerClient({ urls: [am.url], maxAttempts: 1, writer: writerFor(t, clientFor(api, 'leader')) });
  const term = shortTerm(300);
  let calls = 0;
  const paused: LeaderTerm = {
    epoch: term.epoch,
    epochString: term.epochString,
    signal: term.signal,
    isValid: () => term.isValid(),
    validUntil: () => term.validUntil(),
    assertValid: () => {
      calls++;
      term.assertValid();
      // Passed when the request starts; the process then stops while the connection is being made.
      if (calls === 1) setImmediate(() => freeze(400));
    },
  };
  await assert.rejects(client.send([alert('paused-pod')], signal, paused), isTermExpired);
  assert.equal(calls, 2, 'checked when the request started and at the socket write');
  // Control: the same send without the pause arrives, so an empty list below is not an accident.
  const sent = await client.send([alert('control-pod')], signal, shortTerm(60_000));
  assert.equal(sent.delivered, true);
  const names = await (async () => {
    const deadline = performance.now() + 10_000;
    for (;;) {
      const got = (await am.alerts()).map((a) => a.labels['name']);
      if (got.includes('control-pod') || performance.now() > deadline) return got;
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  assert.ok(names.includes('control-pod'), `control alert arrived: ${names.join(',')}`);
  assert.ok(!names.includes('paused-pod'), 'the fenced alert never reached Alertmanager');
});

test('status: writes are conditional on the observed resourceVersion; a status changed by someone else is rewritten', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  await admin.apply(privilegedRule('r'));
  const client = clientFor(api, 'leader');
  const other = clientFor(api, 'stale');
  const read = async () => (await client.customObjects.getClusterCustomObject({ group: 'portal.dev', version: 'v1alpha1', plural: 'portalclusterrules', name: 'r' })) as KubeObject;
  const state: RuleState = { key: 'r', ruleKind: 'PortalClusterRule', name: 'r', generation: 1, ready: true, reason: 'Compiled', message: 'compiled', enforcement: 'Deny', failurePolicy: 'Fail', severity: 'high', category: 'c', actions: [] };
  let cached = await read(); // what "the informer" shows
  const writer = new StatusWriter(client, writerFor(t, client), { states: () => [state], violations: () => 2, ruleObject: () => cached, lastAuditTime: () => undefined, lastPassTime: () => undefined }, silentLogger());
  const term = shortTerm(60_000);
  const statusWrites = (user: string) => api.auditLog().filter((e) => e.user === user && e.subresource === 'status').map((e) => e.code);

  writer.markDirty();
  await writer.flush(term, signal);
  assert.deepEqual(statusWrites('leader'), [200]);
  assert.equal(((await read()) as { status?: RuleStatus }).status?.violations, 2);

  // A late write by someone else (a paused predecessor's request) changes the status.
  await other.customObjects.patchClusterCustomObjectStatus({ group: 'portal.dev', version: 'v1alpha1', plural: 'portalclusterrules', name: 'r', body: { status: { violations: 99 } } }, mergePatchOptions());
  // While the cache still shows the object as of our own write, our write stands: nothing to do.
  writer.markDirty();
  await writer.flush(term, signal);
  assert.deepEqual(statusWrites('leader'), [200]);
  // Once the cache shows the newer object, what is stored decides: it is rewritten.
  cached = await read();
  writer.markDirty();
  await writer.flush(term, signal);
  assert.deepEqual(statusWrites('leader'), [200, 200]);
  assert.equal(((await read()) as { status?: RuleStatus }).status?.violations, 2);

  // A writer deciding on an outdated object: the precondition turns its write into a 409, retried later.
  const outdated = cached;
  await other.customObjects.patchClusterCustomObjectStatus({ group: 'portal.dev', version: 'v1alpha1', plural: 'portalclusterrules', name: 'r', body: { status: { violations: 7 } } }, mergePatchOptions());
  const fresh = new StatusWriter(client, writerFor(t, client), { states: () => [state], violations: () => 3, ruleObject: () => outdated, lastAuditTime: () => undefined, lastPassTime: () => undefined }, silentLogger());
  fresh.markDirty();
  await fresh.flush(term, signal);
  assert.deepEqual(statusWrites('leader'), [200, 200, 409]);
  assert.equal(((await read()) as { status?: RuleStatus }).status?.violations, 7);
});
