// Issue 31 item 2, end to end: overload is not an internal error. A real
// `portal serve` (files mode) with one evaluation worker, held by a slow
// review (test/support/slow-schema.ts: the slowest work the schema bounds
// admit); a namespace then floods it: its own share of the queue fills
// (the pool's flowQueue), and every further review of that namespace is
// refused at once as overload, code 429, naming the namespace. Those answers
// are not internal errors: /readyz stays 200 throughout, so a flood can
// never take a replica out of its Service. (How internal errors age out of
// the readiness window is test/admission/readiness-age.test.ts.) Every wait
// polls for the event, with a bound.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { ADMISSION_BODY_LIMIT } from '../../src/admission/limits.ts';
import { MIN_FLOW_QUEUE } from '../../src/evaluation/pool-config.ts';
import { podReview, review, startServe, type ReviewResponse } from '../replica/support.ts';
import { addSlowLists, SLOW_SCHEMA } from '../support/slow-schema.ts';
import { until } from '../support/until.ts';

/** Short for the test; the default is 60 s. */
const MAX_AGE_MS = 5_000;
/** Long, so the slow review holds the worker while the test runs (the flag's maximum is 30 s). */
const DEADLINE = '30s';
/** Refused reviews sent: more than the readiness gate's minimum sample (20). */
const REFUSED = 30;

const RULE = stringify({
  apiVersion: 'portal.dev/v1alpha1',
  kind: 'PortalClusterRule',
  metadata: { name: 'slow-unique' },
  spec: { enforcement: 'Deny', match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, validate: { message: 'Lists must hold distinct items.', schema: SLOW_SCHEMA } },
});

function slowReview(): Record<string, unknown> {
  const r = podReview({ namespace: 'tenant-a' }) as { request: { object: { spec: Record<string, unknown> } } };
  addSlowLists(r.request.object.spec);
  return r;
}

async function gauge(probes: string, name: string): Promise<number> {
  const text = await (await fetch(`${probes}/metrics`, { signal: AbortSignal.timeout(2_000) })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.split(' ').pop()) : 0;
}

async function readyz(probes: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${probes}/readyz?verbose`, { signal: AbortSignal.timeout(2_000) });
  return { status: res.status, text: await res.text() };
}

test('portal serve: a namespace that floods is refused as overload (429, naming it) and the replica stays ready', { timeout: 300_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'portal-readiness-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'rules.yaml'), RULE);
  const s = await startServe(
    t,
    ['--policies', dir, '--evaluation-workers', '1', '--evaluation-timeout', DEADLINE, '--readiness-error-max-age', `${MAX_AGE_MS}ms`],
    { POD_NAME: 'portal-readiness' },
    { listenTimeoutMs: 120_000, ready: true },
  );
  const ca = await readFile(s.caFile);
  const slow = slowReview();
  assert.ok(Buffer.byteLength(JSON.stringify(slow)) < ADMISSION_BODY_LIMIT, 'the slow review fits the body limit');

  const pending: Promise<unknown>[] = [];
  const hold = (body: unknown, from?: string): void => {
    pending.push(review(s.webhook, ca, body, 240_000, from).catch(() => undefined));
  };

  // The slow review holds the only worker ...
  hold(slow);
  await until('the slow review to be in flight', 60_000, async () => ((await gauge(s.probes, 'portal_admission_in_flight')) >= 1 ? true : undefined));
  // ... and tenant-b fills its share of the queue behind it, from two addresses (each address gets at most 32
  // requests read at once: the webhook's fair turns, src/admission/peer-queue.ts).
  for (let i = 0; i < MIN_FLOW_QUEUE; i++) hold(podReview({ namespace: 'tenant-b' }), i % 2 === 0 ? '127.0.0.2' : '127.0.0.3');
  await until("tenant-b's share of the queue to be full", 120_000, async () => ((await gauge(s.probes, 'portal_admission_in_flight')) >= MIN_FLOW_QUEUE + 1 ? true : undefined));

  // Every further review of tenant-b is refused at once: overload, not a verdict and not an internal error.
  const refused: ReviewResponse[] = await Promise.all(Array.from({ length: REFUSED }, () => review(s.webhook, ca, podReview({ namespace: 'tenant-b' }), 60_000, '127.0.0.4')));
  for (const r of refused) {
    assert.equal(r.allowed, false);
    assert.equal(r.status?.code, 429);
    assert.match(r.status?.message ?? '', /portal is overloaded: namespace tenant-b already has \d+ evaluations waiting or running .*This is overload, not a policy verdict/);
  }
  // More than the gate's minimum sample of refusals, and the replica is still ready: none counted as an internal error.
  const ready = await readyz(s.probes);
  assert.equal(ready.status, 200, ready.text);
  assert.doesNotMatch(ready.text, /internal errors: [1-9]/);

  // Stop before the held reviews end (their connections are reset: ignored above).
  s.child.kill('SIGKILL');
  await s.exited;
  await Promise.all(pending);
});
