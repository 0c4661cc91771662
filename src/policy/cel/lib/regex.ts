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
import { compileLinear, RegexLimitError, type LinearRegExp } from '../../re2.ts';
import { costOf, regexSize } from '../cost.ts';
import { charge } from '../meter.ts';
import { celError } from './errors.ts';

/** Compiled patterns, shared by every expression; bounded so hostile input cannot grow it. */
const cache = new Map<string, LinearRegExp>();
const CACHE_MAX = 512;
/** Longer patterns (from objects, not rules) are not cached: 512 of them would hold too much memory. */
const CACHE_PATTERN_MAX = 1024;

function compilePattern(pattern: string): LinearRegExp {
  return compileLinear(pattern, { ecmaEscapes: false });
}

export function re2(pattern: string): LinearRegExp {
  const hit = cache.get(pattern);
  if (hit) return hit;
  let re: LinearRegExp;
  try {
    re = compilePattern(pattern);
  } catch (e) {
    throw celError(e instanceof Error ? e.message : String(e));
  }
  if (pattern.length <= CACHE_PATTERN_MAX) {
    if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value as string);
    cache.set(pattern, re);
  }
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

/** What a program larger than its pattern's length costs on top of cel-go's figure (charged by charges.ts). */
function chargeProgram(s: string, p: string, re: LinearRegExp): void {
  if (re.programSize > p.length) charge(costOf.regex(s.length, regexSize(p.length, re.programSize)) - costOf.regex(s.length, regexSize(p.length)));
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

function matches(s: string, p: string): boolean {
  const re = re2(p);
  chargeProgram(s, p, re);
  return run(() => re.test(s));
}

function find(s: string, p: string): string {
  const re = re2(p);
  chargeProgram(s, p, re);
  return run(() => re.find(s) ?? '');
}

function findAll(s: string, p: string, limit: number): string[] {
  if (limit === 0) return [];
  const re = re2(p);
  chargeProgram(s, p, re);
  const size = regexSize(p.length, re.programSize);
  return run(() => re.findAll(s, limit, (from) => charge(costOf.regex(s.length - from, size))));
}

export function registerRegex(env: Environment): void {
  env.registerFunction('string.portalMatches(string): bool', matches);
  env.registerFunction('portalMatches(string, string): bool', matches);
  env.registerFunction('string.find(string): string', find);
  env.registerFunction('string.findAll(string): list<string>', (s: string, p: string) => findAll(s, p, -1));
  env.registerFunction('string.findAll(string, int): list<string>', (s: string, p: string, n: bigint) => findAll(s, p, Number(n)));
}
