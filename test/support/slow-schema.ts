/**
 * The slowest schema work the issue-31 bounds still admit, for tests that
 * need one evaluation to outlast a deadline or a grace period with no point
 * inside one schema where a cooperative check could run: `uniqueItems` beside
 * `maxItems: 256` compares every pair of items, each comparison walking the
 * items, ten times over through `$ref`s. On lists whose items differ only in
 * their first element (the comparison walks from the end) that is seconds of
 * work per 4 MB of lists (test/hostile/eval-deadline.test.ts measures it).
 */
export const SLOW_SCHEMA = {
  $defs: { unique: { maxItems: 256, uniqueItems: true } },
  properties: { spec: { properties: { lists: { items: { allOf: Array.from({ length: 10 }, () => ({ $ref: '#/$defs/unique' })) } } } } },
};

/** Adds `lists` lists of 256 such items (about 0.5 MB each) to a Pod spec. */
export function addSlowLists(spec: Record<string, unknown>, lists = 8): void {
  const rest = Array<number>(1_000).fill(0);
  spec['lists'] = Array.from({ length: lists }, () => Array.from({ length: 256 }, (_, i) => [i, ...rest]));
}
