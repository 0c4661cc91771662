// The denial log line's rate limit: what the token bucket refuses is counted
// and said in one summary line (issue 33, Deliver 3).
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { Counter, Registry } from 'prom-client';
import { DenialLog } from '../../src/admission/denial-log.ts';
import { TokenBucket } from '../../src/kube/rate-limiter.ts';
import type { Outcome } from '../../src/policy/review/answer.ts';

function denied(i: number): Outcome {
  return {
    httpStatus: 200,
    apiVersion: 'admission.k8s.io/v1',
    decision: 'deny',
    deniedBy: ['rule-a', 'team/rule-b'],
    request: { uid: `u-${i}`, operation: 'CREATE', kind: { group: '', version: 'v1', kind: 'Pod' }, namespace: 'team', name: `p-${i}`, user: 'alice' },
    response: { uid: `u-${i}`, allowed: false, status: { code: 403, message: 'no' } },
  };
}

test('denials beyond the bucket are counted and summed up in one warn line', async () => {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, new Writable({ write: (chunk: Buffer, _e, cb) => (lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>), cb()) }));
  let now = 0;
  const registry = new Registry();
  const notLogged = new Counter({ name: 'n_total', help: 'h', registers: [registry] });
  const d = new DenialLog({ log, pacer: new TokenBucket({ qps: 1, burst: 3, now: () => now }), notLogged, summaryMs: 60_000 });
  for (let i = 0; i < 10; i++) d.denied(denied(i));
  d.flush();
  await new Promise((resolve) => setImmediate(resolve));
  const info = lines.filter((l) => l.msg === 'admission request denied');
  assert.equal(info.length, 3);
  assert.deepEqual(info[0], { ...info[0], level: 30, uid: 'u-0', operation: 'CREATE', kind: 'Pod', namespace: 'team', name: 'p-0', user: 'alice', rules: ['rule-a', 'team/rule-b'] });
  assert.equal((await notLogged.get()).values[0]?.value, 7);
  const summary = lines.filter((l) => l.level === 40);
  assert.equal(summary.length, 1);
  assert.equal(summary[0]!.count, 7);
  assert.match(String(summary[0]!.msg), /^7 denied requests were not logged \(rate limit\)/);
  // The bucket refills: a denial a second later is logged again.
  now += 1000;
  d.denied(denied(10));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(lines.filter((l) => l.msg === 'admission request denied').length, 4);
});
