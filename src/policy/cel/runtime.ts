/**
 * The runtime of the JavaScript that codegen.ts generates from CEL: the
 * object the generated code receives as `R`. The operations with a fast
 * path and a cel-js delegate are in runtime-ops.ts; here are the pieces of
 * control flow (conditions, comprehension ranges, `&&`/`||` error
 * absorption, optionals, `has`), the regex functions with the evaluation's
 * meter, and the cost charges.
 *
 * Pure: no I/O.
 */
import { Optional } from '@marcbachmann/cel-js';
import { Duration, UnsignedInt } from '@marcbachmann/cel-js/evaluator';
import { CostLimitExceeded, sizeCost } from './meter.ts';
import { binaryCost, callCost, rangeCost } from './charges.ts';
import { traversal } from './cost.ts';
import { cachedRe2, find, findAll, matches } from './lib/regex.ts';
import { built, cel, delegateOf, isInput, isPlain, num, read, viaCelJs, type Delegate } from './values-marks.ts';
import * as ops from './runtime-ops.ts';
import { readVariable, UNSET } from './variable-frame.ts';
import { ABSENT, NONE, err } from './runtime-ops.ts';

export { ABSENT } from './runtime-ops.ts';

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
function has(root: unknown, fields: readonly string[], kinds: readonly string[], delegates: readonly (Delegate | undefined)[]): boolean {
  let obj = root;
  let optionalContext = false;
  for (let j = 0; j < fields.length; j++) {
    const f = fields[j] as string;
    if (kinds[j] === '.?') optionalContext = true;
    const next = fieldLazy(obj, f);
    if (next === DELEGATE) {
      const d = delegates[j];
      if (d === undefined) throw err(`No such key: ${f}`);
      return viaCelJs(d, obj) as boolean;
    }
    obj = next;
    if (obj !== undefined) continue;
    const last = j === fields.length - 1;
    if (!optionalContext && !last && kinds[j] === '.') throw err(`No such key: ${f}`);
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

/**
 * The delegates of has(a.f1.f2…) from each field on (`has(__a0.f2.f3)`),
 * for a step that meets a value cel-js must read; undefined where a field
 * is not an identifier (that step is an error).
 */
export function hasDelegates(fields: readonly string[]): (Delegate | undefined)[] {
  return fields.map((_, j) => {
    const rest = fields.slice(j);
    return rest.every((x) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(x)) ? delegateOf(`has(__a0.${rest.join('.')})`) : undefined;
  });
}

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
  over: ops.over,
  sz: sizeCost,
  sel: ops.sel,
  osel: ops.osel,
  ostep: ops.ostep,
  ostart: ops.ostart,
  idx: ops.idx,
  oidx: ops.oidx,
  eq: ops.eq,
  ne: ops.ne,
  add: ops.add,
  sub: ops.sub,
  mul: ops.mul,
  div: ops.div,
  mod: ops.mod,
  neg: ops.neg,
  not: ops.not,
  lt: ops.lt,
  le: ops.le,
  gt: ops.gt,
  ge: ops.ge,
  inop: ops.inop,
  size: ops.size,
  matches,
  find,
  findAll,
  /** A pattern computed at run time, compiled through its call site's cache (codegen-calls.ts). */
  regex: cachedRe2,
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
  /** ceil(0.1·n): the cost of walking n characters (codegen-operators.ts). */
  trav: traversal,
  call: viaCelJs,
  err,
  /** A composition variable not computed yet in its frame (codegen-select.ts). */
  UNSET,
  variable: readVariable,
});

export type Runtime = typeof runtime;
