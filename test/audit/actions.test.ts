/**
 * Action executors against the embedded API server (and a real Alertmanager
 * for `alert`): merge-patch label/annotate with provenance, eviction 201 and
 * 429 with a PDB, exempt namespaces, eviction budget, the ledger protocol,
 * fencing, and what a follower learns from all of it.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PolicyV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { ActionExecutor, markPatch, ruleLabelValue, validateActions, type ActionTarget } from '../../src/audit/actions.ts';
import { AlertmanagerClient } from '../../src/audit/alertmanager.ts';
import { actionKey, IdempotencyStore } from '../../src/audit/idempotency.ts';
import { ledgerShardName } from '../../src/audit/ledger.ts';
import { LedgerWriter } from '../../src/audit/ledger-writer.ts';
import { startApiServer, type ApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import { createKubeClient, type KubeClient } from '../../src/kube/client.ts';
import { FencedWriter } from '../../src/kube/fenced-writer.ts';
import { TokenBucket } from '../../src/kube/rate-limiter.ts';
import { Term } from '../../src/leader/term.ts';
import type { LeaderTerm } from '../../src/util/leader-term.ts';
import { ErrorCode, isPortalError } from '../../src/observability/errors.ts';
import type { KubeObject } from '../../src/policy/types.ts';
import { freePort, startAlertmanager, type RunningAlertmanager } from './support/alertmanager.ts';

const INSTALL_NS = 'portal-system';
const POD = { group: '', version: 'v1', kind: 'Pod' };
let api: ApiServer;
let kube: KubeClient;
let writer: FencedWriter;
let am: RunningAlertmanager;
const terms: Term[] = [];

before(async () => {
  [api, am] = await Promise.all([startApiServer({ port: 0 }), startAlertmanager()]);
  kube = createKubeClient({ kubeconfigYaml: api.kubeConfig('portal'), qps: 100, burst: 100, userAgent: 'audit-test' });
  writer = new FencedWriter({ kubeConfig: kube.kubeConfig, userAgent: 'audit-test' });
  await kube.core.createNamespace({ body: { metadata: { name: INSTALL_NS } } });
});
after(async () => {
  for (const t of terms) t.end('test over');
  await Promise.all([writer?.close(), api?.close(), am?.close()]);
});

function term(validFor = 60_000, sentAgo = 0): Term {
  const t = new Term({ leaseUid: 'lease-uid', transitions: 2 }, performance.now() - sentAgo, validFor);
  terms.push(t);
  return t;
}

function executor(opts: { store?: IdempotencyStore; evictionLimiter?: TokenBucket; urls?: string[]; exempt?: string[] } = {}) {
  const store = opts.store ?? new IdempotencyStore();
  const exec = new ActionExecutor({
    writer,
    writeLimiter: kube.writeLimiter,
    evictionLimiter: opts.evictionLimiter ?? new TokenBucket({ qps: 100, burst: 100 }),
    ledger: new LedgerWriter({ writer, namespace: INSTALL_NS, writeLimiter: kube.writeLimiter }),
    alertmanager: new AlertmanagerClient({ urls: opts.urls ?? [am.url], writer, maxAttempts: 2, baseDelayMs: 10 }),
    store,
    exemptNamespaces: new Set(opts.exempt ?? ['kube-system', INSTALL_NS]),
    resendIntervalMs: 60_000,
    logger: pino({ level: 'silent' }),
  });
  return { exec, store };
}

async function pod(namespace: string, name: string, labels: Record<string, string> = {}): Promise<ActionTarget> {
  const created = await kube.core.createNamespacedPod({ namespace, body: { metadata: { name, namespace, labels }, spec: { containers: [{ name: 'c', image: 'nginx' }] } } });
  return { gvk: POD, object: JSON.parse(JSON.stringify(created)) as KubeObject };
}

async function readPod(namespace: string, name: string): Promise<KubeObject> {
  return JSON.parse(JSON.stringify(await kube.core.readNamespacedPod({ namespace, name }))) as KubeObject;
}

async function ledgerData(key: string): Promise<Record<string, string>> {
  try {
    return (await kube.core.readNamespacedConfigMap({ namespace: INSTALL_NS, name: ledgerShardName(key) })).data ?? {};
  } catch {
    return {};
  }
}

const signal = new AbortController().signal;

void test('pure helpers: label value from the rule, validation problems, nothing to patch when applied', () => {
  assert.equal(ruleLabelValue('team-a/require-owner'), 'team-a.require-owner');
  assert.equal(ruleLabelValue('x'.repeat(100)).length, 63);
  assert.deepEqual(validateActions([{ type: 'label', key: 'portal.dev/violation' }, { type: 'alert' }], true), []);
  const problems = validateActions([{ type: 'label' }, { type: 'evict' }, { type: 'bogus' as 'alert' }, { type: 'label', key: 'k', value: 'a/b' }], false);
  assert.equal(problems.length, 4);
  assert.match(problems.join('\n'), /needs a key[\s\S]*evict applies only to Pods[\s\S]*unknown action type "bogus"[\s\S]*not a valid label value/);
  const applied = { metadata: { name: 'p', labels: { k: 'r' } } };
  assert.equal(markPatch(applied, 'r', [{ type: 'label', key: 'k' }], 'e', 0), undefined);
});

void test('label + annotate: one merge patch with provenance; idempotent; a follower learns it from the object', async () => {
  const target = await pod('default', 'mark-1', { app: 'web' });
  const { exec, store } = executor();
  const t = term();
  const actions = [{ type: 'label' as const, key: 'portal.dev/violation' }, { type: 'annotate' as const, key: 'portal.dev/reason', value: 'privileged' }];
  assert.deepEqual(await exec.mark(target, 'no-privileged', actions, t, signal), { status: 'done' });
  assert.equal(store.size, 2, 'label and annotate recorded');
  const after1 = await readPod('default', 'mark-1');
  assert.equal(after1.metadata?.labels?.['portal.dev/violation'], 'no-privileged');
  assert.equal(after1.metadata?.labels?.app, 'web', 'merge patch keeps existing labels');
  assert.equal(after1.metadata?.annotations?.['portal.dev/reason'], 'privileged');
  const marks = Object.entries(after1.metadata?.annotations ?? {}).filter(([k]) => k.startsWith('actions.portal.dev/'));
  assert.equal(marks.length, 2);
  assert.ok(marks.every(([, v]) => (JSON.parse(v) as { epoch: string }).epoch === 'lease-uid/2'));
  const patches = api.auditLog().filter((e) => e.resource === 'pods' && e.name === 'mark-1' && e.verb === 'patch');
  assert.equal(patches.length, 1);
  assert.equal(patches[0]!.user, 'portal');

  // Again (stale cache object): the store suppresses it.
  assert.equal((await exec.mark(target, 'no-privileged', actions, t, signal)).status, 'skipped');
  // A fresh leader that only observed the object: the object shows it is applied.
  const follower = new IdempotencyStore();
  assert.equal(follower.observeObject(POD, after1), 2);
  assert.equal(follower.has(actionKey({ rule: 'no-privileged', gvk: POD, namespace: 'default', name: 'mark-1', actionType: 'label' })), true);
  const { exec: next } = executor({ store: follower });
  assert.equal((await next.mark({ gvk: POD, object: after1 }, 'no-privileged', actions, term(), signal)).status, 'skipped');
  assert.equal(api.auditLog().filter((e) => e.resource === 'pods' && e.name === 'mark-1' && e.verb === 'patch').length, 1, 'no second write');
});

void test('a fenced term sends nothing', async () => {
  const target = await pod('default', 'fenced-1');
  const { exec } = executor();
  const expired = term(1000, 5000); // its last renewal was sent 5 s ago with 1 s validity
  await assert.rejects(exec.mark(target, 'r', [{ type: 'label', key: 'k' }], expired, signal), (e) => isPortalError(e, ErrorCode.TermExpired));
  await assert.rejects(exec.evict(target, 'r', expired, signal), (e) => isPortalError(e, ErrorCode.TermExpired));
  assert.equal(api.auditLog().filter((e) => e.name === 'fenced-1' && e.verb !== 'create').length, 0);
});

/** A valid term that ends at its `n`-th check (the executor's own check is the first of a write). */
function endingAtCheck(n: number): LeaderTerm {
  const t = term();
  let checks = 0;
  return {
    epoch: t.epoch,
    epochString: t.epochString,
    signal: t.signal,
    isValid: () => t.isValid(),
    validUntil: () => t.validUntil(),
    assertValid: () => {
      if (++checks === n) t.end('lost the lease');
      t.assertValid();
    },
  };
}

void test('a term that ends after the executor checked it: the patch and the eviction are stopped at the socket, and TermExpired is thrown', async () => {
  const target = await pod('default', 'fenced-late-1');
  const { exec } = executor();
  // mark: its own check (1), the transport's (2), the connected socket's (3).
  await assert.rejects(exec.mark(target, 'r', [{ type: 'label', key: 'k' }], endingAtCheck(3), signal), (e) => isPortalError(e, ErrorCode.TermExpired));
  // evict: the ledger intent is written first (three checks), then its own check (4), the transport's (5), the socket's (6).
  await assert.rejects(exec.evict(target, 'r', endingAtCheck(6), signal), (e) => isPortalError(e, ErrorCode.TermExpired));
  assert.deepEqual(api.auditLog().filter((e) => e.name === 'fenced-late-1' && e.verb !== 'create'), []);
  assert.equal((await readPod('default', 'fenced-late-1')).metadata?.labels?.['k'], undefined);
});

void test('evict: 201 through the Eviction API, recorded in the ledger, learned by a follower', async () => {
  const target = await pod('default', 'evict-1');
  const { exec, store } = executor();
  assert.deepEqual(await exec.evict(target, 'no-privileged', term(), signal), { status: 'done' });
  const evictions = api.auditLog().filter((e) => e.name === 'evict-1' && e.subresource === 'eviction');
  assert.deepEqual(evictions.map((e) => e.code), [201]);
  const key = actionKey({ rule: 'no-privileged', gvk: POD, namespace: 'default', name: 'evict-1', actionType: 'evict' });
  assert.equal(store.get(key)?.state, 'done');
  const data = await ledgerData(key);
  assert.equal((JSON.parse(data[key]!) as { s: string }).s, 'done');
  const follower = new IdempotencyStore();
  follower.observeLedger(data);
  assert.equal(follower.has(key), true);
  // Same name again within the window (a StatefulSet pod coming back): not evicted again.
  const again = await pod('default', 'evict-1').catch(() => target);
  assert.equal((await executor({ store: follower }).exec.evict(again, 'no-privileged', term(), signal)).status, 'skipped');
});

void test('evict: a PodDisruptionBudget 429 is retried later, not dropped, and leaves no ledger entry', async () => {
  const target = await pod('default', 'pdb-1', { app: 'guarded' });
  await kube.kubeConfig.makeApiClient(PolicyV1Api).createNamespacedPodDisruptionBudget({
    namespace: 'default',
    body: { metadata: { name: 'guard' }, spec: { minAvailable: 1, selector: { matchLabels: { app: 'guarded' } } } },
  });
  const { exec, store } = executor();
  const outcome = await exec.evict(target, 'no-privileged', term(), signal);
  assert.equal(outcome.status, 'retry');
  assert.equal(outcome.status === 'retry' && outcome.afterMs, 5000);
  assert.deepEqual(api.auditLog().filter((e) => e.name === 'pdb-1' && e.subresource === 'eviction').map((e) => e.code), [429]);
  const key = actionKey({ rule: 'no-privileged', gvk: POD, namespace: 'default', name: 'pdb-1', actionType: 'evict' });
  assert.equal(store.has(key), false);
  assert.equal((await ledgerData(key))[key], undefined);
  assert.ok(await readPod('default', 'pdb-1'));
});

void test('evict: never in exempt namespaces, never a non-Pod, paced by the eviction budget', async () => {
  const { exec } = executor({ exempt: ['kube-system'], evictionLimiter: new TokenBucket({ qps: 1 / 60, burst: 1 }) });
  const sys = await pod('kube-system', 'sys-1');
  assert.equal((await exec.evict(sys, 'r', term(), signal)).status, 'skipped');
  const ns = { gvk: { group: '', version: 'v1', kind: 'Namespace' }, object: { metadata: { name: 'default' } } };
  assert.match(JSON.stringify(await exec.evict(ns, 'r', term(), signal)), /only to Pods/);
  const a = await pod('default', 'budget-1');
  const b = await pod('default', 'budget-2');
  assert.equal((await exec.evict(a, 'r', term(), signal)).status, 'done');
  const second = await exec.evict(b, 'r', term(), signal);
  assert.equal(second.status, 'retry');
  assert.ok(second.status === 'retry' && second.afterMs > 50_000, 'next token in about a minute');
  assert.equal(api.auditLog().filter((e) => e.name === 'sys-1' && e.subresource === 'eviction').length, 0);
});

void test('alert: intent → send → done in the ledger; wait until the re-send; resolve clears it everywhere', async () => {
  const target = await pod('default', 'alert-1');
  const { exec, store } = executor();
  const v = { rule: 'no-privileged', severity: 'high', kind: 'Pod', namespace: 'default', name: 'alert-1', message: 'Privileged containers are not allowed.', epoch: '' };
  const t = term();
  assert.deepEqual(await exec.alert(target, v, true, t, signal), { status: 'done', requeueAfterMs: 60_000 });
  const key = actionKey({ rule: 'no-privileged', gvk: POD, namespace: 'default', name: 'alert-1', actionType: 'alert' });
  const entry = JSON.parse((await ledgerData(key))[key]!) as { s: string; e: string; u: number; st: number };
  assert.equal(entry.s, 'done');
  assert.equal(entry.e, 'lease-uid/2');
  const got = (await am.alerts()).find((a) => a.labels.name === 'alert-1');
  assert.equal(got?.annotations.epoch, 'lease-uid/2');
  assert.equal(Date.parse(got!.endsAt), entry.u, 'the ledger window is the endsAt that was sent');
  const ledgerWrites = () => api.auditLog().filter((e) => e.resource === 'configmaps' && e.name === ledgerShardName(key)).length;
  const writesAfterFire = ledgerWrites();

  const waiting = await exec.alert(target, v, true, t, signal);
  assert.equal(waiting.status, 'retry');
  assert.ok(waiting.status === 'retry' && waiting.afterMs > 55_000 && waiting.afterMs <= 60_000);
  assert.equal(ledgerWrites(), writesAfterFire, 'no send, no write while waiting');

  // A new leader that only watched the ledger does not fire again either.
  const follower = new IdempotencyStore();
  follower.observeLedger(await ledgerData(key));
  assert.equal((await executor({ store: follower }).exec.alert(target, v, true, term(), signal)).status, 'retry');

  assert.deepEqual(await exec.alert(target, v, false, t, signal), { status: 'done' });
  assert.equal(store.has(key), false);
  assert.equal((await ledgerData(key))[key], undefined);
  const deadline = performance.now() + 10_000;
  while ((await am.alerts()).some((a) => a.labels.name === 'alert-1')) {
    assert.ok(performance.now() < deadline, 'resolved alert still listed');
    await new Promise((r) => setTimeout(r, 50));
  }
});

void test('alert: an unreachable Alertmanager is an error outcome (retried by the queue), leaving no intent behind', async () => {
  const target = await pod('default', 'alert-down-1');
  const { exec, store } = executor({ urls: [`http://127.0.0.1:${await freePort()}`] });
  const v = { rule: 'r', severity: 'low', kind: 'Pod', namespace: 'default', name: 'alert-down-1', message: 'm', epoch: '' };
  const outcome = await exec.alert(target, v, true, term(), signal);
  assert.equal(outcome.status, 'error');
  assert.match(outcome.status === 'error' ? outcome.reason : '', /not delivered.*ECONNREFUSED|not delivered.*fetch failed/);
  const key = actionKey({ rule: 'r', gvk: POD, namespace: 'default', name: 'alert-down-1', actionType: 'alert' });
  assert.equal(store.has(key), false);
  assert.equal((await ledgerData(key))[key], undefined);
});

void test('alert: a successor settles an unconfirmed intent with Alertmanager — sent: confirmed, not re-sent; not sent: sent now', async () => {
  const v = (name: string) => ({ rule: 'settle', severity: 'low', kind: 'Pod', namespace: 'default', name, message: 'm', epoch: '' });
  const key = (name: string) => actionKey({ rule: 'settle', gvk: POD, namespace: 'default', name, actionType: 'alert' });
  const sends = async (name: string) => (await am.alerts()).filter((a) => a.labels.name === name).length;

  // Predecessor sent the alert but died before marking it done.
  const sent = await pod('default', 'settle-sent');
  const first = executor();
  assert.equal((await first.exec.alert(sent, v('settle-sent'), true, term(), signal)).status, 'done');
  const intent = { ...first.store.get(key('settle-sent'))!, state: 'intent' as const };
  const successor = new IdempotencyStore();
  successor.record(key('settle-sent'), intent);
  const settled = await executor({ store: successor }).exec.alert(sent, v('settle-sent'), true, term(), signal);
  assert.equal(settled.status, 'retry', 'confirmed as sent: wait for the re-send, do not fire again');
  assert.equal(successor.get(key('settle-sent'))?.state, 'done');
  assert.equal(JSON.parse((await ledgerData(key('settle-sent')))[key('settle-sent')]!).s, 'done');

  // Predecessor recorded the intent and died before sending.
  const lost = await pod('default', 'settle-lost');
  const store = new IdempotencyStore();
  store.record(key('settle-lost'), { state: 'intent', epoch: 'old/1', at: Date.now(), until: Date.now() + 120_000, startsAt: Date.now() });
  assert.equal(await sends('settle-lost'), 0);
  assert.equal((await executor({ store }).exec.alert(lost, v('settle-lost'), true, term(), signal)).status, 'done', 'not in Alertmanager: sent now');
  assert.equal(await sends('settle-lost'), 1);
});
