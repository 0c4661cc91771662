/**
 * source-tag.ts: the line that keeps generated sources of different
 * expressions apart holds a number only, whatever the texts (no policy text
 * enters generated code), and tells texts apart, including how they are split.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sourceTag } from '../../../src/policy/cel/source-tag.ts';

void describe('sourceTag', () => {
  void it('is a comment holding a number only, whatever the texts', () => {
    for (const texts of [[], [''], ['*/ }); process.exit(1); //'], ['\n\u2028"\'`${x}`'], ['a'.repeat(10_000)]]) {
      assert.match(sourceTag(texts), /^\/\/ \d+$/, JSON.stringify(texts).slice(0, 40));
    }
  });

  void it('tells different texts and different splits apart, and is stable', () => {
    const tags = [[], [''], ['a'], ['b'], ['ab', 'c'], ['a', 'bc'], ['abc'], ["object.kind == 'Pod'"], ["object.kind == 'pod'"]].map(sourceTag);
    assert.equal(new Set(tags).size, tags.length, tags.join(', '));
    assert.equal(sourceTag(['x == 1', 'y']), sourceTag(['x == 1', 'y']));
  });
});
