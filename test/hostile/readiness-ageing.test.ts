// Issue 16 item 3, end to end: a replica taken out of its Service by
// internal errors is ready again, with no traffic at all, once they are
// older than --readiness-error-max-age (docs/operations.md: "ready again at
// most this long after its last one").
//
// A real `portal serve` (files mode). Deep nesting is a 400 now, and a rule
// that fails is an `error` verdict; what a client can still turn into
// Portal's own errors is overload: with the only evaluation worker held by
// a slow review (the shipped require-run-as-nonroot schema on a Pod of 90k
// containers, superlinear; see eval-deadline.test.ts) and the pool's queue
// full (128 waiting), every further review is refused "overloaded": a
// denial with code 500, counted against readiness. Those take /readyz to
// 503. Then nothing more is sent, and nothing is answered either (the slow
// review still holds the worker, the queued ones wait behind it): /readyz
// reads 200 again, by age alone. Every wait polls for the event, with a bound.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse, stringify } from 'yaml';
import { ADMISSION_BODY_LIMIT } from '../../src/admission/limits.ts';
import { MIN_QUEUE } from '../../src/evaluation/pool-config.ts';
import { podReview, review, startServe, type ReviewResponse } from '../replica/support.ts';
import { until } from '../support/until.ts';

/** Short for the test; the default is 60 s. */
const MAX_AGE_MS = 5_000;
/** Long, so the slow review holds the worker while the test runs (the flag's maximum is 30 s). */
const DEADLINE = '30s';
/** Containers in the slow review: the schema is quadratic in them (issue 16: 50k took 6.7 s on a quiet machine, 100k 26 s). */
const SLOW_CONTAINERS = 90_000;
/** Refused reviews sent: more than the gate's minimum sample (20). */
const REFUSED = 30;

const NONROOT = parse(readFileSync(new URL('../../policies/pod-security/require-run-as-nonroot.yaml', import.meta.url), 'utf8')) as { spec: Record<string, unknown> };
const RULE = stringify({ apiVersion: 'portal.dev/v1alpha1', kind: 'PortalClusterRule', metadata: { name: 'nonroot' }, spec: { ...NONROOT.spec, enforcement: 'Deny' } });

function slowReview(): Record<string, unknown> {
  const r = podReview({ namespace: 'tenant-a' }) as { request: { object: { spec: { containers: Record<string, unknown>[] } } } };
  const containers = r.request.object.spec.containers;
  for (let i = 0; i < SLOW_CONTAINERS; i++) containers.push({ name: `c${i}`, image: 'busybox', securityContext: { runAsNonRoot: false } });
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

test('portal serve: a replica made unready by internal errors is ready again with no traffic, once they age out', { timeout: 300_000 }, async (t) => {
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

  // Everything sent before the errors stays unanswered until the end of the test: prove it, since an answer would
  // record an outcome and push the errors out of the window by traffic, not by age.
  let answeredMeanwhile = 0;
  const pending: Promise<unknown>[] = [];
  const hold = (body: unknown): void => {
    pending.push(review(s.webhook, ca, body, 240_000).then(() => answeredMeanwhile++, () => undefined));
  };

  // The slow review holds the only worker ...
  hold(slow);
  await until('the slow review to be in flight', 60_000, async () => ((await gauge(s.probes, 'portal_admission_in_flight')) >= 1 ? true : undefined));
  // ... and the queue fills behind it.
  for (let i = 0; i < MIN_QUEUE; i++) hold(podReview({ namespace: 'tenant-b' }));
  await until('the evaluation queue to be full', 120_000, async () => ((await gauge(s.probes, 'portal_admission_in_flight')) >= MIN_QUEUE + 1 ? true : undefined));

  // Every further review is refused: Portal's own error, a denial with code 500.
  const refused: ReviewResponse[] = await Promise.all(Array.from({ length: REFUSED }, () => review(s.webhook, ca, podReview({ namespace: 'tenant-c' }), 60_000)));
  for (const r of refused) {
    assert.equal(r.allowed, false);
    assert.equal(r.status?.code, 500);
    assert.match(r.status?.message ?? '', /portal is overloaded: 128 evaluations are already waiting/);
  }
  const unready = await until('/readyz to read 503', 30_000, async () => {
    const r = await readyz(s.probes);
    return r.status === 503 ? r : undefined;
  });
  assert.match(unready.text, /internal errors: \d+ of the last \d+ admission requests within 5s/);

  // No request from here on. Ready again by age alone, within the bound (plus slack for a loaded machine).
  await until('/readyz to read 200 again', MAX_AGE_MS + 30_000, async () => ((await readyz(s.probes)).status === 200 ? true : undefined));
  assert.equal(answeredMeanwhile, 0, 'no review was answered meanwhile: the window emptied by age, not by new outcomes');
  assert.ok((await gauge(s.probes, 'portal_admission_in_flight')) >= MIN_QUEUE + 1, 'the held reviews are still in flight');

  // Stop before the held reviews end (their connections are reset: ignored above).
  s.child.kill('SIGKILL');
  await s.exited;
  await Promise.all(pending);
});
