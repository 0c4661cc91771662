/**
 * Regular expressions with RE2 semantics in linear time, with the bounds of
 * JSON Schema patterns (re2.ts: a program of at most 2,000 instructions, a
 * matching budget per call, the evaluation's deadline): the standard
 * `matches` (cel-js's own uses a backtracking JS RegExp, so compile() renames
 * calls to it to `portalMatches`) and the Kubernetes regex library's `find`
 * and `findAll`.
 *
 * Cost: charges.ts charges cel-go's figure from the pattern's length before
 * the pattern is compiled; once compiled, a program larger than its pattern
 * is long (`[a-z]{1000}`) pays the difference ({@link chargeProgram}), and
 * each search of a `findAll` after the first pays for the rest of the input
 * it may scan again.
 *
 * A constant pattern over the limits (or invalid) is refused by compile()
 * ({@link constantRegexProblem}); any other is a runtime error.
 */
import type { Environment } from '@marcbachmann/cel-js';
import { LRUCache } from 'lru-cache';
import { compileLinear, RegexLimitError, type LinearRegExp } from '../../re2.ts';
import { costOf, regexSize } from '../cost.ts';
import { charge, type Meter } from '../meter.ts';
import { celError } from './errors.ts';

function compilePattern(pattern: string): LinearRegExp {
  return compileLinear(pattern, { ecmaEscapes: false });
}

/**
 * A pattern compiled for CEL, or a CEL error. A constant pattern is
 * compiled once by the code generator (codegen-calls.ts passes it in); a
 * pattern computed at run time goes through its call site's
 * {@link PatternCache}.
 */
export function re2(pattern: string): LinearRegExp {
  try {
    return compilePattern(pattern);
  } catch (e) {
    throw celError(e instanceof Error ? e.message : String(e));
  }
}

/**
 * Patterns compiled at one call site whose pattern is computed at run time
 * (`s.matches(object.spec.pattern)`): a constant of the generated program,
 * so it belongs to the compiled rule (and its RuleSet), never to the
 * process. Its cost stays what it was: a call is charged from the pattern's
 * length and program size, compiled or found here.
 */
export type PatternCache = LRUCache<string, LinearRegExp>;

/**
 * Patterns kept per call site: a rule reads its patterns from a few fields
 * (a pattern per container or per annotation at most), and a program is at
 * most MAX_PROGRAM_SIZE instructions (re2.ts), so 16 bound the memory.
 */
export const PATTERN_CACHE_SIZE = 16;

export function patternCache(): PatternCache {
  return new LRUCache<string, LinearRegExp>({ max: PATTERN_CACHE_SIZE });
}

/** `pattern` compiled (or a CEL error, not kept), from `cache` when it was compiled before. */
export function cachedRe2(cache: PatternCache, pattern: string): LinearRegExp {
  let re = cache.get(pattern);
  if (re === undefined) cache.set(pattern, (re = re2(pattern)));
  return re;
}

/**
 * Why a constant pattern cannot run (invalid, or over the program-size
 * limit), for a compile error; undefined when it can.
 */
export function constantRegexProblem(pattern: string): string | undefined {
  try {
    compilePattern(pattern);
    return undefined;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

/**
 * What a program larger than its pattern's length costs on top of cel-go's
 * figure (charged by charges.ts). `m` undefined: a call cel-js's own
 * evaluation makes (a fallback expression), which is charged per node
 * before it runs (engine.ts).
 */
function chargeProgram(m: Meter | undefined, s: string, p: string, re: LinearRegExp): void {
  if (m !== undefined && re.programSize > p.length) charge(m, costOf.regex(s.length, regexSize(p.length, re.programSize)) - costOf.regex(s.length, regexSize(p.length)));
}

/** Runs a regex operation; a matching budget or deadline overrun is a CEL evaluation error. */
function run<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof RegexLimitError) throw celError(e.message);
    throw e;
  }
}

/** `s.matches(p)` on RE2. `re`: `p` compiled already (a constant pattern). */
export function matches(s: string, p: string, m?: Meter, re: LinearRegExp = re2(p)): boolean {
  chargeProgram(m, s, p, re);
  try {
    return re.test(s);
  } catch (e) {
    if (e instanceof RegexLimitError) throw celError(e.message);
    throw e;
  }
}

/** `s.find(p)`. */
export function find(s: string, p: string, m?: Meter, re: LinearRegExp = re2(p)): string {
  chargeProgram(m, s, p, re);
  return run(() => re.find(s) ?? '');
}

/** `s.findAll(p[, limit])`: each search after the first pays for the rest of the input it may scan again. */
export function findAll(s: string, p: string, limit: number, m?: Meter, re: LinearRegExp = re2(p)): string[] {
  if (limit === 0) return [];
  chargeProgram(m, s, p, re);
  const size = regexSize(p.length, re.programSize);
  return run(() => re.findAll(s, limit, m === undefined ? undefined : (from) => charge(m, costOf.regex(s.length - from, size))));
}

export function registerRegex(env: Environment): void {
  env.registerFunction('string.portalMatches(string): bool', (s: string, p: string) => matches(s, p));
  env.registerFunction('portalMatches(string, string): bool', (s: string, p: string) => matches(s, p));
  env.registerFunction('string.find(string): string', (s: string, p: string) => find(s, p));
  env.registerFunction('string.findAll(string): list<string>', (s: string, p: string) => findAll(s, p, -1));
  env.registerFunction('string.findAll(string, int): list<string>', (s: string, p: string, n: bigint) => findAll(s, p, Number(n)));
}
