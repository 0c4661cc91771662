/**
 * What every match of a pattern must contain: a literal run of characters
 * that a pattern cannot match without (`@` in `@[A-Za-z]…:[0-9a-f]{32,}$`,
 * `kubernetes.io/` in `^[a-z]+\.kubernetes\.io/`). re2.ts answers "no match"
 * with one `includes` when the input lacks it, instead of a run of re2js
 * (a fixed cost of ~0.3 µs per call, several calls per container and
 * request with the shipped image-tag rule). The idea of RE2's prefilters
 * (the atoms every match needs), in the conservative form below.
 *
 * Only the top level of the pattern is read: a group or a class is a
 * non-literal atom (its content is not looked into), and a pattern with a
 * top-level alternation, a flag group or an escape this reader does not
 * know has no required run (undefined): the prefilter is then not used, so
 * an unknown construct can cost speed, never a wrong answer.
 */

const WORD = /[A-Za-z0-9]/;
const REPEAT = /^\{(\d+)(?:,(\d*))?\}/;

/** The longest literal run every match of `pattern` (RE2 syntax, no flags) contains; undefined when none is known. */
export function requiredSubstring(pattern: string): string | undefined {
  // Flags change what a literal matches ((?i) ignores case); groups are skipped, but a flag group is not a group.
  if (/\(\?[A-Za-z-]*\)/.test(pattern)) return undefined;
  let best = '';
  let run = '';
  const flush = (): void => {
    if (run.length > best.length) best = run;
    run = '';
  };
  let i = 0;
  while (i < pattern.length) {
    const atom = readAtom(pattern, i);
    if (atom === undefined) return undefined;
    let end = atom.end;
    // The atom's quantifier: optional (?, *, {0,…}) drops it; repeated (+, {n,…}) keeps one occurrence and ends the run.
    let optional = false;
    let repeated = false;
    const q = pattern[end];
    if (q === '*' || q === '?') {
      optional = true;
      end++;
    } else if (q === '+') {
      repeated = true;
      end++;
    } else if (q === '{') {
      const m = REPEAT.exec(pattern.slice(end));
      if (!m) return undefined;
      if (Number(m[1]) === 0) optional = true;
      else repeated = true;
      end += m[0].length;
    }
    if (end > atom.end && pattern[end] === '?') end++; // non-greedy
    if (atom.literal === undefined || optional) flush();
    else {
      run += atom.literal;
      if (repeated) flush();
    }
    i = end;
  }
  flush();
  return best === '' ? undefined : best;
}

/** The atom at `i`: its literal character (undefined: not a literal) and where it ends; undefined when the reader gives up. */
function readAtom(p: string, i: number): { literal: string | undefined; end: number } | undefined {
  const c = p[i] as string;
  switch (c) {
    case '|':
    case ')':
    case '*':
    case '+':
    case '?':
    case '{':
      return undefined; // alternation, or a construct this reader leaves to RE2
    case '\\': {
      const d = p[i + 1];
      if (d === undefined || d === 'Q' || d === 'x' || d === 'p' || d === 'P') return undefined;
      // \d, \w, \b, \A…: a class or an assertion; any other escaped character is itself.
      return { literal: WORD.test(d) ? undefined : d, end: i + 2 };
    }
    case '[': {
      const end = classEnd(p, i);
      return end < 0 ? undefined : { literal: undefined, end };
    }
    case '(': {
      const end = groupEnd(p, i);
      return end < 0 ? undefined : { literal: undefined, end };
    }
    case '.':
    case '^':
    case '$':
      return { literal: undefined, end: i + 1 };
    default: {
      const code = c.charCodeAt(0);
      // Half of a surrogate pair: RE2 matches code points, so it is not a literal of its own.
      return { literal: code >= 0xd800 && code <= 0xdfff ? undefined : c, end: i + 1 };
    }
  }
}

/** The index after the class that starts at `i` (`[`), or -1. */
function classEnd(p: string, i: number): number {
  let j = i + 1;
  if (p[j] === '^') j++;
  if (p[j] === ']') j++; // a leading ] is a member
  while (j < p.length) {
    const c = p[j];
    if (c === '\\') j += 2;
    else if (c === '[' && p[j + 1] === ':') {
      const close = p.indexOf(':]', j + 2);
      if (close < 0) return -1;
      j = close + 2;
    } else if (c === ']') return j + 1;
    else j++;
  }
  return -1;
}

/** The index after the group that starts at `i` (`(`), or -1. */
function groupEnd(p: string, i: number): number {
  let depth = 0;
  let j = i;
  while (j < p.length) {
    const c = p[j];
    if (c === '\\') j += 2;
    else if (c === '[') {
      j = classEnd(p, j);
      if (j < 0) return -1;
    } else {
      if (c === '(') depth++;
      else if (c === ')' && --depth === 0) return j + 1;
      j++;
    }
  }
  return -1;
}
