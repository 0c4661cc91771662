/**
 * The runtime of the JavaScript that codegen.ts generates from CEL: the
 * operations whose CEL semantics take more than an inline expression.
 *
 * Each helper has a fast path for the values Kubernetes objects are made of
 * (plain objects as maps, arrays as lists, bigint ints, number doubles,
 * strings, booleans, null) and hands anything else to cel-js itself through
 * its public API: a one-operation expression such as `__a0 + __a1` or
 * `__a0.f(__a1)`, parsed once in an environment where the operands are
 * `dyn` variables, and evaluated with the operand values ({@link viaCelJs}).
 * So a uint, a duration, a Map, a library type or a type error behaves
 * exactly as cel-js's interpreter makes it behave, error message included,
 * while the common case never leaves the generated code.
 *
 * Deviations from cel-js 8.0, on purpose (cel-spec says so, cel-go does so):
 * `-x`, `x / y` and `x % y` on ints raise an overflow error where the result
 * is outside int64 (cel-js returns the out-of-range bigint).
 *
 * Pure: no I/O.
 */
import { EvaluationError, Optional, type Environment, type ParseResult } from '@marcbachmann/cel-js';
import { Duration, UnsignedInt } from '@marcbachmann/cel-js/evaluator';
import { CostLimitExceeded, type Meter } from './meter.ts';
import { sizeCost } from './meter.ts';
import { binaryCost, callCost, rangeCost } from './charges.ts';

const MAX_INT = 9223372036854775807n;
const MIN_INT = -9223372036854775808n;

/** The most operands a delegated operation has (cel-js's maxCallArguments, plus a receiver). */
export const MAX_OPERANDS = 34;
/** The names the operands of a delegated operation have (dyn variables of the delegate environment). */
export const operandName = (i: number): string => `__a${i}`;

let delegateEnv: Environment | undefined;
const delegates = new Map<string, ParseResult>();

/**
 * Sets the environment delegated operations are parsed in: Portal's, with
 * the operand variables declared. Called once by engine.ts.
 */
export function setDelegateEnvironment(env: Environment): void {
  delegateEnv = env;
  delegates.clear();
}

/** The parsed delegate for a source (cached: the set of sources is bounded by the compiled programs). */
export function delegate(source: string): ParseResult {
  let p = delegates.get(source);
  if (p === undefined) {
    if (delegateEnv === undefined) throw new Error('the CEL delegate environment is not set');
    p = delegateEnv.parse(source);
    const checked = p.check();
    if (!checked.valid) throw checked.error ?? new Error(`cannot delegate ${source}`);
    delegates.set(source, p);
  }
  return p;
}

/**
 * The generated code reads the admission objects as they were parsed from
 * JSON, where every number is a double; CEL types integral numbers (a
 * `runAsUser`, a `containerPort`) as int. So a number read from an input
 * list or map becomes an int when integral ({@link num}), and a number read
 * from a list or map that CEL built (a literal, a `map()` result, what
 * cel-js returned) stays as it is: the generated code and this runtime mark
 * what they build ({@link built}). Input aggregates stay as parsed, and
 * become CEL values ({@link cel}) only when they leave the generated code
 * (to cel-js, or as a result).
 */
function num(v: number): number | bigint {
  return Number.isSafeInteger(v) ? BigInt(v) : v;
}

/**
 * Aggregates built by CEL that hold an integral double (`[2.0]`): reading
 * from one must not turn it into an int. Any other aggregate reads as
 * input (an int read from a CEL-built list is a bigint already, a
 * non-integral double is not converted), so only those few are marked: a
 * WeakSet entry per list would cost more than the reads it saves.
 */
const builtByCel = new WeakSet<object>();

function holdsIntegralDouble(v: object): boolean {
  const values = Array.isArray(v) ? v : isPlain(v) ? Object.values(v) : [];
  for (const x of values) if (typeof x === 'number' && Number.isInteger(x)) return true;
  return false;
}

/** The mark of an object whose values are all CEL values (a property: a WeakSet entry per evaluation costs GC time). */
const CEL_VALUES = Symbol('CEL values');

/** Marks an object whose values are all CEL values (a `variables` object: reading it must not evaluate it). */
export function celValuesOnly<T extends object>(v: T): T {
  Object.defineProperty(v, CEL_VALUES, { value: true });
  return v;
}

/** Marks an aggregate built by CEL when it must be (see builtByCel); returns it. Call it once its elements are in. */
export function built<T extends object>(v: T): T {
  if (holdsIntegralDouble(v)) builtByCel.add(v);
  return v;
}

/** True for an aggregate of the input (not built by CEL). */
function isInput(v: unknown): boolean {
  return (v as { [CEL_VALUES]?: boolean })[CEL_VALUES] !== true && !builtByCel.has(v as object);
}

/** A number read from `container`: an int when the container is input JSON and the number integral. */
function read(container: unknown, v: number): number | bigint {
  return isInput(container) ? num(v) : v;
}

/** Marks a value cel-js returned, and every aggregate in it, as built by CEL. */
export function builtDeep(v: unknown): unknown {
  if (v !== null && typeof v === 'object' && isInput(v) && (Array.isArray(v) || isPlain(v))) {
    built(v);
    for (const x of Array.isArray(v) ? v : Object.values(v)) builtDeep(x);
  }
  return v;
}

const celValues = new WeakMap<object, unknown>();

/**
 * A value as cel-js expects it: input aggregates copied with integral
 * numbers as ints (cached per object), CEL-built ones copied only where
 * they hold input aggregates. `input`: whether a number here was read from
 * input JSON unconverted.
 */
export function cel(v: unknown, input = false): unknown {
  if (typeof v === 'number') return input ? num(v) : v;
  if (v === null || typeof v !== 'object') return v;
  if (v instanceof Optional) return v.hasValue() ? Optional.of(cel(v.value())) : v;
  const isArray = Array.isArray(v);
  if (!isArray && !isPlain(v)) return v;
  const raw = isInput(v);
  if (raw) {
    const hit = celValues.get(v);
    if (hit !== undefined) return hit;
  }
  let out: unknown;
  if (isArray) {
    out = v.map((x) => cel(x, raw));
  } else {
    const o: Record<string, unknown> = {};
    for (const k of Object.keys(v)) {
      const x = cel((v as Record<string, unknown>)[k], raw);
      if (k === '__proto__') Object.defineProperty(o, k, { value: x, enumerable: true, writable: true, configurable: true });
      else o[k] = x;
    }
    out = o;
  }
  // Each level marks itself (its elements were converted above).
  built(out as object);
  if (raw) celValues.set(v, out);
  return out;
}

/** Evaluates a delegated operation on operand values with cel-js's public evaluation. */
function viaCelJs(source: string, ...operands: unknown[]): unknown {
  const context: Record<string, unknown> = {};
  for (let i = 0; i < operands.length; i++) context[operandName(i)] = cel(operands[i]);
  return builtDeep(delegate(source)(context));
}

function err(message: string): EvaluationError {
  return new EvaluationError(message);
}

/** Thrown when the meter is over its limit (engine.ts turns it into a `cost` error). */
function over(m: Meter): never {
  throw new CostLimitExceeded(m);
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

function isPlain(v: object): boolean {
  const c = (v as { constructor?: unknown }).constructor;
  return c === Object || c === undefined;
}

/** `t.f` */
function sel(t: unknown, f: string): unknown {
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
  return viaCelJs(IDENT.test(f) ? `__a0.${f}` : '__a0[__a1]', t, f);
}

const NONE = Optional.none();

/** `t.?f` */
function osel(t: unknown, f: string): unknown {
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
  return viaCelJs(IDENT.test(f) ? `__a0.?${f}` : '__a0[?__a1]', t, f);
}

/**
 * The value of a `.?` chain step, or ABSENT: `a.?b.?c.orValue(d)` runs
 * without an Optional per step. Anything but a plain map or Map goes through
 * {@link osel} (and its result is unwrapped).
 */
export const ABSENT: unique symbol = Symbol('absent');

function ostep(t: unknown, f: string): unknown {
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
  const o = osel(t, f);
  return o instanceof Optional ? (o.hasValue() ? o.value() : ABSENT) : o;
}

/** The first step of a chain on a value that may itself be an Optional. */
function ostart(t: unknown, f: string): unknown {
  if (t instanceof Optional) return t.hasValue() ? ostep(t.value(), f) : ABSENT;
  return ostep(t, f);
}

/** `t[k]` */
function idx(t: unknown, k: unknown): unknown {
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
  return viaCelJs('__a0[__a1]', t, k);
}

/** `t[?k]` */
function oidx(t: unknown, k: unknown): unknown {
  if (t !== null && typeof t === 'object' && typeof k === 'string' && isPlain(t)) {
    const v = Object.hasOwn(t, k) ? (t as Record<string, unknown>)[k] : undefined;
    return v === undefined ? NONE : Optional.of(typeof v === 'number' ? read(t, v) : v);
  }
  return viaCelJs('__a0[?__a1]', t, k);
}

/** CEL equality (heterogeneous: numbers compare by value across int, uint and double; other types are unequal). */
function eq(a: unknown, b: unknown): boolean {
  if (a === b) return a === a; // NaN != NaN
  const ta = typeof a;
  const tb = typeof b;
  if (ta === 'string' || ta === 'boolean' || tb === 'string' || tb === 'boolean') return false;
  if ((ta === 'bigint' || ta === 'number') && (tb === 'bigint' || tb === 'number')) return a == b;
  if (a === null || b === null) return false;
  return viaCelJs('__a0 == __a1', a, b) as boolean;
}

function ne(a: unknown, b: unknown): boolean {
  return !eq(a, b);
}

function checkInt(v: bigint): bigint {
  if (v > MAX_INT || v < MIN_INT) throw err(`integer overflow: ${v}`);
  return v;
}

function add(a: unknown, b: unknown): unknown {
  const ta = typeof a;
  if (ta === typeof b) {
    if (ta === 'bigint') return checkInt((a as bigint) + (b as bigint));
    if (ta === 'number' || ta === 'string') return (a as number) + (b as number);
  }
  if (Array.isArray(a) && Array.isArray(b)) return a.length === 0 ? b : b.length === 0 ? a : concat(a, b);
  return viaCelJs('__a0 + __a1', a, b);
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

function sub(a: unknown, b: unknown): unknown {
  const ta = typeof a;
  if (ta === typeof b) {
    if (ta === 'bigint') return checkInt((a as bigint) - (b as bigint));
    if (ta === 'number') return (a as number) - (b as number);
  }
  return viaCelJs('__a0 - __a1', a, b);
}

function mul(a: unknown, b: unknown): unknown {
  const ta = typeof a;
  if (ta === typeof b) {
    if (ta === 'bigint') return checkInt((a as bigint) * (b as bigint));
    if (ta === 'number') return (a as number) * (b as number);
  }
  return viaCelJs('__a0 * __a1', a, b);
}

function div(a: unknown, b: unknown): unknown {
  const ta = typeof a;
  if (ta === typeof b) {
    if (ta === 'bigint') {
      if (b === 0n) throw err('division by zero');
      return checkInt((a as bigint) / (b as bigint));
    }
    if (ta === 'number') return (a as number) / (b as number);
  }
  return viaCelJs('__a0 / __a1', a, b);
}

function mod(a: unknown, b: unknown): unknown {
  if (typeof a === 'bigint' && typeof b === 'bigint') {
    if (b === 0n) throw err('modulo by zero');
    // int64 MIN % -1 overflows in cel-go (the quotient does).
    if (a === MIN_INT && b === -1n) throw err(`integer overflow: ${-MIN_INT}`);
    return a % b;
  }
  return viaCelJs('__a0 % __a1', a, b);
}

function neg(a: unknown): unknown {
  if (typeof a === 'bigint') return checkInt(-a);
  if (typeof a === 'number') return -a;
  return viaCelJs('-__a0', a);
}

function not(a: unknown): unknown {
  if (typeof a === 'boolean') return !a;
  return viaCelJs('!__a0', a);
}

function orderable(a: unknown, b: unknown): boolean {
  const ta = typeof a;
  const tb = typeof b;
  if (ta === 'string' || tb === 'string' || ta === 'boolean' || tb === 'boolean') return ta === tb;
  return (ta === 'bigint' || ta === 'number') && (tb === 'bigint' || tb === 'number');
}

function lt(a: unknown, b: unknown): unknown {
  return orderable(a, b) ? (a as number) < (b as number) : viaCelJs('__a0 < __a1', a, b);
}
function le(a: unknown, b: unknown): unknown {
  return orderable(a, b) ? (a as number) <= (b as number) : viaCelJs('__a0 <= __a1', a, b);
}
function gt(a: unknown, b: unknown): unknown {
  return orderable(a, b) ? (a as number) > (b as number) : viaCelJs('__a0 > __a1', a, b);
}
function ge(a: unknown, b: unknown): unknown {
  return orderable(a, b) ? (a as number) >= (b as number) : viaCelJs('__a0 >= __a1', a, b);
}

/** `a in b` */
function inop(a: unknown, b: unknown): unknown {
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
  return viaCelJs('__a0 in __a1', a, b);
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

function size(v: unknown): unknown {
  if (typeof v === 'string') return stringSize(v);
  if (Array.isArray(v)) return BigInt(v.length);
  if (v !== null && typeof v === 'object' && isPlain(v)) return BigInt(Object.keys(v).length);
  return viaCelJs('size(__a0)', v);
}

/** The condition of `?:` (and of a macro's predicate, with its label). */
function cond(v: unknown, label: string | undefined): boolean {
  if (v === true || v === false) return v;
  throw err(`${label ?? 'Ternary condition must be bool'}, got '${typeName(v)}'`);
}

/** The CEL type name of a value, for messages. */
function typeName(v: unknown): string {
  switch (typeof v) {
    case 'bigint':
      return 'int';
    case 'number':
      return 'double';
    case 'string':
      return 'string';
    case 'boolean':
      return 'bool';
    case 'object':
      if (v === null) return 'null';
      if (Array.isArray(v)) return 'list';
      if (v instanceof Uint8Array) return 'bytes';
      if (v instanceof Optional) return 'optional';
      if (v instanceof UnsignedInt) return 'uint';
      if (v instanceof Duration) return 'google.protobuf.Duration';
      if (v instanceof Date) return 'google.protobuf.Timestamp';
      if (v instanceof Map || isPlain(v)) return 'map';
      return String((v as { constructor: { name: string } }).constructor.name);
    default:
      return typeof v;
  }
}

/** The elements a one-variable comprehension ranges over (a map's keys). */
function range(coll: unknown): unknown[] {
  if (Array.isArray(coll)) return coll;
  if (coll instanceof Map) return [...coll.keys()];
  if (coll instanceof Set) return [...coll];
  // As cel-js: any other object ranges over its own keys.
  if (coll !== null && typeof coll === 'object') return Object.keys(coll);
  throw err(`Expression of type '${typeName(coll)}' cannot be range of a comprehension (must be list, map, or dynamic).`);
}

/** [key or index, value] pairs for a two-variable comprehension. */
function entries(coll: unknown): [unknown, unknown][] {
  const at = (x: unknown): unknown => (typeof x === 'number' ? read(coll, x) : x);
  if (Array.isArray(coll)) return coll.map((x, i) => [BigInt(i), at(x)]);
  if (coll instanceof Map) return [...coll.entries()];
  if (coll !== null && typeof coll === 'object' && isPlain(coll)) return Object.keys(coll).map((k) => [k, at((coll as Record<string, unknown>)[k])]);
  throw err('two-variable comprehensions need a list or a map');
}

/** The end of `l && r` / `l || r` (exp = false / true) when `l` did not decide: cel-js's _logicalOp. */
function logical(l: unknown, r: unknown, exp: boolean): boolean {
  if (l === !exp && typeof r === 'boolean') return r;
  if (r === exp) return exp;
  if (r === !exp) {
    if (l === r) return r;
    throw l instanceof Error ? l : err(`Logical operator requires bool operands, got '${typeName(l)}'`);
  }
  throw err(`Logical operator requires bool operands, got '${typeName(r)}'`);
}

/** An exception as a value (`&&`, `||` and comprehensions absorb errors). */
function caught(e: unknown): Error {
  if (e instanceof CostLimitExceeded) throw e;
  return e instanceof Error ? e : new Error(String(e));
}

function optional(v: unknown, what: string): Optional {
  if (v instanceof Optional) return v;
  throw err(`${what} must be optional`);
}

/** transformMapEntry's step: one entry added to `out`. */
function putEntry(out: Record<string, unknown>, r: unknown): void {
  const pairs = r instanceof Map ? [...r.entries()] : Object.entries(r as object);
  if (pairs.length !== 1) throw err('transformMapEntry: the expression must give a map of exactly one entry');
  const [[key, value]] = pairs as [[unknown, unknown]];
  if (Object.hasOwn(out, String(key))) throw err(`transformMapEntry: duplicate key ${String(key)}`);
  out[String(key)] = value;
}

/**
 * A map literal's value, as cel-js builds it: a plain object, keys as
 * property names, a later duplicate key winning, and `__proto__`,
 * `constructor` and `prototype` keys left out.
 */
function mapOf(keys: unknown[], values: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    if (k === '__proto__' || k === 'constructor' || k === 'prototype') continue;
    out[String(k)] = values[i];
  }
  return built(out);
}

/** What cel-js's has() reads for one field: the value, or undefined when absent. */
function fieldLazy(obj: unknown, f: string): unknown {
  if (obj === null || typeof obj !== 'object') return undefined;
  if (isPlain(obj)) return Object.hasOwn(obj, f) ? (obj as Record<string, unknown>)[f] : undefined;
  if (obj instanceof Map) return obj.get(f) as unknown;
  if (Array.isArray(obj)) return undefined;
  return DELEGATE;
}
const DELEGATE = Symbol('delegate');

/**
 * `has(root.f1.f2…)` as cel-js's has macro: a missing intermediate field
 * (outside a `.?`) is an error, a missing last one is false. `fields` and
 * `ops` go from the root outwards.
 */
function has(root: unknown, fields: readonly string[], ops: readonly string[]): boolean {
  let obj = root;
  let optionalContext = false;
  for (let j = 0; j < fields.length; j++) {
    const f = fields[j] as string;
    if (ops[j] === '.?') optionalContext = true;
    const next = fieldLazy(obj, f);
    if (next === DELEGATE) {
      const rest = fields.slice(j);
      if (!rest.every((x) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(x))) throw err(`No such key: ${f}`);
      return viaCelJs(`has(__a0.${rest.join('.')})`, obj) as boolean;
    }
    obj = next;
    if (obj !== undefined) continue;
    const last = j === fields.length - 1;
    if (!optionalContext && !last && ops[j] === '.') throw err(`No such key: ${f}`);
    return false;
  }
  return obj !== undefined;
}

/** transformMap's step. */
function put(out: Record<string, unknown>, k: string, v: unknown): void {
  if (k === '__proto__') Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
  else out[k] = v;
}

/** `[]`: one shared list (CEL values are immutable; the generated code pushes only to lists it created). */
const EMPTY_LIST: readonly unknown[] = Object.freeze(built([]));

/** The runtime object generated code receives as `R`. */
export const runtime = Object.freeze({
  ABSENT,
  NONE,
  EMPTY_LIST,
  num,
  read,
  isInput,
  built,
  cel,
  Optional,
  over,
  sz: sizeCost,
  sel,
  osel,
  ostep,
  ostart,
  idx,
  oidx,
  eq,
  ne,
  add,
  sub,
  mul,
  div,
  mod,
  neg,
  not,
  lt,
  le,
  gt,
  ge,
  inop,
  size,
  cond,
  range,
  entries,
  logical,
  caught,
  optional,
  putEntry,
  put,
  has,
  mapOf,
  callCost,
  binaryCost,
  rangeCost,
  call: viaCelJs,
  err,
});

export type Runtime = typeof runtime;
