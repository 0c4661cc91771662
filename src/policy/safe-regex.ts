/**
 * A static check that keeps rule schemas' regular expressions (`pattern`,
 * `patternProperties`) free of catastrophic backtracking.
 *
 * Portal would rather use RE2 (linear time), but no native addon can be
 * installed here, so patterns run on V8's backtracking engine and are held to
 * a syntax subset whose worst case stays small:
 * - no backreferences and no lookaround (RE2 has neither);
 * - no repetition inside repetition (`(a+)+`, `(a{1,3})*`, `(a*){2}`): the
 *   classic exponential case (star height > 1); only bounded inside bounded
 *   (`(\.\d{1,3}){3}`) is allowed;
 * - no repeated alternation whose branches can start with the same character,
 *   or can be empty (`(a|a)*`, `(a|ab)+`, `(a|)*`);
 * - no two unbounded repeats side by side over overlapping characters
 *   (`\d*\d*`, `.*.*`): polynomial blow-up.
 * The check is conservative (it may reject a safe pattern) and approximates
 * character classes (a negated class counts as "any character").
 */

/** Longest accepted pattern. 1 KiB is several times the longest pattern a
 * realistic policy needs (an image-reference regex is ~300 characters) and
 * bounds the parser's and V8's compile work per pattern. */
export const MAX_PATTERN_LENGTH = 1024;
/** Largest {n,m} bound: beyond this V8 expands repetition into huge programs. */
const MAX_REPEAT_BOUND = 1000;
const MAX_CODE_POINT = 0x10ffff;

type Range = readonly [number, number];
type Node =
  | { t: 'chars'; set: Range[] }
  | { t: 'anchor' }
  | { t: 'seq'; items: Node[] }
  | { t: 'alt'; alts: Node[] }
  | { t: 'repeat'; node: Node; min: number; max: number };

const ANY: Range[] = [[0, MAX_CODE_POINT]];
const DIGIT: Range[] = [[48, 57]];
const WORD: Range[] = [[48, 57], [65, 90], [95, 95], [97, 122]];
const SPACE: Range[] = [[9, 13], [32, 32], [160, 160], [0x1680, 0x1680], [0x2000, 0x200a], [0x2028, 0x2029], [0x202f, 0x202f], [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff]];

class Unsafe extends Error {}

class Parser {
  private i = 0;
  constructor(private readonly p: string) {}

  parse(): Node {
    const node = this.alt();
    if (this.i < this.p.length) throw new Unsafe(`unbalanced ")" at offset ${this.i}`);
    return node;
  }

  private alt(): Node {
    const alts = [this.seq()];
    while (this.p[this.i] === '|') {
      this.i++;
      alts.push(this.seq());
    }
    return alts.length === 1 ? (alts[0] as Node) : { t: 'alt', alts };
  }

  private seq(): Node {
    const items: Node[] = [];
    while (this.i < this.p.length && this.p[this.i] !== '|' && this.p[this.i] !== ')') {
      items.push(this.quantified(this.atom()));
    }
    return items.length === 1 ? (items[0] as Node) : { t: 'seq', items };
  }

  private quantified(node: Node): Node {
    const c = this.p[this.i];
    let min: number;
    let max: number;
    if (c === '*') [min, max] = [0, Infinity];
    else if (c === '+') [min, max] = [1, Infinity];
    else if (c === '?') [min, max] = [0, 1];
    else if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.p.slice(this.i));
      if (!m) return node; // a literal "{" (allowed by V8 outside unicode mode only; ajv uses "u", which rejects it)
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
      if (min > MAX_REPEAT_BOUND || (max !== Infinity && max > MAX_REPEAT_BOUND)) {
        throw new Unsafe(`repetition bound ${m[0]} is above ${MAX_REPEAT_BOUND}`);
      }
      this.i += m[0].length - 1;
    } else return node;
    this.i++;
    if (this.p[this.i] === '?') this.i++; // lazy: same worst case
    if (node.t === 'anchor') throw new Unsafe('a quantifier on an anchor');
    return this.quantified({ t: 'repeat', node, min, max });
  }

  private atom(): Node {
    const p = this.p;
    const c = p[this.i] as string;
    if (c === '(') {
      this.i++;
      if (p.startsWith('?=', this.i) || p.startsWith('?!', this.i) || p.startsWith('?<=', this.i) || p.startsWith('?<!', this.i)) {
        throw new Unsafe('lookaround ((?=, (?!, (?<=, (?<!) is not supported (RE2 semantics)');
      }
      if (p.startsWith('?:', this.i)) this.i += 2;
      else if (p.startsWith('?<', this.i)) {
        const end = p.indexOf('>', this.i);
        if (end === -1) throw new Unsafe('unterminated group name');
        this.i = end + 1;
      } else if (p[this.i] === '?') throw new Unsafe(`unsupported group syntax "(${p.slice(this.i, this.i + 3)}"`);
      const inner = this.alt();
      if (p[this.i] !== ')') throw new Unsafe('missing ")"');
      this.i++;
      return inner;
    }
    if (c === '[') return this.charClass();
    if (c === '.') {
      this.i++;
      return { t: 'chars', set: ANY };
    }
    if (c === '^' || c === '$') {
      this.i++;
      return { t: 'anchor' };
    }
    if (c === '\\') return this.escape(false) ?? { t: 'anchor' };
    if (c === '*' || c === '+' || c === '?') throw new Unsafe(`nothing to repeat at offset ${this.i}`);
    const cp = p.codePointAt(this.i) as number;
    this.i += cp > 0xffff ? 2 : 1;
    return { t: 'chars', set: [[cp, cp]] };
  }

  /** Parses `\x` at this.i; undefined for the assertions \b and \B. */
  private escape(inClass: boolean): { t: 'chars'; set: Range[] } | undefined {
    const p = this.p;
    this.i++;
    const c = p[this.i];
    if (c === undefined) throw new Unsafe('pattern ends with "\\"');
    this.i++;
    const one = (cp: number): { t: 'chars'; set: Range[] } => ({ t: 'chars', set: [[cp, cp]] });
    if (/[1-9]/.test(c) || c === 'k') throw new Unsafe('backreferences are not supported (RE2 semantics)');
    if (c === 'b' || c === 'B') {
      if (inClass) return one(8);
      return undefined;
    }
    if (c === 'd') return { t: 'chars', set: DIGIT };
    if (c === 'w') return { t: 'chars', set: WORD };
    if (c === 's') return { t: 'chars', set: SPACE };
    if (c === 'D' || c === 'W' || c === 'S') return { t: 'chars', set: ANY };
    if (c === 'p' || c === 'P') {
      const end = p.indexOf('}', this.i);
      if (p[this.i] !== '{' || end === -1) throw new Unsafe('malformed \\p{...}');
      this.i = end + 1;
      return { t: 'chars', set: ANY };
    }
    const simple: Record<string, number> = { n: 10, t: 9, r: 13, f: 12, v: 11, '0': 0 };
    if (simple[c] !== undefined) return one(simple[c]);
    if (c === 'x') {
      const m = /^[0-9a-fA-F]{2}/.exec(p.slice(this.i));
      if (!m) throw new Unsafe('malformed \\x escape');
      this.i += 2;
      return one(parseInt(m[0], 16));
    }
    if (c === 'u') {
      const m = /^(\{([0-9a-fA-F]{1,6})\}|[0-9a-fA-F]{4})/.exec(p.slice(this.i));
      if (!m) throw new Unsafe('malformed \\u escape');
      this.i += m[0].length;
      return one(parseInt(m[2] ?? m[1] ?? '0', 16));
    }
    if (c === 'c') {
      const l = p.charCodeAt(this.i);
      this.i++;
      return one(l % 32);
    }
    return one(c.codePointAt(0) as number);
  }

  private charClass(): Node {
    const p = this.p;
    this.i++;
    const negated = p[this.i] === '^';
    if (negated) this.i++;
    const set: Range[] = [];
    let prev: number | undefined;
    while (this.i < p.length && p[this.i] !== ']') {
      if (p[this.i] === '-' && prev !== undefined && p[this.i + 1] !== ']' && this.i + 1 < p.length) {
        this.i++;
        const hi = this.classChar();
        if (hi.length === 1 && hi[0]) {
          set.push([prev, hi[0][1]]);
        } else set.push(...hi);
        prev = undefined;
        continue;
      }
      const r = this.classChar();
      set.push(...r);
      prev = r.length === 1 && r[0] && r[0][0] === r[0][1] ? r[0][0] : undefined;
    }
    if (p[this.i] !== ']') throw new Unsafe('missing "]"');
    this.i++;
    return { t: 'chars', set: negated ? ANY : set };
  }

  private classChar(): Range[] {
    if (this.p[this.i] === '\\') return (this.escape(true) as { set: Range[] }).set;
    const cp = this.p.codePointAt(this.i) as number;
    this.i += cp > 0xffff ? 2 : 1;
    return [[cp, cp]];
  }
}

function nullable(n: Node): boolean {
  switch (n.t) {
    case 'chars':
      return false;
    case 'anchor':
      return true;
    case 'seq':
      return n.items.every(nullable);
    case 'alt':
      return n.alts.some(nullable);
    case 'repeat':
      return n.min === 0 || nullable(n.node);
  }
}

function first(n: Node): Range[] {
  switch (n.t) {
    case 'chars':
      return n.set;
    case 'anchor':
      return [];
    case 'seq': {
      const out: Range[] = [];
      for (const item of n.items) {
        out.push(...first(item));
        if (!nullable(item)) break;
      }
      return out;
    }
    case 'alt':
      return n.alts.flatMap(first);
    case 'repeat':
      return first(n.node);
  }
}

function overlap(a: Range[], b: Range[]): boolean {
  for (const [alo, ahi] of a) for (const [blo, bhi] of b) if (alo <= bhi && blo <= ahi) return true;
  return false;
}

/** The largest repetition bound inside a node (1 when nothing repeats). */
function maxRepeat(n: Node): number {
  switch (n.t) {
    case 'chars':
    case 'anchor':
      return 1;
    case 'seq':
      return Math.max(1, ...n.items.map(maxRepeat));
    case 'alt':
      return Math.max(1, ...n.alts.map(maxRepeat));
    case 'repeat':
      return Math.max(n.max, maxRepeat(n.node));
  }
}

function check(n: Node): void {
  switch (n.t) {
    case 'chars':
    case 'anchor':
      return;
    case 'alt':
      n.alts.forEach(check);
      return;
    case 'seq':
      n.items.forEach(check);
      for (let k = 1; k < n.items.length; k++) {
        const a = n.items[k - 1] as Node;
        const b = n.items[k] as Node;
        if (a.t === 'repeat' && b.t === 'repeat' && a.max === Infinity && b.max === Infinity && overlap(first(a), first(b))) {
          throw new Unsafe('two adjacent unbounded repetitions over overlapping characters (e.g. "\\d*\\d*")');
        }
      }
      return;
    case 'repeat':
      if (n.max > 1) {
        // Bounded inside bounded (`(\.\d{1,3}){3}`) has a small fixed worst
        // case; any unbounded level over another repetition does not.
        const inner = maxRepeat(n.node);
        if (inner > 1 && (n.max === Infinity || inner === Infinity)) throw new Unsafe('nested repetition (e.g. "(a+)+") can backtrack catastrophically');
        if (n.node.t === 'alt') {
          const alts = n.node.alts;
          if (alts.some(nullable)) throw new Unsafe('a repeated alternation with an empty branch (e.g. "(a|)*")');
          for (let x = 0; x < alts.length; x++) {
            for (let y = x + 1; y < alts.length; y++) {
              if (overlap(first(alts[x] as Node), first(alts[y] as Node))) {
                throw new Unsafe('a repeated alternation whose branches can start with the same character (e.g. "(a|ab)*")');
              }
            }
          }
        }
      }
      check(n.node);
      return;
  }
}

/**
 * Why `pattern` is not accepted, or undefined when it is. Syntax errors that
 * V8 itself reports are left to `new RegExp` (ajv turns them into compile errors).
 */
export function regexSafetyProblem(pattern: string): string | undefined {
  if (pattern.length > MAX_PATTERN_LENGTH) {
    return `pattern is ${pattern.length} characters long, more than the ${MAX_PATTERN_LENGTH} allowed`;
  }
  try {
    check(new Parser(pattern).parse());
    return undefined;
  } catch (e) {
    if (e instanceof Unsafe) return e.message;
    throw e;
  }
}
