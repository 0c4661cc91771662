/**
 * Kubernetes' quantity library (apiserver/pkg/cel/library/quantity.go),
 * exact: a quantity is a rational number num/den of bigints.
 */
import type { Environment } from '@marcbachmann/cel-js';
import { celError } from './errors.ts';
import { parseQuantity, Quantity } from '../../quantity.ts';

const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

function quantity(s: string): Quantity {
  const q = parseQuantity(s);
  if (!q) throw celError(`quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': ${JSON.stringify(s)}`);
  return q;
}

const cmp = (a: Quantity, b: Quantity): number => {
  const l = a.num * b.den;
  const r = b.num * a.den;
  return l < r ? -1 : l > r ? 1 : 0;
};
const add = (a: Quantity, b: Quantity): Quantity => new Quantity(a.num * b.den + b.num * a.den, a.den * b.den);
const neg = (a: Quantity): Quantity => new Quantity(-a.num, a.den);
const fromInt = (i: bigint): Quantity => new Quantity(i, 1n);

export function registerQuantity(env: Environment): void {
  env.registerType('Quantity', Quantity);
  env.registerFunction('quantity(string): Quantity', quantity);
  env.registerFunction('isQuantity(string): bool', (s: string) => parseQuantity(s) !== undefined);
  env.registerFunction('Quantity.sign(): int', (q: Quantity) => BigInt(q.num < 0n ? -1 : q.num > 0n ? 1 : 0));
  env.registerFunction('Quantity.isInteger(): bool', (q: Quantity) => q.den === 1n && q.num >= INT64_MIN && q.num <= INT64_MAX);
  env.registerFunction('Quantity.asInteger(): int', (q: Quantity) => {
    if (q.den !== 1n || q.num < INT64_MIN || q.num > INT64_MAX) throw celError('cannot convert value to integer: the quantity is not an integer or does not fit in an int64');
    return q.num;
  });
  env.registerFunction('Quantity.asApproximateFloat(): double', (q: Quantity) => Number(q.num) / Number(q.den));
  env.registerFunction('Quantity.add(Quantity): Quantity', add);
  env.registerFunction('Quantity.add(int): Quantity', (a: Quantity, b: bigint) => add(a, fromInt(b)));
  env.registerFunction('Quantity.sub(Quantity): Quantity', (a: Quantity, b: Quantity) => add(a, neg(b)));
  env.registerFunction('Quantity.sub(int): Quantity', (a: Quantity, b: bigint) => add(a, neg(fromInt(b))));
  env.registerFunction('Quantity.isGreaterThan(Quantity): bool', (a: Quantity, b: Quantity) => cmp(a, b) > 0);
  env.registerFunction('Quantity.isLessThan(Quantity): bool', (a: Quantity, b: Quantity) => cmp(a, b) < 0);
  env.registerFunction('Quantity.compareTo(Quantity): int', (a: Quantity, b: Quantity) => BigInt(cmp(a, b)));
  env.registerFunction('string(Quantity): string', (q: Quantity) => q.toString());
}
