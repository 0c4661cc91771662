// Closing the evaluation pool releases what it holds, also when a worker
// was just terminated at the deadline (its replacement then starting): no
// MessagePort, worker or channel left open that would keep the process
// alive after `portal serve` has shut down.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import pino from 'pino';
import { Registry } from 'prom-client';
import { EvaluationPool } from '../../src/evaluation/pool.ts';
import { RuleSet } from '../../src/policy/index.ts';
import { input } from '../policy/support.ts';
import { decideByReview, hugePod, slowRule } from './support.ts';

/** The handles of ports and threads the pool could leave open (the runner's own pipes, timers and file reads are not counted). */
const POOL_HANDLES = new Set(['MessagePort', 'Worker', 'BroadcastChannel', 'MessagePortWrap', 'WorkerWrap']);
function poolHandles(): string[] {
  return process.getActiveResourcesInfo().filter((r) => POOL_HANDLES.has(r) || /port|worker|channel/i.test(r)).sort();
}

async function released(before: string[]): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (JSON.stringify(poolHandles()) !== JSON.stringify(before) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(poolHandles(), before, `left open after close: ${JSON.stringify(process.getActiveResourcesInfo())}`);
}

function newPool(): EvaluationPool {
  const rules = new RuleSet();
  rules.upsert(slowRule('slow-nonroot', 'Warn'));
  return new EvaluationPool({ name: 'test', workers: 1, timeoutMs: 1000 }, { rules }, { logger: pino({ level: 'silent' }), registry: new Registry() });
}

void it('closing the pool right after an abandoned evaluation releases its ports and threads', { timeout: 300_000 }, async () => {
  const before = poolHandles();
  const pool = newPool();
  await pool.whenReady();
  assert.ok(poolHandles().length > before.length, `the pool holds ports while open: ${JSON.stringify(process.getActiveResourcesInfo())}`);
  const d = await decideByReview(pool, input(hugePod(false), { namespace: 'default', name: 'web' }));
  assert.match(d.warnings.join('\n'), /rule slow-nonroot could not be evaluated: the evaluation deadline \(1000 ms\) passed/);
  // One attempt or two: on a busy machine the first one can use up the request's time, and no retry is made.
  assert.ok(Number(pool.stats().abandoned) >= 1, `an attempt was abandoned: ${JSON.stringify(pool.stats())}`);
  // The replacement of the terminated worker is starting now.
  await pool.close();
  await released(before);
});

void it('closing the pool the moment a worker is terminated at the deadline (its retry in flight) releases them too', { timeout: 300_000 }, async () => {
  const before = poolHandles();
  const pool = newPool();
  await pool.whenReady();
  const answer = decideByReview(pool, input(hugePod(false), { namespace: 'default', name: 'web' }));
  while (pool.stats().abandoned === 0) await new Promise((r) => setTimeout(r, 5));
  const closed = pool.close();
  // The retry was submitted before the close: it is still answered (abandoned again, or refused as closed), never left pending.
  await answer.then(
    (d) => assert.match(d.warnings.join('\n'), /could not be evaluated/),
    (err: Error & { code?: string }) => assert.equal(err.code, 'PORTAL_CLOSED'),
  );
  await closed;
  await released(before);
});
