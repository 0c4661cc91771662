/**
 * Field access and indexing of the CEL → JavaScript generator (codegen.ts):
 * `t.f` (a plain map read inline, `variables.NAME` from the evaluation's
 * frame or through its getter, a namespaced name such as `math.least` as a
 * cel-js delegate, anything else through R.sel), `t.?f`, `t[k]` and `t[?k]`.
 * The injection rule is codegen.ts's: a field name enters the source only
 * through JSON.stringify, its select delegate as a constant passed by
 * reference.
 *
 * Pure: no I/O.
 */
import { selectDelegate } from './runtime-ops.ts';
import * as calls from './codegen-calls.ts';
import { asNode, isNode, ownField, str, type Generator, type Node } from './codegen-ast.ts';

/** `t.f`: a plain map inline, `variables.NAME` through its getter, anything else through R.sel. */
export function select(g: Generator, n: Node, root: boolean): string {
  const [target, field] = n.args as [Node, string];
  if (isNode(target) && g.namespace(target) !== undefined) return calls.delegated(g, `${g.namespace(target)}.${field}`, [], root);
  const f = str(field);
  const sd = g.constant(selectDelegate(field, false));
  if (isNode(target) && target.op === 'id' && target.args === 'variables' && g.lookup('variables') === undefined) {
    // `variables.NAME`: its value is a CEL value already.
    g.charge(1);
    const v = g.temp();
    const slot = g.variableSlot(field);
    if (slot !== undefined) {
      // From the evaluation's frame (variable-frame.ts): inline once computed.
      // A context without a frame (a caller outside a composition) reads the getter.
      const fr = g.temp();
      g.emit(`${fr} = ctx.frame;`);
      g.emit(`if (${fr} !== null && ${fr} !== undefined) { ${v} = ${fr}.values[${slot}]; if (${v} === R.UNSET) ${v} = R.variable(${fr}, ${slot}); } else {`);
    }
    // A getter of the variables object (variables.ts, vap/pass-check.ts).
    g.emit(`${v} = ctx.variables[${f}];`);
    g.emit(`if (${v} === undefined) ${v} = R.sel(ctx.variables, ${f}, ${sd});`);
    if (slot !== undefined) g.emit('}');
    g.sized(v, root);
    return v;
  }
  const t = g.value(asNode(target));
  const v = g.temp();
  g.emit(`${v} = (${t} !== null && typeof ${t} === "object" && ${t}.constructor === Object) ? ${ownField(t, field)} : undefined;`);
  g.emit(`if (${v} === undefined) ${v} = R.sel(${t}, ${f}, ${sd});`);
  g.emit(`if (typeof ${v} === "number") ${v} = R.read(${t}, ${v});`);
  g.sized(v, root);
  return v;
}

/** `t.?f`: an Optional of the field (inline on a plain map, else R.osel). */
export function optionalSelect(g: Generator, n: Node): string {
  const [target, field] = n.args as [Node, string];
  const t = g.value(asNode(target));
  const v = g.temp();
  // A plain map inline (R.osel's first case, with one property read as `ownField` says); anything else through R.osel.
  g.emit(
    `if (${t} !== null && typeof ${t} === "object" && ${t}.constructor === Object) { ${v} = ${ownField(t, field)}; ${v} = ${v} === undefined ? R.NONE : R.Optional.of(typeof ${v} === "number" ? R.read(${t}, ${v}) : ${v}); }` +
      ` else ${v} = R.osel(${t}, ${str(field)}, ${g.constant(selectDelegate(field, true))});`,
  );
  return v;
}

/** `a[b]` (R.idx, its result's size charged) or `a[?b]` (R.oidx, an Optional). */
export function index(g: Generator, n: Node, root: boolean): string {
  const [a, b] = n.args as [Node, Node];
  const l = g.value(asNode(a));
  const r = g.value(asNode(b));
  const v = g.temp();
  g.emit(`${v} = R.${n.op === '[]' ? 'idx' : 'oidx'}(${l}, ${r});`);
  if (n.op === '[]') g.sized(v, root);
  return v;
}
