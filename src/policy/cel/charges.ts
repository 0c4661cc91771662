/**
 * Applies the cost model (cost.ts) to CEL values: what a call or an
 * operator charges, from the values it receives, before it runs. The
 * generated code (codegen.ts) calls {@link callCost}, {@link binaryCost} and
 * {@link rangeCost}; such calls and operators are not charged the size of
 * their result a second time.
 */
import { remaining, type Meter } from './meter.ts';
import { aggregateElements, aggregateTraversal, costOf, regexSize } from './cost.ts';

const len = (v: unknown): number => (typeof v === 'string' || v instanceof Uint8Array ? v.length : 0);

function isAggregate(v: unknown): boolean {
  if (v === null || typeof v !== 'object') return false;
  if (Array.isArray(v) || v instanceof Map || v instanceof Set) return true;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === null || proto === Object.prototype;
}

/** Keys of a map held as a JS object (or a Map), without listing them when the size is known. */
function keyCount(v: unknown): number {
  if (v instanceof Map || v instanceof Set) return v.size;
  if (isAggregate(v) && !Array.isArray(v)) return Object.keys(v as object).length;
  return 0;
}

/** The elements of a list for sets.*: the sum over its elements (0 when empty, as cel-go). */
function setSize(v: unknown, m: Meter): number {
  if (!Array.isArray(v) || v.length === 0) return 0;
  return aggregateElements(v, remaining(m));
}

function joinLength(list: unknown, separator: number): number {
  if (!Array.isArray(list)) return 0;
  let n = list.length > 0 ? separator * (list.length - 1) : 0;
  for (const e of list) n += len(e);
  return n;
}

const walkString = (args: unknown[]): number => costOf.stringTraversal(len(args[0]));

/**
 * Per function name (after compile()'s renames: `portalMatches`,
 * `sets_contains`, …), the cost of one call from its values (the receiver
 * first for a method call).
 */
const CALLS: Readonly<Record<string, (args: unknown[], m: Meter) => number>> = {
  contains: ([s, sub]) => (typeof s === 'string' ? costOf.contains(s.length, len(sub)) : 0),
  startsWith: ([, p]) => costOf.startsWith(len(p)),
  endsWith: ([, p]) => costOf.endsWith(len(p)),
  lowerAscii: walkString,
  upperAscii: walkString,
  trim: walkString,
  substring: walkString,
  charAt: walkString,
  reverse: walkString,
  strings_quote: walkString,
  indexOf: ([r], m) => (Array.isArray(r) ? costOf.listTraversal(aggregateTraversal(r, remaining(m))) : costOf.stringTraversal(len(r))),
  lastIndexOf: ([r], m) => (Array.isArray(r) ? costOf.listTraversal(aggregateTraversal(r, remaining(m))) : costOf.stringTraversal(len(r))),
  replace: ([s, from, to, n]) => costOf.replace(len(s), len(from), len(to), typeof n === 'bigint' ? Number(n) : -1),
  split: ([s]) => costOf.split(len(s)),
  join: ([l, sep]) => costOf.join(joinLength(l, len(sep))),
  format: ([f, args], m) => costOf.format(len(f), aggregateTraversal(args, remaining(m))),
  portalMatches: ([s, p]) => costOf.regex(len(s), regexSize(len(p))),
  find: ([s, p]) => costOf.regex(len(s), regexSize(len(p))),
  findAll: ([s, p]) => costOf.regex(len(s), regexSize(len(p))),
  sets_contains: ([a, b], m) => costOf.sets(setSize(a, m), setSize(b, m)),
  sets_equivalent: ([a, b], m) => costOf.sets(setSize(a, m), setSize(b, m)),
  sets_intersects: ([a, b], m) => costOf.sets(setSize(a, m), setSize(b, m)),
  isSorted: ([l], m) => costOf.listTraversal(aggregateTraversal(l, remaining(m))),
  sum: ([l], m) => costOf.listTraversal(aggregateTraversal(l, remaining(m))),
  min: ([l], m) => costOf.listTraversal(aggregateTraversal(l, remaining(m))),
  max: ([l], m) => costOf.listTraversal(aggregateTraversal(l, remaining(m))),
  size: ([v]) => (typeof v === 'string' ? costOf.stringTraversal(v.length) : v instanceof Map || v instanceof Set || Array.isArray(v) || v instanceof Uint8Array ? 0 : costOf.stringTraversal(keyCount(v))),
  // Parsers and conversions of a string (or bytes) argument; 0 for other overloads (e.g. CIDR.ip()).
  url: walkString,
  isURL: walkString,
  quantity: walkString,
  isQuantity: walkString,
  ip: walkString,
  isIP: walkString,
  cidr: walkString,
  isCIDR: walkString,
  semver: walkString,
  isSemver: walkString,
  ip_isCanonical: ([s]) => costOf.ipIsCanonical(len(s)),
  containsIP: ([c, x]) => costOf.containsAddress(String(c).length, typeof x === 'string' ? x.length : String(x).length),
  containsCIDR: ([c, x]) => costOf.containsAddress(String(c).length, typeof x === 'string' ? x.length : String(x).length),
  getQuery: ([u]) => costOf.stringTraversal(String(u).length),
  getEscapedPath: ([u]) => costOf.stringTraversal(String(u).length),
  validate: ([f, s]) => costOf.regex(len(s), (f as { regexSize?: number } | null)?.regexSize ?? 0),
  base64_encode: walkString,
  base64_decode: walkString,
  string: walkString,
  bytes: walkString,
  int: walkString,
  uint: walkString,
  double: walkString,
  duration: walkString,
  hex: walkString,
  base64: walkString,
  json: walkString,
  ofNonZeroValue: ([, v]) => costOf.stringTraversal(keyCount(v)),
};

/** The cost of a call to `name` with these values (receiver first), or 0. */
export function callCost(name: string, args: unknown[], m: Meter): number {
  const f = CALLS[name];
  return f === undefined ? 0 : f(args, m);
}

/** True when calls to `name` have a size-dependent cost (and their result is charged by it). */
export function isCostedCall(name: string): boolean {
  return Object.hasOwn(CALLS, name);
}

/** The cost of a binary operator on these operands, or 0. */
export function binaryCost(op: string, l: unknown, r: unknown, m: Meter): number {
  switch (op) {
    case '==':
    case '!=':
      if (typeof l === 'string' && typeof r === 'string') return costOf.compareStrings(l.length, r.length);
      if (l instanceof Uint8Array && r instanceof Uint8Array) return costOf.compareStrings(l.length, r.length);
      if (isAggregate(l) && isAggregate(r)) {
        const cap = remaining(m);
        return costOf.equalsAggregates(aggregateTraversal(l, cap), aggregateTraversal(r, cap));
      }
      return 0;
    case '<':
    case '<=':
    case '>':
    case '>=':
      return (typeof l === 'string' && typeof r === 'string') || (l instanceof Uint8Array && r instanceof Uint8Array) ? costOf.compareStrings(len(l), len(r)) : 0;
    case 'in':
      if (!Array.isArray(r)) return 0;
      return costOf.inList(r.length, isAggregate(l) ? aggregateTraversal(l, remaining(m)) : 1);
    case '+':
      if (Array.isArray(l) && Array.isArray(r)) return costOf.concat(l.length, r.length);
      return typeof l === 'string' || l instanceof Uint8Array ? costOf.concat(len(l), len(r)) : 0;
    default:
      return 0;
  }
}

/** The cost of starting a comprehension over `coll` (listing a map's keys), or 0. */
export function rangeCost(coll: unknown): number {
  return Array.isArray(coll) ? 0 : costOf.mapRange(keyCount(coll));
}

/** The function name of a call or method-call node. */
export function callName(n: { op: string; args: unknown }): string | undefined {
  if ((n.op === 'call' || n.op === 'rcall') && Array.isArray(n.args) && typeof n.args[0] === 'string') return n.args[0];
  return undefined;
}
