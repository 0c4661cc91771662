/**
 * Kubernetes' list library (apiserver/pkg/cel/library/lists.go): isSorted,
 * sum, min, max, indexOf, lastIndexOf.
 */
import type { Environment } from '@marcbachmann/cel-js';
import { celCompare, celEquals } from './equality.ts';
import { celError } from './errors.ts';

function ordered(l: unknown[], name: string, pick: (c: number) => boolean): unknown {
  if (l.length === 0) throw celError(`${name}() called on an empty list`);
  let best = l[0];
  for (const x of l.slice(1)) {
    try {
      if (pick(celCompare(x, best))) best = x;
    } catch (e) {
      throw celError(`${name}(): ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  return best;
}

export function registerLists(env: Environment): void {
  env.registerFunction('list.isSorted(): bool', (l: unknown[]) => {
    for (let i = 1; i < l.length; i++) {
      try {
        if (celCompare(l[i - 1], l[i]) > 0) return false;
      } catch (e) {
        throw celError(`isSorted(): ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    return true;
  });
  env.registerFunction('list.sum(): dyn', (l: unknown[]) => {
    if (l.length === 0) return 0n;
    if (l.every((x) => typeof x === 'bigint')) return (l as bigint[]).reduce((a, b) => a + b, 0n);
    if (l.every((x) => typeof x === 'number')) return (l as number[]).reduce((a, b) => a + b, 0);
    throw celError('sum() needs a list of ints or a list of doubles');
  });
  env.registerFunction('list.min(): dyn', (l: unknown[]) => ordered(l, 'min', (c) => c < 0));
  env.registerFunction('list.max(): dyn', (l: unknown[]) => ordered(l, 'max', (c) => c > 0));
  env.registerFunction('list.indexOf(dyn): int', (l: unknown[], v: unknown) => BigInt(l.findIndex((x) => celEquals(x, v))));
  env.registerFunction('list.lastIndexOf(dyn): int', (l: unknown[], v: unknown) => BigInt(l.findLastIndex((x) => celEquals(x, v))));
}
