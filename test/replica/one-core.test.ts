// A replica pinned to one core (taskset, as a cpuset would) sends one batch
// per evaluation worker instead of two (pool-config.ts, pipelineFor): on one
// CPU the worker and the main thread never run together, so a second,
// waiting batch only halves the batches. What must not change: every review
// answered with its own verdict (the deadline and taking back a slow batch
// with one batch per worker: test/evaluation/pool.test.ts).
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { debugVars, podReview, readCa, review, startServe } from './support.ts';

/** `/debug/vars` → admission.evaluation.batchesPerWorker. */
async function batchesPerWorker(probes: string): Promise<unknown> {
  const vars = (await debugVars(probes, 5000)) as { admission?: { evaluation?: { batchesPerWorker?: number } } } | undefined;
  return vars?.admission?.evaluation?.batchesPerWorker;
}

const rules = [
  {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalClusterRule',
    metadata: { name: 'no-privileged' },
    spec: {
      match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] },
      validate: { message: 'privileged containers are not allowed', cel: { expressions: [{ expression: 'object.spec.containers.all(c, !c.?securityContext.?privileged.orValue(false))' }] } },
    },
  },
];

for (const [cpus, batches] of [['0', 1], ['0,1', 2]] as const) {
  test(`a replica on CPUs ${cpus} sends ${batches} batch(es) per worker and answers every review with its own verdict`, { timeout: 120_000 }, async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'portal-one-core-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'rules.yaml'), rules.map((r) => stringify(r)).join('---\n'));
    const serve = await startServe(t, ['--policies', dir, '--evaluation-workers', '1'], {}, { ready: true, launcher: ['taskset', '-c', cpus] });
    assert.equal(await batchesPerWorker(serve.probes), batches);
    const ca = readCa(serve.caFile);
    // Many at once, so that batches form; each answer must be its own review's.
    const privileged = Array.from({ length: 64 }, (_, i) => i % 3 === 0);
    const answers = await Promise.all(privileged.map((p) => review(serve.webhook, ca, podReview({ privileged: p }))));
    answers.forEach((a, i) => {
      assert.equal(a.allowed, !privileged[i], `review ${i}: ${JSON.stringify(a)}`);
      if (privileged[i]) assert.match(a.status?.message ?? '', /no-privileged: privileged containers are not allowed/);
    });
  });
}
