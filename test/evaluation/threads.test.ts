// The evaluation pool's piscina load balancer (src/evaluation/threads.ts,
// pipelineBalancer): up to `perWorker` tasks per worker whether they carry
// an abort signal or not, so the batch the pool pipelines waits on the
// worker's own port rather than in piscina's queue on the main thread (with
// piscina's default balancer, a task with a signal goes only to an idle
// worker). Checked on its own and inside a real piscina pool.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Piscina } from 'piscina';
import { isTermination } from '../../src/evaluation/batch-items.ts';
import { pipelineBalancer } from '../../src/evaluation/threads.ts';
import { TaskAbort } from '../../src/evaluation/task-abort.ts';

type Balancer = ReturnType<typeof pipelineBalancer>;
type Workers = Parameters<Balancer>[1];

/** Worker interfaces as piscina hands them to a balancer: only the fields it reads. */
function workers(...usage: { n: number; terminating?: boolean; destroyed?: boolean }[]): Workers {
  return usage.map((u, id) => ({ id, currentUsage: u.n, terminating: u.terminating ?? false, destroyed: u.destroyed ?? false })) as unknown as Workers;
}
const pick = (b: Balancer, ws: Workers): number | undefined => (b({} as Parameters<Balancer>[0], ws) as { id: number } | null)?.id;

void describe('pipelineBalancer', () => {
  void it('gives a task to the least busy worker, up to perWorker tasks each, and to none past that', () => {
    const b = pipelineBalancer(2);
    assert.equal(pick(b, workers({ n: 1 }, { n: 0 }, { n: 1 })), 1);
    assert.equal(pick(b, workers({ n: 1 }, { n: 1 })), 0, 'a worker running one task takes a second');
    assert.equal(pick(b, workers({ n: 2 }, { n: 2 })), undefined, 'every worker holds perWorker tasks: the task waits in piscina');
    assert.equal(pick(pipelineBalancer(1), workers({ n: 1 })), undefined);
  });

  void it('counts a worker running one task with a signal (piscina reports Infinity) as one task, and skips dying workers', () => {
    const b = pipelineBalancer(2);
    assert.equal(pick(b, workers({ n: Number.POSITIVE_INFINITY })), 0);
    assert.equal(pick(b, workers({ n: 0, terminating: true }, { n: 0, destroyed: true }, { n: Number.POSITIVE_INFINITY })), 2);
    assert.equal(pick(b, workers({ n: 0, terminating: true })), undefined);
  });

  void it('in piscina: a second task with a signal waits on the busy worker’s port, and terminating the worker fails both', { timeout: 120_000 }, async () => {
    {
      // A task blocks until the test releases it (shared memory), then answers its number.
      const file = new URL('./blocking-worker.mjs', import.meta.url);
      const gate = new SharedArrayBuffer(4);
      const run = async (perWorker: number): Promise<{ queued: number; results: number[] }> => {
        const piscina = new Piscina({ filename: file.href, minThreads: 1, maxThreads: 1, concurrentTasksPerWorker: perWorker, loadBalancer: pipelineBalancer(perWorker) });
        try {
          Atomics.store(new Int32Array(gate), 0, 0);
          const tasks = [1, 2].map((n) => piscina.run({ n, gate }, { signal: new TaskAbort() as unknown as AbortSignal }) as Promise<number>);
          // Distributed synchronously by run(): piscina counts its initial worker ready at once.
          const queued = piscina.queueSize;
          const g = new Int32Array(gate);
          Atomics.store(g, 0, 1);
          Atomics.notify(g, 0);
          return { queued, results: await Promise.all(tasks) };
        } finally {
          await piscina.destroy();
        }
      };
      assert.deepEqual(await run(2), { queued: 0, results: [1, 2] }, 'pipelined: nothing waits in piscina’s queue');
      assert.deepEqual(await run(1), { queued: 1, results: [1, 2] }, 'one per worker: the second waits in the queue');

      // The batcher relies on this (batcher.ts, #finished): aborting the running task terminates its worker, and
      // the task waiting on that worker's port fails with piscina's termination error, so its items are sent again.
      const piscina = new Piscina({ filename: file.href, minThreads: 1, maxThreads: 1, concurrentTasksPerWorker: 2, loadBalancer: pipelineBalancer(2) });
      try {
        Atomics.store(new Int32Array(gate), 0, 0);
        const running = new TaskAbort();
        const first = piscina.run({ n: 1, gate }, { signal: running as unknown as AbortSignal });
        const second = piscina.run({ n: 2, gate }, { signal: new TaskAbort() as unknown as AbortSignal });
        assert.equal(piscina.queueSize, 0);
        running.abort();
        await assert.rejects(first, { name: 'AbortError' });
        await assert.rejects(second, (err: unknown) => isTermination(err));
      } finally {
        await piscina.destroy();
      }
    }
  });
});
