/**
 * Kubernetes resource quantities (k8s.io/apimachinery resource.Quantity),
 * exact: a quantity is a rational number num/den of bigints. Shared by CEL's
 * quantity library and anything else that reads `500m` or `1.5Gi`.
 */
const SUFFIX: Record<string, [bigint, bigint]> = {
  Ki: [1024n, 1n], Mi: [1024n ** 2n, 1n], Gi: [1024n ** 3n, 1n], Ti: [1024n ** 4n, 1n], Pi: [1024n ** 5n, 1n], Ei: [1024n ** 6n, 1n],
  n: [1n, 10n ** 9n], u: [1n, 10n ** 6n], m: [1n, 1000n], '': [1n, 1n],
  k: [1000n, 1n], M: [10n ** 6n, 1n], G: [10n ** 9n, 1n], T: [10n ** 12n, 1n], P: [10n ** 15n, 1n], E: [10n ** 18n, 1n],
};
const QUANTITY = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$/;

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

/** The quantity `s` denotes, or undefined when it is not one. */
export function parseQuantity(s: string): Quantity | undefined {
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

/** A quantity (string, or a plain number as JSON allows) as a JavaScript number, or undefined when it is not one. */
export function quantityValue(q: unknown): number | undefined {
  if (typeof q === 'number') return Number.isFinite(q) ? q : undefined;
  if (typeof q !== 'string') return undefined;
  const parsed = parseQuantity(q.trim());
  return parsed === undefined ? undefined : Number(parsed.num) / Number(parsed.den);
}
