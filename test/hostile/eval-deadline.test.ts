// Issue 16 item 1, end to end: a rule whose single evaluation takes far
// longer than --evaluation-timeout, against a real `portal serve` (files
// mode): the shipped require-run-as-nonroot schema on a Pod with 60k
// containers (superlinear; the issue measured 6.7 s on 50k), with no point
// inside one schema where a cooperative deadline could be checked. The evaluation is abandoned at the
// deadline and its worker replaced; the rule's verdict is `error`, which its
// enforcement turns into a denial (Deny) or a warning (Warn); the other rules
// keep their verdicts. Meanwhile /healthz and a request of another namespace
// are answered: asserted by the order of events (they are answered while the
// slow request is in flight), not by timing thresholds.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse, stringify } from 'yaml';
import { podReview, review, startServe, type ReviewResponse } from '../replica/support.ts';
import { until } from '../support/until.ts';

const DEADLINE_MS = 5_000;
/**
 * Containers in the slow review. The schema is quadratic in them: 20k took
 * over 20 s on the loaded machine this was written on, but under 5 s once it
 * was quieter (load 8), so the case was not slow; 60k is 9× that work
 * (issue 16: 50k took 6.7 s on a quiet machine) and still a 4 MB review,
 * under the 8 MiB body limit.
 */
const SLOW_CONTAINERS = 60_000;

/**
 * The shipped require-run-as-nonroot schema, superlinear in the number of
 * containers (issue 16: 50k containers 6.7 s; 20k take over 20 s here), as
 * a tenant's PortalRule. (`uniqueItems` on 25k entries, the other
 * case, is now refused at compile without maxItems.)
 */
const NONROOT = parse(readFileSync(new URL('../../policies/pod-security/require-run-as-nonroot.yaml', import.meta.url), 'utf8')) as { spec: Record<string, unknown> };
const slowRule = (namespace: string, name: string, enforcement: 'Deny' | 'Warn'): string =>
  stringify({ apiVersion: 'portal.dev/v1alpha1', kind: 'PortalRule', metadata: { name, namespace }, spec: { ...NONROOT.spec, enforcement } });

const RULES = [
  slowRule('tenant-a', 'slow-nonroot', 'Deny'),
  slowRule('tenant-w', 'slow-nonroot', 'Warn'),
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

function slowReview(namespace: string): Record<string, unknown> {
  const r = podReview({ namespace }) as { request: { object: { spec: { containers: Record<string, unknown>[] } } } };
  const containers = r.request.object.spec.containers;
  for (let i = 0; i < SLOW_CONTAINERS; i++) containers.push({ name: `c${i}`, image: 'busybox', securityContext: { runAsNonRoot: false } });
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
    const expected = `rule ${namespace}/slow-nonroot could not be evaluated: the evaluation deadline (${DEADLINE_MS} ms) passed while it ran; it was abandoned`;
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
  const after = await review(s.webhook, ca, podReview({ namespace: 'tenant-a', privileged: true }), 60_000);
  assert.equal(after.allowed, false);
  assert.match(after.status?.message ?? '', /^denied by 2 rules: no-privileged: .*; tenant-a\/slow-nonroot: Containers must run as non-root/);
  assert.equal((await review(s.webhook, ca, podReview({ namespace: 'tenant-b' }), 60_000)).allowed, true);
});
