/**
 * Kubernetes' quantity library (apiserver/pkg/cel/library/quantity.go),
 * exact: a quantity is a rational number num/den of bigints.
 */
import type { Environment } from '@marcbachmann/cel-js';
import { celError } from './errors.ts';

const SUFFIX: Record<string, [bigint, bigint]> = {
  Ki: [1024n, 1n], Mi: [1024n ** 2n, 1n], Gi: [1024n ** 3n, 1n], Ti: [1024n ** 4n, 1n], Pi: [1024n ** 5n, 1n], Ei: [1024n ** 6n, 1n],
  n: [1n, 10n ** 9n], u: [1n, 10n ** 6n], m: [1n, 1000n], '': [1n, 1n],
  k: [1000n, 1n], M: [10n ** 6n, 1n], G: [10n ** 9n, 1n], T: [10n ** 12n, 1n], P: [10n ** 15n, 1n], E: [10n ** 18n, 1n],
};
const QUANTITY = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$/;
const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

const gcd = (a: bigint, b: bigint): bigint => {
  a = a < 0n ? -a : a;
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
};

export class Quantity {
  readonly num: bigint;
  readonly den: bigint;
  constructor(num: bigint, den: bigint, readonly text = '') {
    const g = gcd(num, den) || 1n;
    this.num = num / g;
    this.den = den / g;
  }
  toString(): string {
    return this.text || (this.den === 1n ? String(this.num) : String(Number(this.num) / Number(this.den)));
  }
}

function parse(s: string): Quantity | undefined {
  const m = QUANTITY.exec(s);
  if (!m) return undefined;
  const [, sign, digits = '', exp, suffix = ''] = m;
  const [int, frac = ''] = digits.split('.');
  let num = BigInt((int ?? '') + frac || '0');
  let den = 10n ** BigInt(frac.length);
  if (exp !== undefined) {
    const e = Number(exp.slice(1));
    if (Math.abs(e) > 1000) return undefined;
    if (e >= 0) num *= 10n ** BigInt(e);
    else den *= 10n ** BigInt(-e);
  } else {
    const [mul, div] = SUFFIX[suffix] ?? [1n, 1n];
    num *= mul;
    den *= div;
  }
  if (sign === '-') num = -num;
  return new Quantity(num, den, s);
}

function quantity(s: string): Quantity {
  const q = parse(s);
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
  env.registerFunction('isQuantity(string): bool', (s: string) => parse(s) !== undefined);
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
