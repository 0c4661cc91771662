// Issue 9, item 1, end to end: a real `portal serve --policies` process with
// rules using the patterns (`^.*a.*a.*a.*a.*b$` held a replica's
// event loop for 16 s on a 220-character value). Admission requests carrying
// 1 MiB annotations are answered (denied, naming the rule), and /healthz and
// /readyz answer while those requests are being evaluated.
//
// "While" is asserted by order of events, not by time: probes must complete
// before the last review of the load does.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { podReview, review, startServe } from '../replica/support.ts';

const RULES = `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata: {name: note-pattern}
spec:
  match: {kinds: [{apiGroups: [""], kinds: [Pod]}]}
  validate:
    message: annotations must match their patterns
    schema:
      properties:
        metadata:
          properties:
            annotations:
              properties:
                a: {type: string, pattern: '^.*a.*a.*a.*a.*b$'}
                b: {type: string, pattern: '^(a+)+$'}
`;

const VALUE = `${'a'.repeat(1024 * 1024 - 1)}x`;

function hostileReview(): Record<string, unknown> {
  const r = podReview() as { request: { object: { metadata: Record<string, unknown> } } };
  r.request.object.metadata.annotations = { a: VALUE, b: VALUE };
  return r;
}

test('portal serve: 1 MiB values against the issue 9 patterns are decided, and probes answer meanwhile', { timeout: 120_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'portal-regex-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'rules.yaml'), RULES);
  const s = await startServe(t, ['--policies', dir], { POD_NAME: 'portal-regex' }, { ready: true });
  const ca = await readFile(s.caFile);

  // The load: 4 clients, 8 reviews each, one after the other.
  let outstanding = true;
  const answers: { allowed: boolean; message: string }[] = [];
  const load = Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let i = 0; i < 8; i++) {
        const r = await review(s.webhook, ca, hostileReview(), 60_000);
        answers.push({ allowed: r.allowed, message: r.status?.message ?? '' });
      }
    }),
  ).finally(() => (outstanding = false));

  // Probes in a loop while the load runs; count those answered before it ended.
  const answeredDuringLoad: Record<string, number> = { '/healthz': 0, '/readyz': 0 };
  const probing = (async () => {
    while (outstanding) {
      for (const path of ['/healthz', '/readyz']) {
        const res = await fetch(`${s.probes}${path}`);
        await res.arrayBuffer();
        assert.equal(res.status, 200, `${path} while evaluating`);
        if (outstanding) answeredDuringLoad[path] = (answeredDuringLoad[path] ?? 0) + 1;
      }
    }
  })();
  await Promise.all([load, probing]);

  t.diagnostic(`probes answered during the load: ${JSON.stringify(answeredDuringLoad)}`);
  assert.equal(answers.length, 32);
  for (const a of answers) {
    assert.equal(a.allowed, false);
    assert.match(a.message, /note-pattern: annotations must match their patterns \[metadata\.annotations\.a: must match pattern/);
  }
  assert.ok((answeredDuringLoad['/healthz'] ?? 0) >= 1, '/healthz answered while reviews were being evaluated');
  assert.ok((answeredDuringLoad['/readyz'] ?? 0) >= 1, '/readyz answered while reviews were being evaluated');
  // A compliant value is allowed by the same rules.
  const ok = podReview() as { request: { object: { metadata: Record<string, unknown> } } };
  ok.request.object.metadata.annotations = { a: 'aaaab', b: 'aaaa' };
  assert.equal((await review(s.webhook, ca, ok)).allowed, true);
});
