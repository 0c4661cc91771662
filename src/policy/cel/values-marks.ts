/**
 * Input JSON versus values CEL built, and the way to cel-js.
 *
 * The generated code reads the admission objects as they were parsed from
 * JSON, where every number is a double; CEL types integral numbers (a
 * `runAsUser`, a `containerPort`) as int. So a number read from an input
 * list or map becomes an int when integral ({@link num}), and a number read
 * from a list or map that CEL built (a literal, a `map()` result, what
 * cel-js returned) stays as it is: the generated code and the runtime mark
 * what they build ({@link built}). Input aggregates stay as parsed, and
 * become CEL values ({@link cel}) only when they leave the generated code
 * (to cel-js, or as a result).
 *
 * Marks are non-enumerable symbol properties of the values themselves (CEL
 * never sees symbols): no process-wide WeakSet (issue 21), and one property
 * read per check.
 *
 * Pure: no I/O.
 */
import { Optional, type ParseResult } from '@marcbachmann/cel-js';
import { operandName, parseDelegate } from './environment.ts';

export function num(v: number): number | bigint {
  return Number.isSafeInteger(v) ? BigInt(v) : v;
}

/** The mark of an aggregate whose numbers are CEL values (built by CEL, or a `variables` object). */
const CEL_VALUES = Symbol('CEL values');

export function isPlain(v: object): boolean {
  const c = (v as { constructor?: unknown }).constructor;
  return c === Object || c === undefined;
}

function holdsIntegralDouble(v: object): boolean {
  const values = Array.isArray(v) ? v : isPlain(v) ? Object.values(v) : [];
  for (const x of values) if (typeof x === 'number' && Number.isInteger(x)) return true;
  return false;
}

function mark(v: object): void {
  Object.defineProperty(v, CEL_VALUES, { value: true });
}

/** Marks an object whose values are all CEL values (a `variables` object: reading it must not evaluate it). */
export function celValuesOnly<T extends object>(v: T): T {
  mark(v);
  return v;
}

/**
 * Marks an aggregate built by CEL when it must be, and returns it. Call it
 * once its elements are in. Only aggregates that hold an integral double
 * (`[2.0]`) need the mark: reading any other one as input gives the same
 * values (an int in a CEL-built list is a bigint already).
 */
export function built<T extends object>(v: T): T {
  if (holdsIntegralDouble(v) && !Object.isFrozen(v)) mark(v);
  return v;
}

/** True for an aggregate of the input (not built by CEL). */
export function isInput(v: unknown): boolean {
  return (v as { [CEL_VALUES]?: boolean })[CEL_VALUES] !== true;
}

/** A number read from `container`: an int when the container is input JSON and the number integral. */
export function read(container: unknown, v: number): number | bigint {
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

/**
 * A value as cel-js expects it: input aggregates copied with integral
 * numbers as ints, CEL-built ones copied only where they hold input
 * aggregates. `input`: whether a number here was read from input JSON
 * unconverted. Not cached: values reach cel-js only on the rare delegated
 * operations and in fallback expressions, and a copy costs what the
 * operation's cost charge already counts (the size of its operands).
 */
export function cel(v: unknown, input = false): unknown {
  if (typeof v === 'number') return input ? num(v) : v;
  if (v === null || typeof v !== 'object') return v;
  if (v instanceof Optional) return v.hasValue() ? Optional.of(cel(v.value())) : v;
  const isArray = Array.isArray(v);
  if (!isArray && !isPlain(v)) return v;
  const raw = isInput(v);
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
  return built(out as object);
}

/**
 * An operation handed to cel-js: its source (`__a0.f(__a1)`), parsed on
 * first use and kept here. Each call site of the generated code owns one
 * (a constant of its program), and the runtime's fixed operations share
 * the frozen table in runtime-ops.ts: no process-wide cache.
 */
export interface Delegate {
  readonly source: string;
  program: ParseResult | undefined;
}

/** A delegate of `source`, parsed now when `eager` (so a source cel-js refuses throws here). */
export function delegateOf(source: string, eager = false): Delegate {
  return { source, program: eager ? parseDelegate(source) : undefined };
}

/** Evaluates a delegated operation on operand values with cel-js's public evaluation. */
export function viaCelJs(d: Delegate, ...operands: unknown[]): unknown {
  const context: Record<string, unknown> = {};
  for (let i = 0; i < operands.length; i++) context[operandName(i)] = cel(operands[i]);
  d.program ??= parseDelegate(d.source);
  return builtDeep(d.program(context));
}
