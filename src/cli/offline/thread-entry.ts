/**
 * The evaluation thread of `portal test` (evaluation-thread.ts): builds an
 * OfflineEvaluator from a job's policies, then evaluates the items it is
 * sent one at a time, writing the item and the rule it is on in the
 * progress slot before each.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ProgressSlotWriter } from '../../evaluation/progress.ts';
import { OfflineEvaluator } from './evaluator.ts';
import type { ThreadAnswer, ThreadData, ToThread } from './evaluation-thread.ts';

const data = workerData as ThreadData;
const progress = new ProgressSlotWriter(data.progress, 0);
const port = parentPort!;
const onRule = (key: string): void => progress.key(key);
let evaluator: OfflineEvaluator | undefined;

port.on('message', (m: ToThread) => {
  if (m.type === 'setup') {
    evaluator = undefined;
    const { policies, namespaces, params, judging } = m.setup;
    evaluator = new OfflineEvaluator(policies, namespaces, params, judging);
    port.postMessage({ type: 'ready', job: m.job } satisfies ThreadAnswer);
    return;
  }
  progress.item(m.job, m.index);
  const poisoned = new Map(m.poisoned);
  const evaluation = evaluator!.evaluate(m.item.resource, m.item.request, { onRule, poisoned: (key) => poisoned.get(key) });
  port.postMessage({ type: 'result', job: m.job, index: m.index, evaluation } satisfies ThreadAnswer);
});
