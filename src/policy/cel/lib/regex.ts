/**
 * Regular expressions with RE2 semantics in linear time (re2js): the standard
 * `matches` (cel-js's own uses a backtracking JS RegExp, so compile() renames
 * calls to it to `portalMatches`) and the Kubernetes regex library's `find`
 * and `findAll`.
 */
import { RE2JS } from 're2js';
import type { Environment } from '@marcbachmann/cel-js';
import { celError } from './errors.ts';

/** Compiled patterns, shared by every expression; bounded so hostile input cannot grow it. */
const cache = new Map<string, RE2JS>();
const CACHE_MAX = 512;

export function re2(pattern: string): RE2JS {
  const hit = cache.get(pattern);
  if (hit) return hit;
  let re: RE2JS;
  try {
    re = RE2JS.compile(pattern);
  } catch (e) {
    throw celError(`invalid regular expression ${JSON.stringify(pattern)}: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value as string);
  cache.set(pattern, re);
  return re;
}

function findAll(s: string, pattern: string, limit: number): string[] {
  const out: string[] = [];
  if (limit === 0) return out;
  const m = re2(pattern).matcher(s);
  let from = 0;
  while (from <= s.length && m.find(from)) {
    out.push(m.group() ?? '');
    if (limit > 0 && out.length >= limit) break;
    from = m.end() > m.start() ? m.end() : m.end() + 1;
  }
  return out;
}

export function registerRegex(env: Environment): void {
  env.registerFunction('string.portalMatches(string): bool', (s: string, p: string) => re2(p).matcher(s).find());
  env.registerFunction('portalMatches(string, string): bool', (s: string, p: string) => re2(p).matcher(s).find());
  env.registerFunction('string.find(string): string', (s: string, p: string) => {
    const m = re2(p).matcher(s);
    return m.find() ? (m.group() ?? '') : '';
  });
  env.registerFunction('string.findAll(string): list<string>', (s: string, p: string) => findAll(s, p, -1));
  env.registerFunction('string.findAll(string, int): list<string>', (s: string, p: string, n: bigint) => findAll(s, p, Number(n)));
}
