/** Kubernetes' sets extension (cel-go ext.Sets): sets.contains, sets.equivalent, sets.intersects. */
import type { Environment } from '@marcbachmann/cel-js';
import { celEquals } from './equality.ts';

const has = (l: unknown[], v: unknown): boolean => l.some((x) => celEquals(x, v));

export function registerSets(env: Environment): void {
  env.registerFunction('sets_contains(list, list): bool', (a: unknown[], b: unknown[]) => b.every((x) => has(a, x)));
  env.registerFunction('sets_equivalent(list, list): bool', (a: unknown[], b: unknown[]) => b.every((x) => has(a, x)) && a.every((x) => has(b, x)));
  env.registerFunction('sets_intersects(list, list): bool', (a: unknown[], b: unknown[]) => b.some((x) => has(a, x)));
}
