// A shutdown that outlives --shutdown-grace-period, end to end against a real
// `portal serve` (files mode): a review is in flight whose evaluation takes
// far longer than the grace period (test/support/slow-schema.ts: the slowest
// work the schema bounds admit, as in eval-deadline.test.ts) under the longest
// --evaluation-timeout (30 s), and the replica gets SIGTERM. The webhook
// server's close waits for that request, so the Manager's own bound is what
// fires: it abandons the webhook group, the run returns exit code 1 saying
// why, and the CLI's exit net exits although the request and its worker
// still hold the process. What an operator sees is asserted: the exit code,
// the log lines in order (naming the stuck group), no stack trace, and that
// the process was gone before the evaluation ended (the review never got an
// answer: even its deadline would have answered it). No timing thresholds.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { podReview, review, startServe } from '../replica/support.ts';
import { addSlowLists, SLOW_SCHEMA } from '../support/slow-schema.ts';
import { until } from '../support/until.ts';

/** Seconds of uniqueItems work on a 4 MB review, under the 8 MiB body limit. */
const RULE = stringify({
  apiVersion: 'portal.dev/v1alpha1',
  kind: 'PortalRule',
  metadata: { name: 'slow-unique', namespace: 'tenant-a' },
  spec: { enforcement: 'Deny', match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, validate: { message: 'Lists must hold distinct items.', schema: SLOW_SCHEMA } },
});

function slowReview(): Record<string, unknown> {
  const r = podReview({ namespace: 'tenant-a' }) as { request: { object: { spec: Record<string, unknown> } } };
  addSlowLists(r.request.object.spec);
  return r;
}

async function metric(probes: string, name: string): Promise<number> {
  const text = await (await fetch(`${probes}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.split(' ').pop()) : 0;
}

interface LogLine {
  component?: string;
  msg?: string;
  group?: string;
  graceMs?: number;
}

test('portal serve: a shutdown that outlives the grace period exits 1 and says which group it abandoned, before the evaluation in flight ends', { timeout: 180_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'portal-grace-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'rules.yaml'), RULE);
  const s = await startServe(
    t,
    ['--policies', dir, '--evaluation-timeout', '30s', '--shutdown-grace-period', '1s', '--evaluation-workers', '1'],
    { POD_NAME: 'portal-grace' },
    { listenTimeoutMs: 120_000, ready: true },
  );
  const ca = await readFile(s.caFile);

  const slow = review(s.webhook, ca, slowReview(), 120_000).then(
    (answer) => `answered: ${JSON.stringify(answer)}`,
    (err: unknown) => `no answer: ${(err as Error).message}`,
  );
  // The slow review is being evaluated: the webhook's close will wait for it.
  await until('the slow review to be in flight', 60_000, async () => ((await metric(s.probes, 'portal_admission_in_flight')) >= 1 ? true : undefined));
  const signalledAt = s.lines.length;
  s.child.kill('SIGTERM');
  const code = await s.exited;

  // Gone before the evaluation ended: it would have answered the review (a denial, at its 30 s deadline at the latest).
  assert.match(await slow, /^no answer: /);
  assert.equal(code, 1, s.stderr());
  assert.equal(s.stderr(), '', 'no stack trace, nothing on stderr');
  const after = s.lines.slice(signalledAt).map((l) => JSON.parse(l) as LogLine).filter((l) => l.component === 'serve' || l.component === 'manager');
  assert.deepEqual(
    after.map((l) => `${l.component}: ${l.msg}`),
    [
      'serve: shutting down',
      'manager: shutting down',
      'manager: graceful shutdown timed out; abandoning runnables still running',
      'serve: shutdown outlived the grace period: exiting without waiting for the work still running',
    ],
    s.lines.join('\n'),
  );
  // The group whose close waited for the request in flight, and the grace period that passed.
  assert.equal(after[2]?.group, 'webhook');
  assert.equal(after[2]?.graceMs, 1000);
  assert.equal(after[3]?.graceMs, 1000);
});
