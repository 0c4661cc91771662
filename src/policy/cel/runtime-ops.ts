/**
 * The operations of the code codegen.ts generates whose CEL semantics take
 * more than an inline expression: field selection, indexing, equality,
 * arithmetic, ordering, `in`, `size`.
 *
 * Each has a fast path for the values Kubernetes objects are made of (plain
 * objects as maps, arrays as lists, bigint ints, number doubles, strings,
 * booleans, null) and hands anything else to cel-js itself through its
 * public API: a one-operation expression such as `__a0 + __a1`, evaluated
 * with the operand values (values-marks.ts's viaCelJs). So a uint, a
 * duration, a Map, a library type or a type error behaves exactly as
 * cel-js's interpreter makes it behave, error message included, while the
 * common case never leaves the generated code.
 *
 * Deviations from cel-js 8.0, on purpose (cel-spec says so, cel-go does so):
 * `-x`, `x / y` and `x % y` on ints raise an overflow error where the result
 * is outside int64 (cel-js returns the out-of-range bigint).
 *
 * Pure: no I/O.
 */
import { EvaluationError, Optional } from '@marcbachmann/cel-js';
import { CostLimitExceeded, type Meter } from './meter.ts';
import { built, delegateOf, isInput, isPlain, num, read, viaCelJs, type Delegate } from './values-marks.ts';

const MAX_INT = 9223372036854775807n;
const MIN_INT = -9223372036854775808n;

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The runtime's own delegated operations, parsed once when the module loads (a frozen table). */
const OPS = Object.freeze({
  index: delegateOf('__a0[__a1]', true),
  optIndex: delegateOf('__a0[?__a1]', true),
  eq: delegateOf('__a0 == __a1', true),
  add: delegateOf('__a0 + __a1', true),
  sub: delegateOf('__a0 - __a1', true),
  mul: delegateOf('__a0 * __a1', true),
  div: delegateOf('__a0 / __a1', true),
  mod: delegateOf('__a0 % __a1', true),
  neg: delegateOf('-__a0', true),
  not: delegateOf('!__a0', true),
  lt: delegateOf('__a0 < __a1', true),
  le: delegateOf('__a0 <= __a1', true),
  gt: delegateOf('__a0 > __a1', true),
  ge: delegateOf('__a0 >= __a1', true),
  in: delegateOf('__a0 in __a1', true),
  size: delegateOf('size(__a0)', true),
});

/** The delegate of `t.f` for a field name (`__a0[__a1]` when it is not an identifier). */
export function selectDelegate(f: string, optional: boolean): Delegate {
  return delegateOf(IDENT.test(f) ? `__a0.${optional ? '?' : ''}${f}` : optional ? '__a0[?__a1]' : '__a0[__a1]');
}

export function err(message: string): EvaluationError {
  return new EvaluationError(message);
}

/** Thrown when the meter is over its limit (engine.ts turns it into a `cost` error). */
export function over(m: Meter): never {
  throw new CostLimitExceeded(m);
}

/** `t.f` */
export function sel(t: unknown, f: string, d: Delegate): unknown {
  if (t === null || typeof t !== 'object') throw err(`No such key: ${f}`);
  if (isPlain(t)) {
    const v = Object.hasOwn(t, f) ? (t as Record<string, unknown>)[f] : undefined;
    if (v === undefined) throw err(`No such key: ${f}`);
    return v;
  }
  if (t instanceof Map) {
    const v: unknown = t.get(f);
    if (v === undefined) throw err(`No such key: ${f}`);
    return v;
  }
  if (Array.isArray(t)) throw err(`No such key: ${f}`);
  return viaCelJs(d, t, f);
}

export const NONE = Optional.none();

/** `t.?f` */
export function osel(t: unknown, f: string, d: Delegate): unknown {
  let obj = t;
  if (obj instanceof Optional) {
    if (!obj.hasValue()) return NONE;
    obj = obj.value();
  }
  if (obj !== null && typeof obj === 'object') {
    if (isPlain(obj)) {
      const v = Object.hasOwn(obj, f) ? (obj as Record<string, unknown>)[f] : undefined;
      return v === undefined ? NONE : Optional.of(typeof v === 'number' ? read(obj, v) : v);
    }
    if (obj instanceof Map) {
      const v: unknown = obj.get(f);
      return v === undefined ? NONE : Optional.of(v);
    }
  }
  return viaCelJs(d, t, f);
}

/**
 * The value of a `.?` chain step, or ABSENT: `a.?b.?c.orValue(d)` runs
 * without an Optional per step. Anything but a plain map or Map goes through
 * {@link osel} (and its result is unwrapped).
 */
export const ABSENT: unique symbol = Symbol('absent');

export function ostep(t: unknown, f: string, d: Delegate): unknown {
  if (t === ABSENT) return ABSENT;
  if (t !== null && typeof t === 'object') {
    if (isPlain(t)) {
      const v = Object.hasOwn(t, f) ? (t as Record<string, unknown>)[f] : undefined;
      return v === undefined ? ABSENT : typeof v === 'number' ? read(t, v) : v;
    }
    if (t instanceof Map) {
      const v: unknown = t.get(f);
      return v === undefined ? ABSENT : v;
    }
  }
  const o = osel(t, f, d);
  return o instanceof Optional ? (o.hasValue() ? o.value() : ABSENT) : o;
}

/** The first step of a chain on a value that may itself be an Optional. */
export function ostart(t: unknown, f: string, d: Delegate): unknown {
  if (t instanceof Optional) return t.hasValue() ? ostep(t.value(), f, d) : ABSENT;
  return ostep(t, f, d);
}

/** `t[k]` */
export function idx(t: unknown, k: unknown): unknown {
  if (Array.isArray(t) && (typeof k === 'bigint' || typeof k === 'number')) {
    const i = Number(k);
    const v: unknown = Number.isInteger(i) ? t[i] : undefined;
    // cel-js's message (its `length || size` prints "undefined" for an empty list).
    if (v === undefined) throw err(`No such key: index out of bounds, index ${i} ${i < 0 ? '< 0' : `>= size ${t.length || undefined}`}`);
    return typeof v === 'number' ? read(t, v) : v;
  }
  if (t !== null && typeof t === 'object' && typeof k === 'string' && isPlain(t)) {
    const v = Object.hasOwn(t, k) ? (t as Record<string, unknown>)[k] : undefined;
    if (v === undefined) throw err(`No such key: ${k}`);
    return typeof v === 'number' ? read(t, v) : v;
  }
  return viaCelJs(OPS.index, t, k);
}

/** `t[?k]` */
export function oidx(t: unknown, k: unknown): unknown {
  if (t !== null && typeof t === 'object' && typeof k === 'string' && isPlain(t)) {
    const v = Object.hasOwn(t, k) ? (t as Record<string, unknown>)[k] : undefined;
    return v === undefined ? NONE : Optional.of(typeof v === 'number' ? read(t, v) : v);
  }
  return viaCelJs(OPS.optIndex, t, k);
}

/** CEL equality (heterogeneous: numbers compare by value across int, uint and double; other types are unequal). */
export function eq(a: unknown, b: unknown): boolean {
  if (a === b) return a === a; // NaN != NaN
  const ta = typeof a;
  const tb = typeof b;
  if (ta === 'string' || ta === 'boolean' || tb === 'string' || tb === 'boolean') return false;
  if ((ta === 'bigint' || ta === 'number') && (tb === 'bigint' || tb === 'number')) return a == b;
  if (a === null || b === null) return false;
  return viaCelJs(OPS.eq, a, b) as boolean;
}

export function ne(a: unknown, b: unknown): boolean {
  return !eq(a, b);
}

function checkInt(v: bigint): bigint {
  if (v > MAX_INT || v < MIN_INT) throw err(`integer overflow: ${v}`);
  return v;
}

export function add(a: unknown, b: unknown): unknown {
  const ta = typeof a;
  if (ta === typeof b) {
    if (ta === 'bigint') return checkInt((a as bigint) + (b as bigint));
    if (ta === 'number' || ta === 'string') return (a as number) + (b as number);
  }
  if (Array.isArray(a) && Array.isArray(b)) return a.length === 0 ? b : b.length === 0 ? a : concat(a, b);
  return viaCelJs(OPS.add, a, b);
}

/** list + list: numbers of an input list are converted into the new (CEL-built) list. */
function concat(a: unknown[], b: unknown[]): unknown[] {
  const out = new Array<unknown>(a.length + b.length);
  const ia = isInput(a);
  const ib = isInput(b);
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    out[i] = ia && typeof x === 'number' ? num(x) : x;
  }
  for (let i = 0; i < b.length; i++) {
    const x = b[i];
    out[a.length + i] = ib && typeof x === 'number' ? num(x) : x;
  }
  return built(out);
}

export function sub(a: unknown, b: unknown): unknown {
  const ta = typeof a;
  if (ta === typeof b) {
    if (ta === 'bigint') return checkInt((a as bigint) - (b as bigint));
    if (ta === 'number') return (a as number) - (b as number);
  }
  return viaCelJs(OPS.sub, a, b);
}

export function mul(a: unknown, b: unknown): unknown {
  const ta = typeof a;
  if (ta === typeof b) {
    if (ta === 'bigint') return checkInt((a as bigint) * (b as bigint));
    if (ta === 'number') return (a as number) * (b as number);
  }
  return viaCelJs(OPS.mul, a, b);
}

export function div(a: unknown, b: unknown): unknown {
  const ta = typeof a;
  if (ta === typeof b) {
    if (ta === 'bigint') {
      if (b === 0n) throw err('division by zero');
      return checkInt((a as bigint) / (b as bigint));
    }
    if (ta === 'number') return (a as number) / (b as number);
  }
  return viaCelJs(OPS.div, a, b);
}

export function mod(a: unknown, b: unknown): unknown {
  if (typeof a === 'bigint' && typeof b === 'bigint') {
    if (b === 0n) throw err('modulo by zero');
    // int64 MIN % -1 overflows in cel-go (the quotient does).
    if (a === MIN_INT && b === -1n) throw err(`integer overflow: ${-MIN_INT}`);
    return a % b;
  }
  return viaCelJs(OPS.mod, a, b);
}

export function neg(a: unknown): unknown {
  if (typeof a === 'bigint') return checkInt(-a);
  if (typeof a === 'number') return -a;
  return viaCelJs(OPS.neg, a);
}

export function not(a: unknown): unknown {
  if (typeof a === 'boolean') return !a;
  return viaCelJs(OPS.not, a);
}

function orderable(a: unknown, b: unknown): boolean {
  const ta = typeof a;
  const tb = typeof b;
  if (ta === 'string' || tb === 'string' || ta === 'boolean' || tb === 'boolean') return ta === tb;
  return (ta === 'bigint' || ta === 'number') && (tb === 'bigint' || tb === 'number');
}

export function lt(a: unknown, b: unknown): unknown {
  return orderable(a, b) ? (a as number) < (b as number) : viaCelJs(OPS.lt, a, b);
}
export function le(a: unknown, b: unknown): unknown {
  return orderable(a, b) ? (a as number) <= (b as number) : viaCelJs(OPS.le, a, b);
}
export function gt(a: unknown, b: unknown): unknown {
  return orderable(a, b) ? (a as number) > (b as number) : viaCelJs(OPS.gt, a, b);
}
export function ge(a: unknown, b: unknown): unknown {
  return orderable(a, b) ? (a as number) >= (b as number) : viaCelJs(OPS.ge, a, b);
}

/** `a in b` */
export function inop(a: unknown, b: unknown): unknown {
  if (Array.isArray(b)) {
    const ta = typeof a;
    if (ta === 'string' || ta === 'boolean') {
      for (let i = 0; i < b.length; i++) if (b[i] === a) return true;
      return false;
    }
    if (ta === 'bigint' || ta === 'number') {
      for (let i = 0; i < b.length; i++) {
        const x: unknown = b[i];
        if ((typeof x === 'bigint' || typeof x === 'number') && x == a) return true;
      }
      return false;
    }
    if (a === null) {
      for (let i = 0; i < b.length; i++) if (b[i] === null) return true;
      return false;
    }
  } else if (b !== null && typeof b === 'object' && typeof a === 'string' && isPlain(b)) {
    return Object.hasOwn(b, a) && (b as Record<string, unknown>)[a] !== undefined;
  }
  return viaCelJs(OPS.in, a, b);
}

/** size() of a string counts code points. */
function stringSize(s: string): bigint {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return BigInt(n);
}

export function size(v: unknown): unknown {
  if (typeof v === 'string') return stringSize(v);
  if (Array.isArray(v)) return BigInt(v.length);
  if (v !== null && typeof v === 'object' && isPlain(v)) return BigInt(Object.keys(v).length);
  return viaCelJs(OPS.size, v);
}
