/**
 * What the CEL → JavaScript generator's parts share (codegen.ts and
 * codegen-*.ts import it; it imports none of them, so the files form no
 * cycle): the AST node shape, the Unsupported error, the source helpers,
 * and the interface of the generator the parts generate on.
 *
 * Pure: no I/O.
 */

/** A node of cel-js's public AST. */
export interface Node {
  op: string;
  args: unknown;
}

/** An AST shape the generator does not compile: the expression runs on cel-js. */
export class Unsupported extends Error {}

export const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

export const isNode = (v: unknown): v is Node => v !== null && typeof v === 'object' && typeof (v as Node).op === 'string';

export function asNode(v: unknown): Node {
  if (!isNode(v)) throw new Unsupported('not an AST node');
  return v;
}

export const str = (s: string): string => JSON.stringify(s);

/** Names an object inherits from Object.prototype (`constructor`, `__proto__`, `toString`, …). */
const INHERITED: ReadonlySet<string> = new Set(Object.getOwnPropertyNames(Object.prototype));

/**
 * A plain map's own value of field `f`, or undefined, as a JavaScript
 * expression. One property read: a map from the input (JSON.parse) or
 * built by CEL inherits only Object.prototype's names, so for any other
 * name a read finds an own property or nothing; those names get an
 * own-property check (Object.hasOwn is a call, several times a read).
 */
export function ownField(obj: string, f: string): string {
  const key = str(f);
  return INHERITED.has(f) ? `(Object.hasOwn(${obj}, ${key}) ? ${obj}[${key}] : undefined)` : `${obj}[${key}]`;
}

/** The generator as its parts (codegen-*.ts) use it; codegen.ts's Generator implements it. */
export interface Generator {
  /** A new temporary (a local of the generated function). */
  temp(): string;
  /** Appends a line of code to the current block. */
  emit(line: string): void;
  /** Adds constant units to the current block's charge. */
  charge(units: number): void;
  /** Generates a nested block; its constant units are charged at its start. */
  inBlock(f: () => string): { code: string; value: string };
  /** A constant passed to the generated code by reference (`K[i]`). */
  constant(v: unknown): string;
  /** The JS local of a comprehension or bind variable in scope. */
  lookup(name: string): string | undefined;
  /**
   * The frame index of a composition variable read from the frame
   * (variable-frame.ts), if it is; undefined means it is read through the
   * `variables` object, which the generator records (readsVariablesObject).
   */
  variableSlot(name: string): number | undefined;
  withScope<T>(bindings: Map<string, string>, f: () => T): T;
  /** The dotted text of a namespace (`optional`, `cel`, `math`): an identifier that is not a variable. */
  namespace(n: Node): string | undefined;
  /** A value as a JS expression evaluated once. */
  value(n: Node): string;
  /** Emits code for `n`; returns a JS expression of its value. `root`: not charged. */
  expr(n: Node, root?: boolean): string;
  /** Charges the size of a produced value (not for the root). */
  sized(v: string, root: boolean): void;
}
