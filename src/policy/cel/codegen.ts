/**
 * CEL to JavaScript: compiles the AST of a type-checked expression (cel-js's
 * public `ParseResult.ast`, the exported `ASTNode` shape: `op` and `args`
 * only) into the source of one JavaScript function, once per policy
 * generation, and instantiates it with `new Function`.
 *
 * The generated function `(ctx, m) => value` reads the CEL context (`ctx`:
 * object, oldObject, request, params, namespaceObject, variables) and
 * charges the cost meter `m` inline:
 * - every evaluated node costs 1 unit, plus the size of the string, list or
 *   map it produces (0.1 per character or element, meter.ts's sizeCost);
 *   calls and operators whose work depends on their inputs charge the cost
 *   model's figure (cost.ts, through charges.ts) before they run, and not
 *   their result's size;
 * - the constant part is summed per straight-line block and charged when the
 *   block starts (so an error half-way charges a little more, never less);
 *   every block start, comprehension iteration and size-dependent call
 *   checks the limit, so a loop or a costly call stops at the limit.
 *
 * Semantics are CEL's as cel-js 8.0 implements them (runtime.ts holds the
 * operations and says where it deviates): `&&`/`||` absorb an error when the
 * other operand decides, comprehensions (`all`, `exists`, `exists_one`,
 * `map`, `filter`, the two-variable ones, `cel.bind`) keep errors of
 * `all`/`exists` steps until the end, optionals are Optional values except
 * inside a `.?` chain ending in `orValue` (no Optional per step).
 *
 * What is not compiled natively is delegated to cel-js's public evaluation:
 * a call to any other function evaluates `__a0.name(__a1)` with the
 * operands computed by the generated code (so its cost is still charged
 * here), and an AST shape the generator does not know makes the whole
 * expression run on cel-js (`Unsupported`; engine.ts counts those).
 *
 * Injection: the only text from the expression that enters the generated
 * source is passed through JSON.stringify (field names, string literals,
 * function names, labels); other literals are numbers printed by
 * JavaScript, or constants passed by reference (`K[i]`).
 *
 * Pure: no I/O.
 */
import { Optional } from '@marcbachmann/cel-js';
import { runtime, type Runtime } from './runtime.ts';
import { built } from './values-marks.ts';
import { sizeCost, type Meter } from './meter.ts';
import * as calls from './codegen-calls.ts';
import { specialisedComparison } from './codegen-operators.ts';
import { index, optionalSelect, select } from './codegen-select.ts';
import { asNode, IDENT, str, Unsupported, type Generator as GeneratorApi, type Node } from './codegen-ast.ts';

export { Unsupported, type Node };

/** One expression as generated code (or the fallback) runs it: context and meter in, value out (throws on an error). */
export type Exec = (ctx: Record<string, unknown>, m: Meter) => unknown;

export interface Generated {
  exec: Exec;
  /** The generated source (for tests and debugging). */
  source: string;
  /** It reads the `variables` object, not only the frame's slots (variable-frame.ts). */
  readsVariablesObject: boolean;
}

/** The activation variables (engine.ts declares them, all `dyn`). */
export interface GenerateOptions {
  variables: readonly string[];
  /** Composition variables read from the context's frame (variable-frame.ts): name → index. */
  slots?: ReadonlyMap<string, number>;
}

const COSTED_OPERATORS: ReadonlySet<string> = new Set(['==', '!=', '<', '<=', '>', '>=', 'in', '+']);
const BINARY: Record<string, string> = { '==': 'eq', '!=': 'ne', '+': 'add', '-': 'sub', '*': 'mul', '/': 'div', '%': 'mod', '<': 'lt', '<=': 'le', '>': 'gt', '>=': 'ge', in: 'inop' };

interface Block {
  lines: string[];
  units: number;
}

/** @internal the code generator (codegen-macros.ts generates the macros on it). */
export class Generator implements GeneratorApi {
  private temps = 0;
  private readonly consts: unknown[] = [];
  private block: Block = { lines: [], units: 0 };
  /** Comprehension and bind variables in scope: CEL name → JS local. */
  private readonly scope: Map<string, string>[] = [];

  constructor(private readonly opts: GenerateOptions) {}

  /** The generated code reads the `variables` object (not only frames' slots). */
  readsVariablesObject = false;

  variableSlot(name: string): number | undefined {
    const slot = this.opts.slots?.get(name);
    if (slot === undefined) this.readsVariablesObject = true;
    return slot;
  }

  generate(root: Node): { source: string; consts: unknown[] } {
    const body = this.inBlock(() => this.expr(root, true));
    const decl = this.temps > 0 ? `let ${Array.from({ length: this.temps }, (_, i) => `t${i}`).join(', ')};\n` : '';
    return { source: `"use strict";\nreturn function celProgram(ctx, m) {\n${decl}${body.code}\nreturn ${body.value};\n};`, consts: this.consts };
  }

  temp(): string {
    return `t${this.temps++}`;
  }

  emit(line: string): void {
    this.block.lines.push(line);
  }

  charge(units: number): void {
    this.block.units += units;
  }

  /** Generates a nested block; its constant units are charged at its start. */
  inBlock(f: () => string): { code: string; value: string } {
    const outer = this.block;
    this.block = { lines: [], units: 0 };
    try {
      const value = f();
      const { lines, units } = this.block;
      const head = units > 0 ? [`if ((m.used += ${units}) > m.limit) R.over(m);`] : [];
      return { code: [...head, ...lines].join('\n'), value };
    } finally {
      this.block = outer;
    }
  }

  constant(v: unknown): string {
    this.consts.push(v);
    return `K[${this.consts.length - 1}]`;
  }

  literal(v: unknown): string {
    switch (typeof v) {
      case 'string':
        return str(v);
      case 'boolean':
        return v ? 'true' : 'false';
      case 'bigint':
        return `${v}n`.startsWith('-') ? `(${v}n)` : `${v}n`;
      case 'number':
        return Number.isFinite(v) && !Object.is(v, -0) ? `(${String(v)})` : this.constant(v);
      case 'object':
        return v === null ? 'null' : this.constant(v);
      default:
        throw new Unsupported(`literal of type ${typeof v}`);
    }
  }

  lookup(name: string): string | undefined {
    for (let i = this.scope.length - 1; i >= 0; i--) {
      const hit = this.scope[i]?.get(name);
      if (hit !== undefined) return hit;
    }
    return undefined;
  }

  withScope<T>(bindings: Map<string, string>, f: () => T): T {
    this.scope.push(bindings);
    try {
      return f();
    } finally {
      this.scope.pop();
    }
  }

  /** The dotted text of a namespace (`optional`, `cel`, `math`): an identifier that is not a variable. */
  namespace(n: Node): string | undefined {
    if (n.op === 'id' && typeof n.args === 'string' && IDENT.test(n.args) && this.lookup(n.args) === undefined && !this.opts.variables.includes(n.args)) return n.args;
    return undefined;
  }

  /** A value as a JS expression evaluated once: literals and locals stay, the rest goes to a temp. */
  value(n: Node): string {
    const e = this.expr(n, false);
    if (/^(t\d+|K\[\d+\]|true|false|null|\(?-?\d+n?\)?|"(?:[^"\\]|\\.)*")$/.test(e)) return e;
    const t = this.temp();
    this.emit(`${t} = ${e};`);
    return t;
  }

  /** Emits code for `n`; returns a JS expression of its value. `root`: not charged (as cel-js). */
  expr(n: Node, root = false): string {
    if (!root) this.charge(1);
    switch (n.op) {
      case 'value': {
        if (!root) this.charge(sizeCost(n.args));
        return this.literal(n.args);
      }
      case 'id': {
        const name = n.args as string;
        const local = this.lookup(name);
        if (local !== undefined) return local;
        if (this.opts.variables.includes(name)) {
          if (name === 'variables') this.readsVariablesObject = true;
          const t = this.temp();
          this.emit(`${t} = ctx[${str(name)}];`);
          this.number(t);
          this.sized(t, root);
          return t;
        }
        // A type or constant name (`int`, `cel`): cel-js knows it.
        return calls.delegated(this, name, [], root);
      }
      case '.':
        return select(this, n, root);
      case '.?':
        return optionalSelect(this, n);
      case '[]':
      case '[?]':
        return index(this, n, root);
      case '!_': {
        const a = this.value(asNode(n.args));
        return `(typeof ${a} === "boolean" ? !${a} : R.not(${a}))`;
      }
      case '-_': {
        const a = this.value(asNode(n.args));
        const v = this.temp();
        this.emit(`${v} = R.neg(${a});`);
        return v;
      }
      case '&&':
      case '||':
        return this.logical(n);
      case '?:':
        return this.ternary(n);
      case 'list':
        return this.list(n, root);
      case 'map':
        return this.map(n, root);
      case 'call':
      case 'rcall':
        return calls.call(this, n, root);
      default:
        return this.binary(n, root);
    }
  }

  /** The operators of BINARY, with their cost charges. */
  private binary(n: Node, root: boolean): string {
    const fn = BINARY[n.op];
    if (fn === undefined) throw new Unsupported(`operator ${n.op}`);
    const [a, b] = n.args as [Node, Node];
    const l = this.value(asNode(a));
    const r = this.value(asNode(b));
    const costed = COSTED_OPERATORS.has(n.op);
    const v = this.temp();
    const general: string[] = [];
    if (costed) general.push(`if ((m.used += R.binaryCost(${str(n.op)}, ${l}, ${r}, m)) > m.limit) R.over(m);`);
    if (n.op === '==' || n.op === '!=') {
      const same = n.op === '==' ? '===' : '!==';
      general.push(`${v} = (typeof ${l} === "string" && typeof ${r} === "string") ? ${l} ${same} ${r} : R.${fn}(${l}, ${r});`);
    } else {
      general.push(`${v} = R.${fn}(${l}, ${r});`);
    }
    if (!specialisedComparison(this, n.op, asNode(a), asNode(b), l, r, v, general.join('\n'))) for (const line of general) this.emit(line);
    if (!costed && (n.op === '+' || n.op === '-')) this.sized(v, root);
    return v;
  }

  /** A value read from the input: an integral JSON number is a CEL int (runtime.ts's num). */
  number(v: string): void {
    this.emit(`if (typeof ${v} === "number") ${v} = R.num(${v});`);
  }

  /** Charges the size of a produced value (not for the root, as cel-js's meter did not). */
  sized(v: string, root: boolean): void {
    if (!root) this.emit(`m.used += R.sz(${v});`);
  }

  /** `a && b && …` (exp false) or `a || b || …` (exp true), flattened: one block per operand, not one nesting level. */
  private logical(n: Node): string {
    const op = n.op;
    const exp = op === '||';
    const operands: Node[] = [];
    // Left-associative chain: ((a || b) || c).
    let cur: Node = n;
    const rights: Node[] = [];
    while (cur.op === op) {
      const [a, b] = cur.args as [Node, Node];
      rights.push(asNode(b));
      cur = asNode(a);
    }
    operands.push(cur, ...rights.reverse());
    // The n − 1 operator nodes are all entered (cel-js evaluates the outer one first).
    this.charge(operands.length - 2);
    const acc = this.temp();
    const first = this.inBlock(() => this.expr(operands[0] as Node));
    this.emit(`try {\n${first.code}\n${acc} = ${first.value};\n} catch (e) { ${acc} = R.caught(e); }`);
    const e = exp ? 'true' : 'false';
    operands.slice(1).forEach((operand, i) => {
      const last = i === operands.length - 2;
      const right = this.inBlock(() => this.expr(operand));
      const step = `${right.code}\n${acc} = R.logical(${acc}, ${right.value}, ${e});`;
      this.emit(last ? `if (${acc} !== ${e}) {\n${step}\n}` : `if (${acc} !== ${e}) {\ntry {\n${step}\n} catch (e) { ${acc} = R.caught(e); }\n}`);
    });
    return acc;
  }

  private ternary(n: Node): string {
    const [c, a, b] = n.args as [Node, Node, Node];
    const cv = this.value(asNode(c));
    const v = this.temp();
    const yes = this.inBlock(() => this.expr(asNode(a)));
    const no = this.inBlock(() => this.expr(asNode(b)));
    this.emit(`if (R.cond(${cv}, undefined)) {\n${yes.code}\n${v} = ${yes.value};\n} else {\n${no.code}\n${v} = ${no.value};\n}`);
    return v;
  }

  private list(n: Node, root: boolean): string {
    const items = (n.args as unknown[]).map(asNode);
    if (items.every((i) => i.op === 'value')) {
      const values = items.map((i) => i.args);
      if (!root) this.charge(sizeCost(values) + values.reduce<number>((s, v) => s + 1 + sizeCost(v), 0));
      // CEL values are immutable and the generated code never mutates a list it did not create: one array serves every evaluation.
      return values.length === 0 ? 'R.EMPTY_LIST' : this.constant(built(values));
    }
    const parts = items.map((i) => this.value(i));
    const v = this.temp();
    this.emit(`${v} = R.built([${parts.join(', ')}]);`);
    if (!root) this.charge(sizeCost(items));
    return v;
  }

  private map(n: Node, root: boolean): string {
    const entries = n.args as [unknown, unknown][];
    // `{}` (an orValue default): one shared empty map, as `[]` (CEL values are immutable).
    if (entries.length === 0) return this.constant(Object.freeze(built({})));
    const keys: string[] = [];
    const values: string[] = [];
    for (const [k, v] of entries) {
      keys.push(this.value(asNode(k)));
      values.push(this.value(asNode(v)));
    }
    const v = this.temp();
    this.emit(`${v} = R.mapOf([${keys.join(', ')}], [${values.join(', ')}]);`);
    if (!root) this.charge(Math.ceil(entries.length * 0.1));
    return v;
  }

}

/** Generates the JavaScript function of a checked AST. Throws Unsupported for shapes it does not compile. */
export function generate(ast: unknown, opts: GenerateOptions): Generated {
  const g = new Generator(opts);
  const { source, consts } = g.generate(asNode(ast));
  // The source is generated from the AST; user text enters it only through JSON.stringify (see the module comment).
  const make = new Function('R', 'K', source) as (r: Runtime, k: unknown[]) => Exec;
  return { exec: make(runtime, consts), source, readsVariablesObject: g.readsVariablesObject };
}

export { Optional };
