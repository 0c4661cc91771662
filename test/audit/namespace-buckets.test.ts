/**
 * Events per namespace (issue 31): a tenant's flood of Events is cut to a
 * burst and then one per refill interval, counted and reported, while other
 * namespaces' Events pass.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { NamespaceBuckets } from '../../src/audit/namespace-buckets.ts';

describe('NamespaceBuckets', () => {
  it('a burst per namespace, then one per refill interval; other namespaces untouched; drops counted and reported once a minute', () => {
    let now = 0;
    const buckets = new NamespaceBuckets({ burst: 25, refillMs: 10_000, now: () => now });
    const reports: number[] = [];
    const report = (n: number): void => void reports.push(n);
    let passed = 0;
    for (let i = 0; i < 150; i++) if (buckets.take('tenant-a', report)) passed++;
    assert.equal(passed, 25);
    assert.equal(buckets.dropped, 125);
    assert.deepEqual(reports, [1], 'the first drop is reported at once, the rest wait a minute');
    assert.equal(buckets.take('tenant-b', report), true, "another namespace's Events pass");
    now += 10_000;
    assert.equal(buckets.take('tenant-a', report), true, 'one more after a refill interval');
    assert.equal(buckets.take('tenant-a', report), false);
    now += 60_000;
    assert.equal(buckets.take('tenant-a', report), true);
    for (let i = 0; i < 10; i++) buckets.take('tenant-a', report);
    assert.equal(reports.length, 2);
    assert.equal(reports[1], 124 + 1 + 1, 'the drops since the last report');
  });

  it('forgets namespaces whose bucket refilled, so the map holds only recent writers', () => {
    let now = 0;
    const buckets = new NamespaceBuckets({ burst: 2, refillMs: 1_000, now: () => now });
    for (let i = 0; i < 1_000; i++) buckets.take(`ns-${i}`);
    assert.equal(buckets.size, 1_000);
    now += 2_000;
    buckets.take('late');
    assert.equal(buckets.size, 1);
  });
});
