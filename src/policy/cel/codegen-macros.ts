/**
 * The macros and optional chains of the CEL → JavaScript generator
 * (codegen.ts): `has`, the one- and two-variable comprehensions,
 * `cel.bind`, `orValue` / `or` and `.?` chains. Each takes the generator
 * and emits into its current block, with the same injection rule: text
 * from the expression enters the source only through JSON.stringify.
 *
 * Pure: no I/O.
 */
import { hasDelegates } from './runtime.ts';
import { selectDelegate } from './runtime-ops.ts';
import { asNode, ownField, str, Unsupported, type Generator, type Node } from './codegen-ast.ts';

/** has(a.b.c): cel-js's has macro (the root must be an identifier). */
export function has(g: Generator, arg: Node): string {
  const props: { op: string; field: string }[] = [];
  let cur = arg;
  if (cur.op !== '.') throw new Unsupported('has() argument');
  while (cur.op === '.' || cur.op === '.?') {
    const [t, f] = cur.args as [Node, string];
    props.push({ op: cur.op, field: f });
    cur = asNode(t);
  }
  if (cur.op !== 'id') throw new Unsupported('has() root');
  const root = g.value(cur);
  const v = g.temp();
  // Fields from the root outwards.
  const steps = props.reverse();
  const names = steps.map((s) => s.field);
  const fields = g.constant(names);
  const ops = g.constant(steps.map((s) => s.op));
  const general = `R.has(${root}, ${fields}, ${ops}, ${g.constant(hasDelegates(names))})`;
  if (steps.length === 1) {
    // has(x.f) on a plain map (the common case) inline: R.has gives the same (present and not undefined).
    g.emit(`${v} = (${root} !== null && typeof ${root} === "object" && ${root}.constructor === Object) ? ${ownField(root, names[0] as string)} !== undefined : ${general};`);
  } else g.emit(`${v} = ${general};`);
  return v;
}

/** The per-iteration prologue: the limit is checked once per iteration at least. */
export function comprehension(g: Generator, kind: string, receiver: Node, iterVar: string, filter: unknown, body: Node): string {
  const coll = g.value(receiver);
  g.charge(1); // init (cel-js evaluates a literal node for it)
  const items = g.temp();
  const i = g.temp();
  const accu = g.temp();
  const error = g.temp();
  const x = g.temp();
  g.emit(`m.used += R.rangeCost(${coll});`);
  g.emit(`${items} = R.range(${coll});`);
  const label = (what: string): string => str(`${what} must return bool`);
  const scope = new Map([[iterVar, x]]);
  // Each iteration: the step node (a ternary, or the push) and what it evaluates.
  const step = (inner: () => string): { code: string; value: string } =>
    g.withScope(scope, () =>
      g.inBlock(() => {
        g.charge(2);
        return inner();
      }),
    );
  let loop: string;
  switch (kind) {
    case 'all':
    case 'exists': {
      const decisive = kind === 'exists';
      const p = step(() => g.expr(body));
      loop = [
        `${accu} = ${!decisive}; ${error} = undefined;`,
        `for (${i} = 0; ${i} < ${items}.length; ${i}++) {`,
        `if (${accu} === ${decisive}) break;`,
        `${x} = ${items}[${i}]; if (typeof ${x} === "number") ${x} = R.read(${coll}, ${x});`,
        `try {\n${p.code}\n${accu} = R.cond(${p.value}, ${label(`${kind}(var, predicate) predicate`)});\n} catch (e) { ${error} ??= R.caught(e); }`,
        `}`,
        `if (${error} !== undefined && ${accu} === ${!decisive}) throw ${error};`,
      ].join('\n');
      break;
    }
    case 'exists_one': {
      const p = step(() => g.expr(body));
      loop = [
        `${accu} = 0;`,
        `for (${i} = 0; ${i} < ${items}.length; ${i}++) {`,
        `${x} = ${items}[${i}]; if (typeof ${x} === "number") ${x} = R.read(${coll}, ${x});`,
        `${p.code}\nif (R.cond(${p.value}, ${label('exists_one(var, predicate) predicate')})) ${accu}++;`,
        `}`,
        `${accu} = ${accu} === 1;`,
      ].join('\n');
      break;
    }
    case 'map':
    case 'filter': {
      const f = kind === 'filter' ? body : filter === undefined ? undefined : asNode(filter);
      const t = kind === 'filter' ? undefined : body;
      const s = step(() => {
        if (f === undefined) {
          const tv = g.expr(t as Node);
          g.emit(`${accu}.push(${tv});`);
          return 'undefined';
        }
        const fv = g.value(f);
        const kept = g.inBlock(() => (t === undefined ? x : g.expr(t)));
        const what = kind === 'filter' ? 'filter(var, predicate) predicate' : 'map(var, filter, transform) filter predicate';
        g.emit(`if (R.cond(${fv}, ${label(what)})) {\n${kept.code}\n${accu}.push(${kept.value});\n}`);
        return 'undefined';
      });
      loop = [`${accu} = [];`, `for (${i} = 0; ${i} < ${items}.length; ${i}++) {`, `${x} = ${items}[${i}]; if (typeof ${x} === "number") ${x} = R.read(${coll}, ${x});`, s.code, `}`, `R.built(${accu});`].join('\n');
      break;
    }
    default:
      throw new Unsupported(`macro ${kind}`);
  }
  g.emit(loop);
  return accu;
}

/** The two-variable comprehensions of lib/comprehensions.ts (cel-go ext.TwoVarComprehensions). */
export function twoVar(g: Generator, kind: string, receiver: Node, kVar: string, vVar: string, filter: unknown, body: Node): string {
  const coll = g.value(receiver);
  const items = g.temp();
  const i = g.temp();
  const accu = g.temp();
  const error = g.temp();
  const k = g.temp();
  const val = g.temp();
  const r = g.temp();
  g.emit(`m.used += R.rangeCost(${coll});`);
  g.emit(`${items} = R.entries(${coll});`);
  const scope = new Map([
    [kVar, k],
    [vVar, val],
  ]);
  const head = `for (${i} = 0; ${i} < ${items}.length; ${i}++) {\n${k} = ${items}[${i}][0]; ${val} = ${items}[${i}][1];\nif (m.used > m.limit) R.over(m);`;
  const b = g.withScope(scope, () => g.inBlock(() => g.expr(body)));
  const f = filter === undefined ? undefined : g.withScope(scope, () => g.inBlock(() => g.expr(asNode(filter))));
  const filtered = (inner: string): string => (f === undefined ? inner : `${f.code}\nif (${f.value} === true) {\n${inner}\n}`);
  let loop: string;
  switch (kind) {
    case 'all':
    case 'exists': {
      const decisive = kind === 'exists';
      loop = [
        `${accu} = ${!decisive}; ${error} = undefined;`,
        head,
        `try {\n${b.code}\n${r} = ${b.value};\n} catch (e) { ${r} = R.caught(e); }`,
        `if (${r} === ${decisive}) { ${accu} = ${decisive}; break; }`,
        `if (${r} instanceof Error) ${error} ??= ${r}; else if (typeof ${r} !== "boolean") throw R.err(${str(`${kind}: the predicate must give a bool`)});`,
        `}`,
        `if (${accu} === ${!decisive} && ${error} !== undefined) throw ${error};`,
      ].join('\n');
      break;
    }
    case 'existsOne':
      loop = [`${accu} = 0;`, head, b.code, `if (${b.value} === true) ${accu}++;`, `}`, `${accu} = ${accu} === 1;`].join('\n');
      break;
    case 'transformList':
      loop = [`${accu} = [];`, head, filtered(`${b.code}\n${accu}.push(${b.value});`), `}`, `R.built(${accu});`].join('\n');
      break;
    case 'transformMap':
      loop = [`${accu} = {};`, head, filtered(`${b.code}\nR.put(${accu}, String(${k}), ${b.value});`), `}`, `R.built(${accu});`].join('\n');
      break;
    case 'transformMapEntry':
      loop = [`${accu} = {};`, head, filtered(`${b.code}\nR.putEntry(${accu}, ${b.value});`), `}`, `R.built(${accu});`].join('\n');
      break;
    default:
      throw new Unsupported(`macro ${kind}`);
  }
  g.emit(loop);
  return accu;
}

export function bind(g: Generator, name: string, val: Node, body: Node): string {
  const v = g.value(val);
  const local = g.temp();
  g.emit(`${local} = ${v};`);
  return g.withScope(new Map([[name, local]]), () => g.value(body));
}

/**
 * `x.orValue(d)`. On a `.?` chain, each step yields the field's value or
 * ABSENT, with no Optional allocated.
 */
export function orValue(g: Generator, receiver: Node, arg: Node): string {
  const v = g.temp();
  const dflt = g.inBlock(() => g.expr(arg));
  if (receiver.op === '.?') {
    const c = chain(g, receiver);
    g.emit(`if (${c} === R.ABSENT) {\n${dflt.code}\n${v} = ${dflt.value};\n} else ${v} = ${c};`);
    return v;
  }
  const o = g.value(receiver);
  g.emit(`${v} = R.optional(${o}, "optional.orValue(value) receiver");`);
  g.emit(`if (${v}.hasValue()) ${v} = ${v}.value(); else {\n${dflt.code}\n${v} = ${dflt.value};\n}`);
  return v;
}

/**
 * `a.?b.?c.hasValue()`: whether the chain ends on a value, with no Optional
 * allocated (a boolean's size costs nothing, as the general call charges).
 */
export function hasValue(g: Generator, receiver: Node): string {
  const c = chain(g, receiver);
  const v = g.temp();
  g.emit(`${v} = ${c} !== R.ABSENT;`);
  return v;
}

/** The value of a `.?` chain, or R.ABSENT. Each step is charged as a node. */
export function chain(g: Generator, n: Node): string {
  const [target, field] = n.args as [Node, string];
  const t = asNode(target);
  const f = str(field);
  const v = g.temp();
  if (t.op === '.?') {
    const inner = chain(g, t);
    g.charge(1);
    g.emit(
      `if (${inner} !== null && typeof ${inner} === "object" && ${inner}.constructor === Object) { ${v} = ${ownField(inner, field)}; if (${v} === undefined) ${v} = R.ABSENT; if (typeof ${v} === "number") ${v} = R.read(${inner}, ${v}); }` +
        ` else ${v} = ${inner} === R.ABSENT ? R.ABSENT : R.ostep(${inner}, ${f}, ${g.constant(selectDelegate(field, true))});`,
    );
    return v;
  }
  const base = g.value(t);
  g.charge(1);
  const step = (b: string): string =>
    `if (${b} !== null && typeof ${b} === "object" && ${b}.constructor === Object) { ${v} = ${ownField(b, field)}; if (${v} === undefined) ${v} = R.ABSENT; if (typeof ${v} === "number") ${v} = R.read(${b}, ${v}); }`;
  // A plain map inline; an Optional (`[c.?a, c.?b].all(h, h.?x…)`) unwrapped, then a plain map inline
  // again; anything else through R.ostep (R.ostart's step once the Optional is unwrapped).
  const u = g.temp();
  g.emit(
    `${step(base)} else {\n${u} = ${base} instanceof R.Optional ? (${base}.hasValue() ? ${base}.value() : R.ABSENT) : ${base};\n` +
      `${step(u)} else ${v} = ${u} === R.ABSENT ? R.ABSENT : R.ostep(${u}, ${f}, ${g.constant(selectDelegate(field, true))});\n}`,
  );
  return v;
}

export function or(g: Generator, receiver: Node, arg: Node): string {
  const o = g.value(receiver);
  const v = g.temp();
  const alt = g.inBlock(() => g.expr(arg));
  g.emit(`${v} = R.optional(${o}, "optional.or(optional) receiver");`);
  g.emit(`if (!${v}.hasValue()) {\n${alt.code}\n${v} = R.optional(${alt.value}, "optional.or(optional) argument");\n}`);
  return v;
}
