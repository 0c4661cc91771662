// Issue 16 item 1, end to end: a rule whose single evaluation takes far
// longer than --evaluation-timeout, against a real `portal serve` (files
// mode), with no point inside one schema where a cooperative deadline could
// be checked. Since issue 31 a schema's work per object is bounded at apply
// (keywords × the values they apply to) and evaluation stops at the first
// error, so the slow case is the heaviest work the bounds still admit
// (test/support/slow-schema.ts), on a 4 MB review. The evaluation is abandoned at the deadline and
// its worker replaced; the rule's verdict is `error`, which its enforcement
// turns into a denial (Deny) or a warning (Warn); the other rules keep their
// verdicts. Meanwhile /healthz and a request of another namespace are
// answered: asserted by the order of events (they are answered while the
// slow request is in flight), not by timing thresholds.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { podReview, review, startServe, type ReviewResponse } from '../replica/support.ts';
import { addSlowLists, SLOW_SCHEMA } from '../support/slow-schema.ts';
import { until } from '../support/until.ts';

const DEADLINE_MS = 5_000;
const slowRule = (namespace: string, name: string, enforcement: 'Deny' | 'Warn'): string =>
  stringify({
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalRule',
    metadata: { name, namespace },
    spec: { enforcement, match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, validate: { message: 'Lists must hold distinct items.', schema: SLOW_SCHEMA } },
  });

const RULES = [
  slowRule('tenant-a', 'slow-unique', 'Deny'),
  slowRule('tenant-w', 'slow-unique', 'Warn'),
  `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata: {name: no-privileged}
spec:
  enforcement: Deny
  match: {kinds: [{apiGroups: [""], kinds: [Pod]}]}
  validate:
    message: Privileged containers are not allowed.
    schema:
      properties:
        spec:
          properties:
            containers:
              items:
                properties:
                  securityContext: {properties: {privileged: {const: false}}}
`,
].join('---\n');

/**
 * Eight lists of 256 items (a 4 MB review), each item a list of 1,000
 * elements whose first tells it apart: 32,640 pairs × 1,000 elements per
 * list, ten times: ~2.6·10^9 element comparisons, 14 s for one pass of the
 * ten on the loaded machine this was written on.
 */
function slowReview(namespace: string): Record<string, unknown> {
  const r = podReview({ namespace }) as { request: { object: { spec: Record<string, unknown> } } };
  addSlowLists(r.request.object.spec, 8);
  return r;
}

async function metric(probes: string, name: string): Promise<number> {
  const text = await (await fetch(`${probes}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.split(' ').pop()) : 0;
}

test('portal serve: a rule stuck past the evaluation deadline gives error; probes and other namespaces are answered meanwhile', { timeout: 300_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'portal-deadline-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'rules.yaml'), RULES);
  // Ready (startServe waits for /readyz 200) once the evaluation workers hold the rules.
  const s = await startServe(t, ['--policies', dir, '--evaluation-timeout', `${DEADLINE_MS}ms`, '--evaluation-workers', '2'], { POD_NAME: 'portal-deadline' }, { listenTimeoutMs: 120_000, ready: true });
  const ca = await readFile(s.caFile);

  const evaluation = async () =>
    ((await (await fetch(`${s.probes}/debug/vars`)).json()) as { admission: { evaluation: { abandoned: number; readyThreads: number } } }).admission.evaluation;

  for (const [namespace, enforcement] of [
    ['tenant-a', 'Deny'],
    ['tenant-w', 'Warn'],
  ] as const) {
    // Both workers hold the rules (after the first round: the replacement of the worker terminated in it).
    await until('two evaluation workers ready', 120_000, async () => ((await evaluation()).readyThreads === 2 ? true : undefined));
    const events: string[] = [];
    let slowAnswer: ReviewResponse | undefined;
    const slow = review(s.webhook, ca, slowReview(namespace), 120_000).then((r) => {
      slowAnswer = r;
      events.push('slow answered');
    });
    // The slow review is being evaluated (the server counts it in flight) ...
    await until('the slow review to be in flight', 60_000, async () => ((await metric(s.probes, 'portal_admission_in_flight')) >= 1 ? true : undefined));
    events.push('slow in flight');
    // ... and meanwhile the probes and another namespace's request are answered.
    const healthz = await fetch(`${s.probes}/healthz`);
    assert.equal(healthz.status, 200);
    events.push('healthz answered');
    const other = await review(s.webhook, ca, podReview({ namespace: 'tenant-b', privileged: true }), 60_000);
    events.push('other namespace answered');
    assert.equal(other.allowed, false);
    assert.match(other.status?.message ?? '', /^no-privileged: Privileged containers are not allowed\./);
    const compliant = await review(s.webhook, ca, podReview({ namespace: 'tenant-b' }), 60_000);
    events.push('other namespace answered');
    assert.equal(compliant.allowed, true);
    await slow;

    assert.deepEqual(events, ['slow in flight', 'healthz answered', 'other namespace answered', 'other namespace answered', 'slow answered'], `${enforcement}: order of events`);
    const expected = `rule ${namespace}/slow-unique could not be evaluated: the evaluation deadline (${DEADLINE_MS} ms) passed while it ran; it was abandoned`;
    if (enforcement === 'Deny') {
      assert.equal(slowAnswer?.allowed, false);
      assert.equal(slowAnswer?.status?.code, 403);
      // Only the slow rule errs: no-privileged was decided (it passed) and is not named.
      assert.equal(slowAnswer?.status?.message, expected);
    } else {
      assert.equal(slowAnswer?.allowed, true, 'a Warn rule that errs admits');
      assert.equal(slowAnswer?.warnings?.length, 1);
      // Warnings are clipped to 119 characters.
      assert.ok(expected.startsWith((slowAnswer?.warnings?.[0] ?? '').replace(/…$/, '')), slowAnswer?.warnings?.[0]);
    }
  }

  // Both stuck workers were replaced; the replacements answer with the same rules.
  assert.equal((await evaluation()).abandoned, 2);
  assert.equal(await metric(s.probes, 'portal_evaluation_abandoned_total'), 2);
  // On a small Pod the slow rule decides in time: a real verdict (fail), next to no-privileged's.
  const small = podReview({ namespace: 'tenant-a', privileged: true }) as { request: { object: { spec: Record<string, unknown> } } };
  small.request.object.spec['lists'] = [[[1], [1]]];
  const after = await review(s.webhook, ca, small, 60_000);
  assert.equal(after.allowed, false);
  assert.match(after.status?.message ?? '', /^denied by 2 rules: no-privileged: .*; tenant-a\/slow-unique: Lists must hold distinct items\. \[spec\.lists\[0\]: must NOT have duplicate items/);
  assert.equal((await review(s.webhook, ca, podReview({ namespace: 'tenant-b' }), 60_000)).allowed, true);
});
