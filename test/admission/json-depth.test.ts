// Issue 16: the nesting check that runs before JSON.parse must agree exactly
// with the depth of the value JSON.parse builds, whatever the strings hold
// (brackets, quotes, escaped backslashes), so a real review is never refused
// and a deep one always is.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { depthExceededAt, MAX_JSON_DEPTH } from '../../src/policy/review/json-depth.ts';

/** Depth of a parsed value, counted as the scan counts: each object or array is one level. */
function depthOf(v: unknown): number {
  if (v === null || typeof v !== 'object') return 0;
  const children = Array.isArray(v) ? v : Object.values(v as Record<string, unknown>);
  let deepest = 0;
  for (const c of children) deepest = Math.max(deepest, depthOf(c));
  return 1 + deepest;
}

const nested = (depth: number, open = '{"a":', close = '}'): string => `${open.repeat(depth)}1${close.repeat(depth)}`;

describe('depthExceededAt', () => {
  it('refuses one level past the bound, at the offset of the opening character; accepts the bound itself', () => {
    assert.equal(depthExceededAt(nested(MAX_JSON_DEPTH)), -1);
    assert.equal(depthExceededAt(nested(MAX_JSON_DEPTH, '[', ']')), -1);
    assert.equal(depthExceededAt(nested(MAX_JSON_DEPTH + 1)), MAX_JSON_DEPTH * 5);
    assert.equal(depthExceededAt(nested(MAX_JSON_DEPTH + 1, '[', ']')), MAX_JSON_DEPTH);
    assert.equal(depthExceededAt(nested(100_000)), MAX_JSON_DEPTH * 5);
  });

  it('does not count brackets inside strings, whatever the escapes around them', () => {
    const inString = JSON.stringify({ a: '['.repeat(5000), b: '\\"{{{{', c: '\\\\', d: '"[[["' });
    assert.equal(depthExceededAt(inString, 1), -1);
    assert.equal(depthExceededAt(JSON.stringify({ a: '\\', b: { c: [1] } }), 2), JSON.stringify({ a: '\\', b: { c: [1] } }).indexOf('['));
    // kubectl's last-applied annotation: a whole object as an escaped string.
    const applied = JSON.stringify({ metadata: { annotations: { last: JSON.stringify({ a: [[[[{ b: '"]' }]]]] }) } } });
    assert.equal(depthExceededAt(applied, 3), -1);
  });

  it('agrees with the depth of what JSON.parse builds, on random JSON', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 12 }), fc.integer({ min: 0, max: 14 }), (value, max) => {
        const text = JSON.stringify(value);
        const depth = depthOf(JSON.parse(text));
        const at = depthExceededAt(text, max);
        if (depth <= max) assert.equal(at, -1, `${text} has depth ${depth} <= ${max}`);
        else {
          assert.ok(at >= 0, `${text} has depth ${depth} > ${max}`);
          assert.ok(text[at] === '{' || text[at] === '[', `offset ${at} points at an opening bracket`);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('ends in one pass on malformed text (unterminated strings, stray closers)', () => {
    for (const bad of ['"' + '['.repeat(5000), ']]]]' + '['.repeat(500), '{"a":"\\', '['.repeat(3000) + '"']) {
      const at = depthExceededAt(bad, 1000);
      assert.equal(typeof at, 'number');
    }
  });
});
