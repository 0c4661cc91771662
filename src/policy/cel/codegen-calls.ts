/**
 * The calls of the CEL → JavaScript generator (codegen.ts): macros are
 * dispatched to codegen-macros.ts; `size`, `startsWith`/`endsWith`/
 * `contains`, the regex functions and optionals run inline; every other
 * function, and type or namespaced names, run as cel-js delegates (parsed
 * now, their operands computed by the generated code). The injection rule is
 * codegen.ts's: text from the expression enters the source only through
 * JSON.stringify, or as a constant passed by reference.
 *
 * Pure: no I/O.
 */
import { delegateOf, type Delegate } from './values-marks.ts';
import { MAX_OPERANDS } from './environment.ts';
import { isCostedCall } from './charges.ts';
import { patternCache, re2 } from './lib/regex.ts';
import * as macros from './codegen-macros.ts';
import { asNode, IDENT, str, Unsupported, type Generator, type Node } from './codegen-ast.ts';

/** `s.matches(p)` (renamed portalMatches), `s.find(p)`, `s.findAll(p[, n])`: run natively (lib/regex.ts) with the meter. */
function isRegexCall(name: string, rcall: boolean, operands: number): boolean {
  if (name === 'portalMatches') return operands === 2;
  if (!rcall) return false;
  return (name === 'find' && operands === 2) || (name === 'findAll' && (operands === 2 || operands === 3));
}

export function call(g: Generator, n: Node, root: boolean): string {
  const rcall = n.op === 'rcall';
  const name = (n.args as unknown[])[0] as string;
  const receiver = rcall ? asNode((n.args as unknown[])[1]) : undefined;
  const args = ((rcall ? (n.args as unknown[])[2] : (n.args as unknown[])[1]) as unknown[]).map(asNode);
  const ns = receiver ? g.namespace(receiver) : undefined;

  // Macros (their arguments are expressions, not values).
  if (!rcall && name === 'has' && args.length === 1) return macros.has(g, asNode(args[0]));
  if (receiver !== undefined && ns === undefined) {
    const iterVar = (a: Node | undefined): string | undefined => (a?.op === 'id' && typeof a.args === 'string' ? a.args : undefined);
    if (args.length === 2 && iterVar(args[0]) !== undefined && ['all', 'exists', 'exists_one', 'map', 'filter'].includes(name)) {
      return macros.comprehension(g, name, receiver, iterVar(args[0]) as string, undefined, args[1] as Node);
    }
    if (args.length === 3 && name === 'map' && iterVar(args[0]) !== undefined) return macros.comprehension(g, 'map', receiver, iterVar(args[0]) as string, args[1], args[2] as Node);
    if ((args.length === 3 || args.length === 4) && iterVar(args[0]) !== undefined && iterVar(args[1]) !== undefined) {
      const kinds = args.length === 3 ? ['all', 'exists', 'existsOne', 'transformList', 'transformMap', 'transformMapEntry'] : ['transformList', 'transformMap', 'transformMapEntry'];
      if (kinds.includes(name)) return macros.twoVar(g, name, receiver, iterVar(args[0]) as string, iterVar(args[1]) as string, args.length === 4 ? args[2] : undefined, args[args.length - 1] as Node);
    }
    if (name === 'orValue' && args.length === 1) return macros.orValue(g, receiver, asNode(args[0]));
    if (name === 'hasValue' && args.length === 0 && receiver.op === '.?') return macros.hasValue(g, receiver);
    if (name === 'or' && args.length === 1) return macros.or(g, receiver, asNode(args[0]));
  }
  if (ns === 'cel' && name === 'bind' && args.length === 3 && args[0]?.op === 'id') return macros.bind(g, args[0].args as string, args[1] as Node, args[2] as Node);
  if (ns === 'optional' && name === 'none' && args.length === 0) return 'R.NONE';
  if (ns === 'optional' && name === 'of' && args.length === 1) {
    const a = g.value(args[0] as Node);
    return `R.Optional.of(${a})`;
  }

  // Functions: operands first (cel-js evaluates arguments last to first).
  const operands: string[] = [];
  const all = receiver !== undefined && ns === undefined ? [receiver, ...args] : args;
  if (all.length > MAX_OPERANDS) throw new Unsupported('too many arguments');
  const values = new Array<string>(all.length);
  for (let i = all.length - 1; i >= 0; i--) values[i] = g.value(all[i] as Node);
  operands.push(...values);
  const costed = isCostedCall(name);
  if (costed) g.emit(`if ((m.used += R.callCost(${str(name)}, [${operands.join(', ')}], m)) > m.limit) R.over(m);`);
  const v = g.temp();
  const [a0, a1] = operands;
  if (rcall && ns === undefined && operands.length === 1 && (name === 'hasValue' || name === 'value')) {
    g.emit(`${v} = ${a0} instanceof R.Optional ? ${a0}.${name}() : R.call(${callDelegate(g, name, ns, rcall, 1)}, ${a0});`);
  } else if (name === 'size' && operands.length === 1) {
    g.emit(`${v} = Array.isArray(${a0}) ? BigInt(${a0}.length) : R.size(${a0});`);
  } else if (rcall && ns === undefined && operands.length === 2 && (name === 'startsWith' || name === 'endsWith' || name === 'contains')) {
    const method = name === 'contains' ? 'includes' : name;
    g.emit(`${v} = (typeof ${a0} === "string" && typeof ${a1} === "string") ? ${a0}.${method}(${a1}) : R.call(${callDelegate(g, name, ns, rcall, 2)}, ${a0}, ${a1});`);
  } else if (ns === undefined && isRegexCall(name, rcall, operands.length)) {
    // The regex functions run here with the evaluation's meter; a constant pattern is compiled once, now.
    const re = constantPattern(g, all[1]) ?? `R.regex(${g.constant(patternCache())}, ${a1})`;
    const fallback = `R.call(${callDelegate(g, name, ns, rcall, operands.length)}${operands.map((o) => `, ${o}`).join('')})`;
    const strings = `typeof ${a0} === "string" && typeof ${a1} === "string"`;
    if (name === 'portalMatches') g.emit(`${v} = (${strings}) ? R.matches(${a0}, ${a1}, m, ${re}) : ${fallback};`);
    else if (name === 'find') g.emit(`${v} = (${strings}) ? R.find(${a0}, ${a1}, m, ${re}) : ${fallback};`);
    else if (operands.length === 2) g.emit(`${v} = (${strings}) ? R.built(R.findAll(${a0}, ${a1}, -1, m, ${re})) : ${fallback};`);
    else g.emit(`${v} = (${strings} && typeof ${operands[2]} === "bigint") ? R.built(R.findAll(${a0}, ${a1}, Number(${operands[2]}), m, ${re})) : ${fallback};`);
  } else {
    const d = callDelegate(g, name, ns, rcall, operands.length);
    g.emit(`${v} = R.call(${d}${operands.map((o) => `, ${o}`).join('')});`);
  }
  if (!costed) g.sized(v, root);
  return v;
}

/** The delegate of a call, its operands named `__a0`…, as a constant (parsed now, so an impossible delegate is Unsupported). */
function callDelegate(g: Generator, name: string, ns: string | undefined, rcall: boolean, count: number): string {
  if (!IDENT.test(name)) throw new Unsupported(`function name ${name}`);
  const ops = Array.from({ length: count }, (_, i) => `__a${i}`);
  const source = !rcall ? `${name}(${ops.join(', ')})` : ns !== undefined ? `${ns}.${name}(${ops.join(', ')})` : `${ops[0]}.${name}(${ops.slice(1).join(', ')})`;
  return g.constant(parsedDelegate(source));
}

/**
 * A constant pattern compiled now (compile() refused the invalid ones), else
 * undefined (a pattern computed at run time: the call site's PatternCache).
 */
function constantPattern(g: Generator, n: Node | undefined): string | undefined {
  if (n?.op !== 'value' || typeof n.args !== 'string') return undefined;
  try {
    return g.constant(re2(n.args));
  } catch {
    return undefined;
  }
}

/** A delegate parsed now; Unsupported when cel-js refuses it. */
function parsedDelegate(source: string): Delegate {
  try {
    return delegateOf(source, true);
  } catch {
    throw new Unsupported(`cannot delegate ${source}`);
  }
}

/** A name cel-js resolves (a type such as `int`, a namespaced constant). */
export function delegated(g: Generator, text: string, operands: string[], root: boolean): string {
  if (!/^[A-Za-z_][A-Za-z0-9_.]*$/.test(text)) throw new Unsupported(`name ${text}`);
  const d = g.constant(parsedDelegate(text));
  const v = g.temp();
  g.emit(`${v} = R.call(${d}${operands.map((o) => `, ${o}`).join('')});`);
  g.sized(v, root);
  return v;
}
