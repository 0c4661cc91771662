/**
 * Specialised comparisons of the CEL → JavaScript generator (codegen.ts):
 * `x == 'lit'`, `x != 'lit'` and `x in ['a', 'b', …]` where one operand is
 * a string literal or a list of string literals, the shape most policy
 * checks have; `x == true`, `x != 0` with a bool or int literal (a value of
 * the literal's type compares with `===` at no cost). When the other operand is a string at run time, the cost is
 * known from its length alone and the comparison is one JavaScript
 * operation (a Set lookup for the list, built once, a constant of the
 * program); any other value takes the general path, charge and operation
 * unchanged (R.binaryCost, R.eq / R.inop). Charges are cost.ts's figures:
 * comparing strings costs the traversal of the shorter one, `in` a list of
 * n elements costs n for a scalar.
 *
 * Pure: no I/O.
 */
import { str, type Generator, type Node } from './codegen-ast.ts';

const isString = (n: Node): boolean => n.op === 'value' && typeof n.args === 'string';
/** A bool or int literal: compared with a value of its own type, CEL equality is `===` and costs nothing (charges.ts). */
const scalarType = (n: Node): 'boolean' | 'bigint' | undefined => (n.op === 'value' && (typeof n.args === 'boolean' || typeof n.args === 'bigint') ? (typeof n.args as 'boolean' | 'bigint') : undefined);

/** Lists of string literals up to this length are tested by comparisons, longer ones through a Set. */
const INLINE_IN_LIST = 8;

/**
 * Emits `v = l <op> r` for the shapes above and returns true; false (and
 * nothing emitted) for any other. `l` and `r` are the operands' JavaScript
 * expressions, `general` the code of the general path.
 */
export function specialisedComparison(g: Generator, op: string, a: Node, b: Node, l: string, r: string, v: string, general: string): boolean {
  if ((op === '==' || op === '!=') && (isString(a) || isString(b))) {
    const literal = (isString(b) ? b.args : a.args) as string;
    const x = isString(b) ? l : r;
    const same = op === '==' ? '===' : '!==';
    // traversal(min(|x|, |literal|)): 0 when either is empty, 1 up to 10 characters, else by the shorter length.
    const cost = literal.length === 0 ? '0' : literal.length <= 10 ? `(${x}.length === 0 ? 0 : 1)` : `R.trav(${x}.length < ${literal.length} ? ${x}.length : ${literal.length})`;
    const charge = cost === '0' ? '' : `if ((m.used += ${cost}) > m.limit) R.over(m);\n`;
    g.emit(`if (typeof ${x} === "string") {\n${charge}${v} = ${l} ${same} ${r};\n} else {\n${general}\n}`);
    return true;
  }
  if ((op === '==' || op === '!=') && (scalarType(a) !== undefined || scalarType(b) !== undefined)) {
    const type = scalarType(b) ?? scalarType(a);
    const x = scalarType(b) !== undefined ? l : r;
    g.emit(`if (typeof ${x} === "${type}") ${v} = ${l} ${op === '==' ? '===' : '!=='} ${r};\nelse {\n${general}\n}`);
    return true;
  }
  if (op === 'in' && b.op === 'list') {
    const items = b.args as Node[];
    if (items.length === 0 || !items.every(isString)) return false;
    const literals = items.map((i) => i.args as string);
    // A few literals: compared inline (a string from the input is not
    // internalised, so a Set lookup hashes and compares it through a builtin
    // call, dearer than a few comparisons that mostly stop at the length).
    const test = literals.length <= INLINE_IN_LIST ? `(${literals.map((x) => `${l} === ${str(x)}`).join(' || ')})` : `${g.constant(new Set(literals))}.has(${l})`;
    g.emit(`if (typeof ${l} === "string") {\nif ((m.used += ${items.length}) > m.limit) R.over(m);\n${v} = ${test};\n} else {\n${general}\n}`);
    return true;
  }
  return false;
}
