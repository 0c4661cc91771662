/**
 * A line that tells apart the sources of generated functions built for
 * different expressions (composition-check.ts, vap/pass-check.ts).
 *
 * Why: V8 caches a `new Function` by its source text, and with the compiled
 * function it keeps the feedback cell, so every function generated from the
 * same text shares one set of type feedback. The checks of two compositions
 * of one validation each have the same text (only their expressions,
 * passed by reference, differ): the call site `C0(ctx, m)` then sees every
 * composition's expression, goes megamorphic, and V8 inlines none of them.
 * A comment holding a hash of the expressions' texts keeps the sources
 * apart. Numbers only: no text of a policy enters the source. A collision
 * only shares feedback again.
 *
 * Pure: no I/O.
 */

/** `// <FNV-1a hash of the texts>`: a comment line for a generated source. */
export function sourceTag(texts: readonly string[]): string {
  let h = 0x811c9dc5;
  for (const text of texts) {
    for (let i = 0; i < text.length; i++) {
      h ^= text.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
    // A separator, so that ["ab", "c"] and ["a", "bc"] differ.
    h = Math.imul(h ^ 0xff, 0x01000193);
  }
  return `// ${h >>> 0}`;
}
