// Issue 31 item 2, end to end: overload is not an internal error. A real
// `portal serve` (files mode) with one evaluation worker, held by a slow
// review (test/support/slow-schema.ts: the slowest work the schema bounds
// admit); a namespace then floods it from another address: what cannot
// start in time to be answered within the webhook's timeout is refused at
// once as overload, code 429, naming the flow (namespace and address; the
// share of a flow fills the same way: test/evaluation/pool-fairness). Those answers
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
import { podReview, review, startServe, type ReviewResponse } from '../replica/support.ts';
import { addSlowLists, SLOW_SCHEMA } from '../support/slow-schema.ts';
import { until } from '../support/until.ts';

/** Short for the test; the default is 60 s. */
const MAX_AGE_MS = 5_000;
/** Short: the slow review is abandoned at it, and what waits behind it cannot start in time (overload). */
const DEADLINE = '1s';
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

async function counter(probes: string, series: string): Promise<number> {
  const text = await (await fetch(`${probes}/metrics`, { signal: AbortSignal.timeout(2_000) })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
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
  // ... and tenant-b sends 30 reviews from another address: each waits behind the slow one, whose worker is
  // replaced at its 1 s deadline, and a review that cannot start in time to be answered within the webhook's
  // timeout is refused at once as overload (code 429), naming the flow.
  const answers: ReviewResponse[] = await Promise.all(Array.from({ length: REFUSED }, () => review(s.webhook, ca, podReview({ namespace: 'tenant-b' }), 60_000, '127.0.0.2')));
  let overloaded = 0;
  for (const r of answers) {
    if (r.allowed) continue;
    overloaded++;
    assert.equal(r.status?.code, 429, JSON.stringify(r));
    assert.match(r.status?.message ?? '', /^portal is overloaded: .*namespace tenant-b from 127\.0\.0\.2.*This is overload, not a policy verdict$/);
  }
  t.diagnostic(`${overloaded} of ${REFUSED} reviews refused as overload`);
  assert.ok(overloaded >= 1, 'the flood met the overload answer');
  // None of them is an internal error, and the replica is still ready.
  assert.equal(await counter(s.probes, 'portal_admission_errors_total{reason="internal"}'), 0);
  const ready = await readyz(s.probes);
  assert.equal(ready.status, 200, ready.text);

  // Stop before the held reviews end (their connections are reset: ignored above).
  s.child.kill('SIGKILL');
  await s.exited;
  await Promise.all(pending);
});
