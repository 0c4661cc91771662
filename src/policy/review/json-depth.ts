/**
 * A nesting-depth check on JSON text, run before JSON.parse so that input
 * Portal cannot evaluate is refused as malformed (400) instead of failing
 * later, deep inside the evaluation, as an internal error.
 *
 * Why before parsing: V8's JSON.parse itself is iterative and accepts any
 * depth (a 100,000-level review parses in ~140 ms), but what runs on the
 * parsed object afterwards recurses on it (deep equality in CEL `==`,
 * JSON Schema `const`/`enum`/`uniqueItems`, structured clone, JSON.stringify)
 * and runs out of stack. Issue 16: 100 such reviews became 100 internal
 * errors and took the replica out of its Service. The scan costs one pass
 * over the text with strings skipped by `indexOf`, and refuses before the
 * parse allocates anything.
 */

/**
 * The deepest nesting (objects and arrays, counted together) Portal parses.
 *
 * Derivation: real objects nest a few dozen levels at most (the deepest are
 * CRDs' openAPIV3Schema documents); an AdmissionReview adds 3 (review →
 * request → object). On the other side, Portal's evaluator ran out of stack
 * at about 5,500 levels (measured: a CEL `object.spec == oldObject.spec`
 * rule on a Node main thread's default ~1 MB stack). 1,000 leaves a factor
 * of five below that for heavier frames and worker threads, and is still
 * far above any object a user writes. The API server's own bound (10,000,
 * k8s.io/apimachinery util/json) is above what Portal can evaluate, so an
 * object between the two is refused here with this message — denied, as
 * every webhook failure is under failurePolicy Fail.
 */
export const MAX_JSON_DEPTH = 1000;

const QUOTE = 34; // "
const BACKSLASH = 92; // \
const OPEN_BRACE = 123; // {
const OPEN_BRACKET = 91; // [
const CLOSE_BRACE = 125; // }
const CLOSE_BRACKET = 93; // ]

/**
 * The character offset at which `text` first nests deeper than `max`
 * levels, or -1 when it never does. Exact for valid JSON; on malformed
 * text the answer does not matter (JSON.parse refuses it anyway), and the
 * scan still ends in one pass.
 */
export function depthExceededAt(text: string, max: number = MAX_JSON_DEPTH): number {
  // Going deeper than `max` takes more than `max` opening characters, in
  // strings or not. Counting them with indexOf (a vectorised search) is
  // several times cheaper than the exact scan below, and real reviews
  // (even 8 MiB ones) hold far fewer: the exact scan is for hostile input.
  if (!moreOpenersThan(text, max)) return -1;
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // Skip the string: jump to the next quote not escaped by an odd run of backslashes.
      let j = i;
      for (;;) {
        j = text.indexOf('"', j + 1);
        if (j < 0) return -1; // unterminated: malformed, JSON.parse says so
        let k = j - 1;
        while (text.charCodeAt(k) === BACKSLASH) k--;
        if (((j - 1 - k) & 1) === 0) break;
      }
      i = j;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > max) return i;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return -1;
}

function moreOpenersThan(text: string, max: number): boolean {
  if (text.length <= max) return false;
  let n = 0;
  for (let i = text.indexOf('{'); i >= 0; i = text.indexOf('{', i + 1)) if (++n > max) return true;
  for (let i = text.indexOf('['); i >= 0; i = text.indexOf('[', i + 1)) if (++n > max) return true;
  return false;
}
