// Issue 31 item 1: memory is bounded per evaluation. The pool against real
// worker threads under V8 resourceLimits: a (rule, object) pair that
// exhausts its thread gives `error` naming the object, the thread is
// replaced, the other rules keep their verdicts, the evaluations that shared
// the batch are answered, and the pair errs at once afterwards without
// costing another thread. (Sequential: a second thread death right after a replacement is a case piscina handles badly, see the ADR.)
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { Registry } from 'prom-client';
import { EvaluationPool } from '../../src/evaluation/pool.ts';
import { PoisonPairs } from '../../src/evaluation/poison-pairs.ts';
import { threadMemoryFor } from '../../src/evaluation/thread-memory.ts';
import { RuleSet, type EvaluationInput, type KubeObject, type PortalRuleObject } from '../../src/policy/index.ts';
import { bigPod, HOG_LIMIT_MIB, hogRule } from './memory-hog.ts';

const logger = pino({ level: process.env.DEBUG_POOL ? 'debug' : 'silent' });
const pools: EvaluationPool[] = [];
after(() => Promise.all(pools.map((p) => p.close())));

function auditInput(obj: Record<string, unknown>, rv: string): EvaluationInput {
  const o = structuredClone(obj) as KubeObject & { metadata: Record<string, unknown> };
  o.metadata.uid = `uid-${String(o.metadata.name)}`;
  o.metadata.resourceVersion = rv;
  return { operation: 'AUDIT', kind: { group: '', version: 'v1', kind: 'Pod' }, namespace: String(o.metadata.namespace), name: String(o.metadata.name), object: o, oldObject: null, namespaceLabels: {} };
}

const fine = { ...hogRule('tenant-a', 'fine', 'Audit'), spec: { enforcement: 'Audit', match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, validate: { cel: { expressions: [{ expression: 'true' }] } } } };

describe('evaluation threads under resourceLimits', () => {
  it('the derivation: half the replica memory shared by the threads, 128 MiB to 1 GiB each; the flag wins', () => {
    assert.equal(threadMemoryFor(512, 3).maxOldGenerationSizeMb, 128);
    assert.equal(threadMemoryFor(4096, 3).maxOldGenerationSizeMb, 682);
    assert.equal(threadMemoryFor(65536, 9).maxOldGenerationSizeMb, 1024);
    assert.equal(threadMemoryFor(65536, 9, 48).maxOldGenerationSizeMb, 48);
  });

  it('a pair that exhausts its thread gives error naming the object, once; the rest keeps its verdicts', async () => {
    const rules = new RuleSet();
    rules.upsert(hogRule('tenant-a', 'hog', 'Audit') as unknown as PortalRuleObject);
    rules.upsert(fine as unknown as PortalRuleObject);
    const poison = new PoisonPairs();
    const registry = new Registry();
    const pool = new EvaluationPool(
      { name: 'audit', workers: 1, timeoutMs: 60_000, memory: { maxOldGenerationSizeMb: HOG_LIMIT_MIB, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 } },
      { rules, poison },
      { logger, registry },
    );
    pools.push(pool);
    await pool.whenReady();
    const big = auditInput(bigPod('tenant-a', 'big'), '7');
    const bigVerdicts = await pool.audit(big);
    const hog = bigVerdicts!.find((v) => v.rule === 'tenant-a/hog');
    assert.equal(hog?.result, 'error', hog?.message);
    assert.equal(hog?.error?.reason, 'OutOfMemory');
    assert.match(hog?.message ?? '', new RegExp(`rule tenant-a/hog could not be evaluated: evaluating it on Pod tenant-a/big \\(resourceVersion 7\\) exhausted the evaluation thread's memory \\(${HOG_LIMIT_MIB} MiB heap\\)`));
    assert.equal(bigVerdicts!.find((v) => v.rule === 'tenant-a/fine')?.result, 'pass');
    assert.equal(poison.size, 1);
    assert.equal(poison.pairs()[0]?.describe, 'Pod tenant-a/big (resourceVersion 7)');

    // Met again: error at once, no thread lost.
    const again = await pool.audit(auditInput(bigPod('tenant-a', 'big'), '7'));
    assert.equal(again.find((v) => v.rule === 'tenant-a/hog')?.error?.reason, 'OutOfMemory');
    assert.equal(pool.stats()['outOfMemory'], 1);
    const metric = await registry.getSingleMetricAsString('portal_evaluation_out_of_memory_total');
    assert.match(metric, /portal_evaluation_out_of_memory_total\{pool="audit"\} 1/);

    // Other objects are evaluated as before, on the replacement thread.
    const smalls = await Promise.all(Array.from({ length: 6 }, (_, i) => pool.audit(auditInput(bigPod('tenant-a', `small-${i}`, 3), '1'))));
    for (const v of smalls) assert.deepEqual(v.map((x) => x.result), ['pass', 'pass']);
  });
});
