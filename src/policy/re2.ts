/**
 * Every regular expression in a rule runs here: RE2 semantics (re2js, a pure
 * JS port of RE2), so matching time is linear in the input, never
 * exponential, whatever the pattern. Used by the JSON Schema compiler
 * (ajv's `code.regExp`) and by CEL's `matches`, `find` and `findAll`
 * (cel/lib/regex.ts), with the same bounds.
 *
 * Linear is not enough on its own: RE2's worst case is (compiled program
 * size) × (input length), and a 50,000-instruction program (`.{1000}` fifty
 * times) takes ~30 s on 100 KB here. So two more bounds, both deterministic
 * (they never depend on the machine's speed):
 * - a compiled program is at most {@link MAX_PROGRAM_SIZE} instructions;
 * - one test is at most {@link MAX_TEST_COST} instruction × character units,
 *   else it throws {@link RegexLimitError} (the rule gives an `error`
 *   verdict) instead of running.
 * And one cooperative bound: inside {@link withDeadline} (on the pattern's
 * {@link RegexClock}), a test that would
 * start after the deadline throws {@link RegexLimitError}, which lets an
 * evaluation stop between two regex tests of the same rule (the clock is
 * read every CLOCK_EVERY_UNITS of work, not on every tiny test).
 *
 * Syntax: RE2's (as Kubernetes' own CRD `pattern` validation and CEL use),
 * plus the ECMAScript escapes `\uXXXX` and `\u{X…}` that JSON Schema authors
 * write. Backreferences and lookaround do not exist in RE2: such a pattern
 * is a compile error naming the construct.
 */
import { RE2JS } from 're2js';
import { requiredSubstring } from './regex-required.ts';

/**
 * 2,000 instructions: a DNS-1123 subdomain pattern compiles to 22, the
 * distribution image-reference regex to 355, `^[a-z0-9]{0,253}$` to 510
 * (measured with re2js 2.10); 2,000 leaves headroom
 * over the longest realistic patterns while keeping the per-character cost of
 * a match (at most one step per instruction) in the microseconds.
 */
export const MAX_PROGRAM_SIZE = 2000;

/**
 * 2^27 ≈ 134 M instruction × character units per test. Measured here (2 CPU
 * cores, re2js 2.10): the worst case, every instruction alive at every
 * character, costs ~6 ns per unit, so one test takes at most ~0.8 s, and
 * typically 5-10x less. Within it: a 64-instruction pattern on a 2 MiB
 * string, a 2,000-instruction one on 64 KiB. The patterns of issue 9
 * (`^.*a.*a.*a.*a.*b$`, `^(a+)+$`, ≤ 19 instructions) run on 1 MiB.
 */
export const MAX_TEST_COST = 2 ** 27;

/** A compiled pattern or a limit hit while matching: the message says which and what to do. */
export class RegexLimitError extends Error {
  override readonly name = 'RegexLimitError';
  /** The evaluation's time budget ran out (not this pattern's own limit). */
  readonly deadline: boolean;
  constructor(message: string, options: { deadline?: boolean } = {}) {
    super(message);
    this.deadline = options.deadline === true;
  }
}

/** What ajv (and CEL) need from a regular expression. */
export interface LinearRegExp {
  /** Unanchored search, like RegExp.prototype.test. */
  test(input: string): boolean;
  /** The leftmost match (CEL's `find`), or undefined. */
  find(input: string): string | undefined;
  /**
   * Up to `limit` (all when < 0) successive non-overlapping matches (CEL's
   * `findAll`, Go's FindAllString). Each search after the first may scan the
   * rest of the input again, so the matching budget covers their sum;
   * `beforeSearch(from)` is called before each search after the first (CEL
   * charges its cost there).
   */
  findAll(input: string, limit: number, beforeSearch?: (from: number) => void): string[];
  /** Distinct per pattern: ajv caches compiled patterns by this string. */
  toString(): string;
  readonly source: string;
  /** Compiled program size (instructions). */
  readonly programSize: number;
}

/** No regex test starts after `deadline` (clock of `now`). The evaluator's EvaluationBudget is one. */
export interface Deadline {
  deadline: number;
  now: () => number;
}

/**
 * The deadline the patterns of one compiler read, and the regex work since
 * its clock was last read. One per schema compiler (compiler.ts's
 * SchemaCompiler, whose validators set the deadline passed to them for the
 * duration of one validation): ajv calls `test(input)` with nothing else,
 * so the deadline reaches a compiled pattern through the clock it was
 * compiled with, never through process-global state (issue 21).
 */
export interface RegexClock {
  deadline: Deadline | undefined;
  /** Regex work (instruction × character units) since the clock was last read. */
  sinceClock: number;
}

export function newRegexClock(): RegexClock {
  return { deadline: undefined, sinceClock: 0 };
}

/**
 * The clock is read once this much regex work has accumulated (and before
 * any single test at least this large): ~65 K units is at most ~0.4 ms of
 * matching at the worst-case rate, so the deadline is still seen within
 * that, while the many tiny tests of a normal request (image tags,
 * annotation keys) do not each pay for a clock read.
 */
const CLOCK_EVERY_UNITS = 2 ** 16;

/**
 * Runs `fn` with a deadline on `clock` (same clock as `now`): every test of
 * a pattern compiled with that clock that would start after it throws a
 * RegexLimitError. Synchronous on purpose, so the deadline cannot leak to
 * unrelated work; nesting restores the outer one.
 */
export function withDeadline<T>(clock: RegexClock, at: number, now: () => number, fn: () => T): T {
  const outer = enterDeadline(clock, { deadline: at, now });
  try {
    return fn();
  } finally {
    leaveDeadline(clock, outer);
  }
}

/**
 * The closure-free form of withDeadline for the evaluator's hot path (a
 * closure per rule cost ~0.4 µs per rule there): returns the outer deadline,
 * which the caller must restore with leaveDeadline in a `finally`.
 */
export function enterDeadline(clock: RegexClock, d: Deadline): Deadline | undefined {
  const outer = clock.deadline;
  clock.deadline = d;
  // A new deadline starts counting afresh: its first large test reads the clock.
  clock.sinceClock = 0;
  return outer;
}

export function leaveDeadline(clock: RegexClock, outer: Deadline | undefined): void {
  clock.deadline = outer;
}

/** Why RE2 refuses a construct that JavaScript has, in the words of a fix. */
function explain(pattern: string, message: string): string {
  if (/\(\?<?[=!]/.test(pattern) && /Perl syntax|named capture/.test(message)) {
    return `lookahead and lookbehind ("(?=", "(?!", "(?<=", "(?<!") are not supported (RE2 semantics, linear time); rewrite the pattern without them`;
  }
  if (/\\(?:[1-9]|k<)/.test(pattern) && /escape sequence: `\\(?:[1-9]|k)/.test(message)) {
    return 'backreferences ("\\1", "\\k<name>") are not supported (RE2 semantics, linear time); rewrite the pattern without them';
  }
  return message.replace(/^error parsing regexp: /, '');
}

/**
 * ECMAScript `\uXXXX` (and surrogate pairs of them) and `\u{X…}` become RE2's
 * `\x{…}`; everything else is left to RE2's parser. An escaped backslash is
 * copied as is, so `\\u0041` stays a backslash followed by "u0041".
 */
export function translateEcmaEscapes(pattern: string): string {
  if (!pattern.includes('\\u')) return pattern;
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c !== '\\') {
      out += c;
      continue;
    }
    const next = pattern[i + 1];
    if (next !== 'u') {
      out += c + (next ?? '');
      i++;
      continue;
    }
    const braced = /^\{([0-9a-fA-F]{1,6})\}/.exec(pattern.slice(i + 2));
    if (braced) {
      out += `\\x{${braced[1]}}`;
      i += 1 + braced[0].length;
      continue;
    }
    const hex = /^[0-9a-fA-F]{4}/.exec(pattern.slice(i + 2));
    if (!hex) {
      out += '\\u'; // RE2 reports it as an invalid escape
      i++;
      continue;
    }
    let cp = parseInt(hex[0], 16);
    i += 5;
    const low = /^\\u([dD][c-fC-F][0-9a-fA-F]{2})/.exec(pattern.slice(i + 1));
    if (cp >= 0xd800 && cp <= 0xdbff && low) {
      cp = 0x10000 + ((cp - 0xd800) << 10) + (parseInt(low[1] as string, 16) - 0xdc00);
      i += 6;
    }
    out += `\\x{${cp.toString(16)}}`;
  }
  return out;
}

/**
 * A pattern that is only a literal (escapes of punctuation allowed), anchored
 * at the start (`^`), the end (`$`), both or neither, is matched with string
 * methods: exactly RE2's answer (no flags exist here, and `$` without (?m) is
 * the end of the text), at a twentieth of re2js's fixed cost per call. Rule
 * patterns are often of this shape (`^localhost/`, `:latest$`, annotation
 * key prefixes). Undefined for anything else.
 */
function literalMatcher(pattern: string): ((input: string) => boolean) | undefined {
  const m = /^(\^?)((?:[^\\^$.|?*+()[\]{}]|\\[.^$|?*+()[\]{}\\/-])*)(\$?)$/.exec(pattern);
  if (!m) return undefined;
  const literal = (m[2] ?? '').replace(/\\(.)/g, '$1');
  const start = m[1] === '^';
  const end = m[3] === '$';
  if (start && end) return (input) => input === literal;
  if (start) return (input) => input.startsWith(literal);
  if (end) return (input) => input.endsWith(literal);
  return (input) => input.includes(literal);
}

/** RE2's test, answered "no" without running when the input lacks what every match contains (regex-required.ts). */
function prefiltered(re: RE2JS, required: string | undefined): (input: string) => boolean {
  if (required === undefined) return (input) => re.test(input);
  return (input) => input.includes(required) && re.test(input);
}

/** RE2's search behind its prefilter, its answers remembered when `memoize`. */
function searchWith(re: RE2JS, required: string | undefined, memoize: boolean): (input: string) => boolean {
  const search = prefiltered(re, required);
  return memoize ? remembered(search) : search;
}

/** Inputs a remembered pattern keeps answers for: short ones (image references, names, label values), a bounded number. */
const MEMO_MAX_INPUT = 128;
const MEMO_ENTRIES = 32;

/**
 * `match`, remembering its answers for short inputs: one test of an image
 * reference costs re2js ~0.3–0.5 µs, a lookup ~0.03, and the strings a
 * cluster's objects carry repeat (a Deployment's Pods share their images).
 * Bounded per pattern (MEMO_ENTRIES of at most MEMO_MAX_INPUT characters;
 * emptied when full), so hostile input costs a lookup and an insert per test,
 * never memory. The key holds its string alive: only for inputs that are
 * their own strings (JSON.parse's), never slices of a larger one. A Map
 * emptied when full rather than lru-cache: this runs on every pattern test,
 * and lru-cache's bookkeeping on each hit costs more than the lookup.
 */
function remembered(match: (input: string) => boolean): (input: string) => boolean {
  const memo = new Map<string, boolean>();
  return (input) => {
    if (input.length > MEMO_MAX_INPUT) return match(input);
    let r = memo.get(input);
    if (r === undefined) {
      if (memo.size >= MEMO_ENTRIES) memo.clear();
      memo.set(input, (r = match(input)));
    }
    return r;
  };
}

/**
 * Compiles a pattern with RE2 semantics. Throws a RegexLimitError whose
 * message says what is wrong (syntax, an unsupported construct, or a program
 * over MAX_PROGRAM_SIZE).
 */
export function compileLinear(pattern: string, options: CompileOptions = {}): LinearRegExp {
  let re: RE2JS;
  const syntax = options.ecmaEscapes === false ? pattern : translateEcmaEscapes(pattern);
  try {
    re = RE2JS.compile(syntax);
  } catch (err) {
    throw new RegexLimitError(`regular expression /${shorten(pattern)}/ is not valid: ${explain(pattern, err instanceof Error ? err.message : String(err))}`);
  }
  const programSize = re.programSize();
  if (programSize > MAX_PROGRAM_SIZE) {
    throw new RegexLimitError(
      `regular expression /${shorten(pattern)}/ compiles to ${programSize} instructions, more than the ${MAX_PROGRAM_SIZE} allowed; use smaller repetition counts or split it`,
    );
  }
  const key = `re2:/${pattern}/`;
  const clock = options.clock;
  // A literal's string method costs less than a lookup: only RE2 runs are remembered.
  const match = literalMatcher(pattern) ?? searchWith(re, requiredSubstring(syntax), options.memoize === true);
  // One unit per instruction per character: RE2's worst case, checked
  // before running so an over-budget search costs nothing.
  const admit = (characters: number, total: number, inputLength: number): void => {
    if (total > MAX_TEST_COST) {
      throw new RegexLimitError(
        `regular expression /${shorten(pattern)}/ (${programSize} instructions) on a string of ${inputLength} characters exceeds the matching budget of ${MAX_TEST_COST} units; shorten the pattern or the value`,
      );
    }
    if (clock !== undefined) readClock(clock, programSize * characters);
  };
  return {
    source: pattern,
    programSize,
    toString: () => key,
    test(input: string): boolean {
      admit(input.length, programSize * input.length, input.length);
      return match(input);
    },
    find(input: string): string | undefined {
      admit(input.length, programSize * input.length, input.length);
      const m = re.matcher(input);
      return m.find() ? (m.group() ?? '') : undefined;
    },
    findAll(input: string, limit: number, beforeSearch?: (from: number) => void): string[] {
      const out: string[] = [];
      if (limit === 0) return out;
      const m = re.matcher(input);
      let from = 0;
      let work = 0;
      while (from <= input.length) {
        if (from > 0) beforeSearch?.(from);
        work += programSize * (input.length - from + 1);
        admit(input.length - from + 1, work, input.length);
        if (!m.find(from)) break;
        out.push(m.group() ?? '');
        if (limit > 0 && out.length >= limit) break;
        from = m.end() > m.start() ? m.end() : m.end() + 1;
      }
      return out;
    },
  };
}

export interface CompileOptions {
  /**
   * Translate ECMAScript's `\uXXXX` and `\u{…}` escapes (JSON Schema
   * patterns are ECMAScript's); CEL patterns are RE2's, where `\u` is an error.
   * @default true
   */
  ecmaEscapes?: boolean;
  /** The clock whose deadline this pattern's tests respect (none: no deadline, only the per-test budget). */
  clock?: RegexClock;
  /**
   * Remember `test` answers for short inputs (see remembered()). Only where
   * every input is a string of its own (JSON Schema's: values of parsed
   * JSON), not where it can be a slice of a larger one (CEL's computed strings).
   * @default false
   */
  memoize?: boolean;
}

function shorten(pattern: string): string {
  return pattern.length > 80 ? `${pattern.slice(0, 77)}...` : pattern;
}

/** Counts regex work and reads the clock of the current deadline every CLOCK_EVERY_UNITS of it. */
function readClock(clock: RegexClock, cost: number): void {
  const d = clock.deadline;
  if (d === undefined) return;
  clock.sinceClock += cost;
  if (clock.sinceClock >= CLOCK_EVERY_UNITS) {
    clock.sinceClock = 0;
    if (d.now() > d.deadline) throw new RegexLimitError('the evaluation time budget ran out before this regular expression ran', { deadline: true });
  }
}

/**
 * ajv's `code.regExp` engine for patterns that respect `clock`'s deadline:
 * ajv calls it with the pattern and "u" (the JSON Schema unicode flag). RE2
 * always matches code points, which is what "u" asks for, so the flag needs
 * no translation.
 */
export function ajvRegExp(clock: RegexClock): ((pattern: string, flags: string) => LinearRegExp) & { code: string } {
  const engine = (pattern: string, _flags: string): LinearRegExp => compileLinear(pattern, { clock, memoize: true });
  // ajv embeds this name only in standalone (generated-source) output, which
  // Portal does not use; it must be a string for ajv's function cache.
  return Object.assign(engine, { code: 'portalRe2' });
}
