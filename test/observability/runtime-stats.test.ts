/** RuntimeStats: the main thread's GC pauses and event-loop figures, cumulative, for /debug/vars `runtime`. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RuntimeStats } from '../../src/observability/runtime-stats.ts';
import { until } from '../support/until.ts';

test('counts young-generation collections and samples the event-loop delay while running; stops with its signal', async () => {
  const stats = new RuntimeStats({ resolutionMs: 1 });
  const stop = new AbortController();
  const running = stats.start(stop.signal);
  // Garbage until a young collection has been reported (each round allocates far more than a semi-space).
  let keep = 0;
  await until('a minor GC to be observed', 20_000, () => {
    for (let i = 0; i < 200_000; i++) keep += { i, s: `x${i}` }.s.length;
    return (stats.snapshot().gc.minor?.count ?? 0) > 0;
  });
  assert.ok(keep > 0);
  const s = stats.snapshot();
  assert.ok(s.gc.minor!.totalMs > 0 && s.gc.minor!.maxMs <= s.gc.minor!.totalMs, JSON.stringify(s.gc));
  await until('event-loop delay samples', 5000, () => stats.snapshot().eventLoop.delay.samples > 0);
  const e = stats.snapshot().eventLoop;
  assert.ok(e.activeMs > 0 && e.idleMs >= 0, JSON.stringify(e));
  assert.ok(e.delay.maxMs >= e.delay.p50Ms, JSON.stringify(e));
  stop.abort();
  await running;
  // Stopped: what was counted stays readable.
  assert.ok(stats.snapshot().gc.minor!.count > 0);
});
