/**
 * Compiles a checked cel-js AST, once per policy generation, into a tree of
 * JS closures that evaluates it with cel-js's own semantics, minus the
 * interpreter's per-node dispatch.
 *
 * Why closures and not generated source (`new Function`): closures cannot
 * inject code whatever the expression says, and V8 inlines small closures
 * well enough; generated source would be faster still but puts a code
 * generator between untrusted rule text and `eval`.
 *
 * How semantics stay the same as the interpreter's:
 * - Every operator, function and field access still runs cel-js's handler
 *   that the type checker attached to the node (`node.handle`): overload
 *   resolution, int/uint/double rules, errors and their messages are
 *   cel-js's. The compiler only replaces the glue that cel-js's
 *   `ast.evaluate(ev, ast, ctx)` does around them (operand evaluation order,
 *   `&&`/`||` error absorption, ternaries, comprehensions, `has()`,
 *   `orValue`/`or`), mirroring operators.js, macros.js and optional.js of
 *   cel-js 8.0.0 line by line.
 * - Closures take cel-js's own context objects (RootContext, the
 *   comprehension OverlayContexts attached at check time), so any node kind
 *   not compiled here falls back to `ev.run(node, ctx)`, the metered
 *   interpreter, for that subtree only.
 * - Cost: each compiled node charges what the metered `Evaluator.run` wrapper
 *   (meter.ts) charges for it: 1 unit plus the size of its result (or, for
 *   size-dependent calls and operators, their cost.ts figure before they run,
 *   as the handles charges.ts wraps do), at the same points (a node reached through an `alternate`, as cel-js's macros expand,
 *   is charged once, like the interpreter's single `run`). So cost, limits and
 *   the stall guarantee are the interpreter's, unit for unit
 *   (test/policy/cel/compiler.test.ts checks equality on generated input).
 */
import { EvaluationError, Optional, ParseError, TypeError as CelTypeError } from '@marcbachmann/cel-js';
import { activeMeter, charge, CostLimitExceeded, isPrecharged, sizeCost } from './meter.ts';
import { ORIGINAL } from './fast-optional.ts';
import { binaryCost, callCost, callName, isCostedCall, rangeCost, UNCHARGED } from './charges.ts';

/** A cel-js evaluation context (RootContext or OverlayContext). */
export interface CelCtx {
  getCheckedValue(ev: Ev, node: Node): unknown;
  accuValue?: unknown;
}

interface OverlayCtx extends CelCtx {
  reuse(parent: CelCtx): OverlayCtx;
  setIterValue(v: unknown, ev: Ev): OverlayCtx;
  accuValue: unknown;
}

/** The parts of cel-js's Evaluator the closures use. */
export interface Ev {
  run(node: Node, ctx: CelCtx): unknown;
  debugType(v: unknown): { fieldLazy(obj: unknown, key: unknown, node: Node, ev: Ev): unknown };
  debugTypeDeep(v: unknown): { wrappedType: unknown };
  debugRuntimeType(v: unknown, checked?: unknown): unknown;
  createError(code: string, message: string, node?: Node): Error;
}

type Handle = (...args: unknown[]) => unknown;

/** A checked cel-js AST node (the fields cel-js's check phase sets). */
export interface Node {
  op: string;
  args: unknown;
  left?: Node;
  right?: unknown;
  condition?: Node;
  handle?: Handle & { [UNCHARGED]?: Handle };
  receiverWithArgs?: Node[];
  checkedType?: { hasDynType?: boolean };
  leftStaticType?: unknown;
  rightStaticType?: unknown;
  candidates?: Candidates;
  meta: { alternate?: Node; macro?: Macro; evaluate?: unknown; label?: string };
}

interface Overload {
  handler: Handle;
}

interface Candidates {
  findBinaryOverload(l: unknown, r: unknown): Overload | false | null | undefined;
  findUnaryOverload(t: unknown): Overload | false | null | undefined;
  findFunction(types: unknown[], receiver?: unknown): Overload | false | null | undefined;
}

interface Macro {
  functionDesc?: string;
  receiver?: Node;
  arg?: Node;
  macroHasProps?: Node[];
  evaluate?: unknown;
}

interface ComprehensionArgs {
  kind?: string;
  errorsAreFatal: boolean;
  iterable: Node;
  init: Node;
  step: Node;
  condition?: (accu: unknown) => boolean;
  result: (accu: unknown) => unknown;
  iterCtx: OverlayCtx;
}

export type Compiled = (ctx: CelCtx) => unknown;

/** Charges one node evaluation whose cost function covers its result (meter.ts's precharged nodes). */
function meteredCall(inner: Compiled): Compiled {
  return (ctx) => {
    const m = activeMeter();
    if (m !== undefined && ++m.used > m.limit) throw new CostLimitExceeded(m);
    return inner(ctx);
  };
}

/** Charges one node evaluation, as the metered Evaluator.run does. */
function metered(inner: Compiled): Compiled {
  return (ctx) => {
    const m = activeMeter();
    if (m === undefined) return inner(ctx);
    if (++m.used > m.limit) throw new CostLimitExceeded(m);
    const out = inner(ctx);
    if (typeof out === 'object' || typeof out === 'string') {
      const c = sizeCost(out);
      if (c > 0) {
        m.used += c;
        if (m.used > m.limit) throw new CostLimitExceeded(m);
      }
    }
    return out;
  };
}

function tryEval(f: Compiled, ctx: CelCtx): unknown {
  try {
    return f(ctx);
  } catch (e) {
    return e;
  }
}

const objKeys = Object.keys;

/** Compiles a checked node; `chargeNode` false for a root (cel-js evaluates it without `run`). */
export function compileNode(node: Node, ev: Ev, chargeNode = true): Compiled {
  return compileAt(node, ev, chargeNode);
}

function compileAt(node: Node, ev: Ev, chargeNode: boolean): Compiled {
  const alt = node.meta.alternate;
  const charged = isPrecharged(node) ? meteredCall : metered;
  // cel-js evaluates an alternate directly (no second `run`): one charge.
  if (alt !== undefined) return chargeNode ? charged(compileAt(alt, ev, false)) : compileAt(alt, ev, false);
  const body = compileBody(node, ev);
  if (body === undefined) {
    // Not compiled: the metered interpreter charges for the node itself,
    // except when reached through an alternate (evaluated without `run`).
    if (chargeNode) return (ctx) => ev.run(node, ctx);
    const direct = node as unknown as { evaluate(e: Ev, n: Node, x: CelCtx): unknown };
    return (ctx) => direct.evaluate(ev, node, ctx);
  }
  return chargeNode ? charged(body) : body;
}

const c = (node: Node, ev: Ev): Compiled => compileAt(node, ev, true);

function compileBody(node: Node, ev: Ev): Compiled | undefined {
  const macro = node.meta.macro;
  if (macro !== undefined) return compileMacro(node, macro, ev);
  // The handle without charges.ts's wrapper: the closures below charge themselves.
  const h = node.handle?.[UNCHARGED] ?? node.handle;
  switch (node.op) {
    case 'value': {
      const v = node.args;
      return () => v;
    }
    case 'id':
      return (ctx) => ctx.getCheckedValue(ev, node);
    case '.':
    case '.?': {
      // evaluateBinaryFirst: args are [target node, field name].
      const target = (node.args as [Node, string])[0];
      if (!h || target === undefined) return undefined;
      const tf = c(target, ev);
      const name = node.right;
      return (ctx) => h(tf(ctx), name, node, ev);
    }
    case '[]':
    case '[?]':
    case '!=':
    case '==':
    case 'in':
    case '+':
    case '-':
    case '*':
    case '/':
    case '%':
    case '<':
    case '<=':
    case '>':
    case '>=': {
      if (!h) return undefined;
      const [a, b] = node.args as Node[];
      if (a === undefined || b === undefined) return undefined;
      const lf = c(a, ev);
      const op = h.name === 'handleBinary' && node.candidates ? binaryCache(node, node.candidates, h, ev) : h;
      const strings = node.op === 'in' ? literalStrings(b) : undefined;
      const costed = isPrecharged(node);
      const opName = node.op;
      if (strings !== undefined) {
        // `x in ['a', 'b', …]`: the list is charged as if built; a string is
        // looked up in a Set (string-to-string equality is ===); anything
        // else goes to cel-js with a fresh copy of the list.
        const { values, units } = strings;
        const set = new Set(values);
        return (ctx) => {
          const l = lf(ctx);
          charge(units);
          if (costed) charge(binaryCost(opName, l, values));
          return typeof l === 'string' ? set.has(l) : op(l, values.slice(), node, ev);
        };
      }
      const rf = c(b, ev);
      // evaluateBinary: left first, then right.
      if (costed) {
        return (ctx) => {
          const l = lf(ctx);
          const r = rf(ctx);
          charge(binaryCost(opName, l, r));
          return op(l, r, node, ev);
        };
      }
      return (ctx) => {
        const l = lf(ctx);
        return op(l, rf(ctx), node, ev);
      };
    }
    case '!_':
    case '-_': {
      if (!h) return undefined;
      const af = c(node.args as Node, ev);
      const op = h.name === 'handleUnary' && node.candidates ? unaryCache(node, node.candidates, h, ev) : h;
      return (ctx) => op(af(ctx), node, ev);
    }
    case '&&':
    case '||':
      return compileLogical(node, ev);
    case '?:': {
      const [cond, l, r] = node.args as Node[];
      if (cond === undefined || l === undefined || r === undefined) return undefined;
      const cf = c(cond, ev);
      const lf = c(l, ev);
      const rf = c(r, ev);
      return (ctx) => {
        const v = cf(ctx);
        if (v === true) return lf(ctx);
        if (v === false) return rf(ctx);
        throw ev.createError('invalid_condition_type', `${cond.meta.label || 'Ternary condition must be bool'}, got '${String(ev.debugRuntimeType(v))}'`, cond);
      };
    }
    case 'call': {
      if (!h) return undefined;
      const args = (node.args as [string, Node[]])[1];
      const fs = args.map((a) => c(a, ev));
      const name = costedName(node);
      if (h.name === 'callFn' && node.candidates) {
        const call = callCache(node, node.candidates, args, undefined, ev);
        return (ctx) => {
          const values = resolve(fs, ctx);
          if (name !== undefined) charge(callCost(name, values));
          const out = call(values);
          return out === MISS ? h(values, node, ev) : out;
        };
      }
      return (ctx) => {
        const values = resolve(fs, ctx);
        if (name !== undefined) charge(callCost(name, values));
        return h(values, node, ev);
      };
    }
    case 'rcall': {
      if (!h || !node.receiverWithArgs) return undefined;
      const fs = node.receiverWithArgs.map((a) => c(a, ev));
      const name = costedName(node);
      if (h.name === 'callRecFn' && node.candidates) {
        const [receiver, ...rest] = node.receiverWithArgs;
        const call = callCache(node, node.candidates, rest, receiver, ev);
        return (ctx) => {
          const values = resolve(fs, ctx);
          if (name !== undefined) charge(callCost(name, values));
          const out = call(values);
          return out === MISS ? h(values, ev, node) : out;
        };
      }
      return (ctx) => {
        const values = resolve(fs, ctx);
        if (name !== undefined) charge(callCost(name, values));
        return h(values, ev, node);
      };
    }
    case 'list': {
      const items = node.args as Node[];
      if (items.length === 0) return () => [];
      const literal = literalList(node);
      if (literal !== undefined) {
        // A literal list of literals: the elements' charges (1 + size each) in one step, and a fresh copy.
        const { values, elementUnits } = literal;
        return () => {
          charge(elementUnits);
          return values.slice();
        };
      }
      const fs = items.map((a) => c(a, ev));
      return (ctx) => resolve(fs, ctx);
    }
    case 'comprehension':
      return compileComprehension(node.args as ComprehensionArgs, ev);
    case 'accuValue':
      return (ctx) => ctx.accuValue;
    case 'accuInc':
      return (ctx) => ((ctx as OverlayCtx).accuValue = ((ctx as OverlayCtx).accuValue as number) + 1);
    case 'accuPush': {
      const af = c(node.args as Node, ev);
      return (ctx) => {
        const arr = (ctx as OverlayCtx).accuValue as unknown[];
        arr.push(af(ctx));
        return arr;
      };
    }
    default:
      return undefined;
  }
}

/** The function name of a call node with a size-dependent cost (charges.ts), else undefined. */
function costedName(node: Node): string | undefined {
  const name = callName(node);
  return name !== undefined && isCostedCall(name) ? name : undefined;
}

/** resolveAstArray: cel-js evaluates argument lists last to first. */
function resolve(fs: Compiled[], ctx: CelCtx): unknown[] {
  let i = fs.length;
  const out = new Array<unknown>(i);
  while (i--) out[i] = (fs[i] as Compiled)(ctx);
  return out;
}

function logicalOperandError(ev: Ev, value: unknown, node: Node | undefined): Error {
  return ev.createError('invalid_logical_operand', `Logical operator requires bool operands, got '${String(ev.debugRuntimeType(value))}'`, node);
}

/** `&&` (exp = false) and `||` (exp = true), as operators.js: errors are absorbed by a deciding operand. */
function compileLogical(node: Node, ev: Ev): Compiled | undefined {
  const [a, b] = node.args as Node[];
  if (a === undefined || b === undefined) return undefined;
  const lf = c(a, ev);
  const rf = c(b, ev);
  const exp = node.op === '||';
  return (ctx) => {
    const l = tryEval(lf, ctx);
    if (l === exp) return exp;
    const right = rf(ctx);
    if (l === !exp && typeof right === 'boolean') return right;
    // _logicalOp
    if (right === exp) return exp;
    if (right === !exp) {
      if (l === right) return right;
      throw l instanceof Error ? l : logicalOperandError(ev, l, a);
    }
    throw logicalOperandError(ev, right, a);
  };
}

function compileComprehension(args: ComprehensionArgs, ev: Ev): Compiled {
  const iterf = c(args.iterable, ev);
  const initf = c(args.init, ev);
  const stepf = c(args.step, ev);
  const { condition, result, iterCtx } = args;
  const toItems = (coll: unknown): unknown[] => {
    if (Array.isArray(coll)) return coll;
    if (coll instanceof Set) return [...(coll as Set<unknown>)];
    if (coll instanceof Map) return [...(coll as Map<unknown, unknown>).keys()];
    if (coll && typeof coll === 'object') return objKeys(coll);
    throw ev.createError('invalid_comprehension_range', `Expression of type '${String(ev.debugType(coll))}' cannot be range of a comprehension (must be list, map, or dynamic).`, args.iterable);
  };
  // charges.ts: listing a map's keys is charged before the loop (as the wrapped handle does).
  const range = (ctx: CelCtx): unknown[] => {
    const coll = iterf(ctx);
    charge(rangeCost(coll));
    return toItems(coll);
  };
  if (args.errorsAreFatal) {
    return (ctx) => {
      const items = range(ctx);
      const it = iterCtx.reuse(ctx);
      let accu = initf(it);
      it.accuValue = accu;
      const len = items.length;
      let i = 0;
      while (i < len) {
        if (condition && !condition(accu)) break;
        accu = stepf(it.setIterValue(items[i++], ev));
      }
      return result(accu);
    };
  }
  const cond = condition as (accu: unknown) => boolean;
  return (ctx) => {
    const items = range(ctx);
    const it = iterCtx.reuse(ctx);
    let accu = initf(it);
    it.accuValue = accu;
    const len = items.length;
    let i = 0;
    let error: unknown;
    while (i < len) {
      if (!cond(accu)) return result(accu);
      const stp = tryEval(stepf, it.setIterValue(items[i++], ev));
      if (stp instanceof Error) {
        error ??= stp;
        continue;
      }
      accu = stp;
    }
    if (error && cond(accu)) throw error;
    return result(accu);
  };
}

function ensureOptional(ev: Ev, value: unknown, node: Node | undefined, description: string): Optional {
  if (value instanceof Optional) return value;
  throw ev.createError('optional_expected', `${description} must be optional`, node);
}

function compileMacro(node: Node, macro: Macro, ev: Ev): Compiled | undefined {
  const props = macro.macroHasProps;
  if (props !== undefined && props.length > 0) {
    // has(): macros.js createHasExpander().evaluate
    const rootf = c(props[props.length - 1] as Node, ev);
    return (ctx) => {
      const nodes = props;
      let i = nodes.length - 1;
      let obj = rootf(ctx);
      let inOptionalContext: boolean | undefined;
      while (i--) {
        const n = nodes[i] as Node;
        if (n.op === '.?') inOptionalContext ??= true;
        obj = ev.debugType(obj).fieldLazy(obj, (n.args as unknown[])[1], n, ev);
        if (obj !== undefined) continue;
        if (!(!inOptionalContext && i && n.op === '.')) break;
        throw ev.createError('no_such_key', `No such key: ${String((n.args as unknown[])[1])}`, n);
      }
      return obj !== undefined;
    };
  }
  const { receiver, arg } = macro;
  if (receiver === undefined || arg === undefined) return undefined;
  if (macro.functionDesc === 'optional.orValue(value)') {
    const chain = optionalChain(receiver, ev);
    if (chain !== undefined) {
      const af = c(arg, ev);
      return (ctx) => {
        const v = chain(ctx);
        return v === ABSENT ? af(ctx) : v;
      };
    }
    const rf = c(receiver, ev);
    const af = c(arg, ev);
    const desc = `${macro.functionDesc} receiver`;
    return (ctx) => {
      const o = ensureOptional(ev, rf(ctx), receiver, desc);
      return o.hasValue() ? o.value() : af(ctx);
    };
  }
  if (macro.functionDesc === 'optional.or(optional)') {
    const rf = c(receiver, ev);
    const af = c(arg, ev);
    const desc = `${macro.functionDesc} receiver`;
    const argDesc = `${macro.functionDesc} argument`;
    return (ctx) => {
      const o = ensureOptional(ev, rf(ctx), receiver, desc);
      return o.hasValue() ? o : ensureOptional(ev, af(ctx), arg, argDesc);
    };
  }
  return undefined;
}

/*
 * Inline caches for operators and functions on dyn operands. cel-js resolves
 * the overload on every evaluation from the operands' runtime types
 * (debugTypeDeep + a linear search of the declarations for functions). For
 * operands whose runtime type is a function of `typeof` alone (string, int,
 * double, bool, null, and lists whose first element is one of those, as
 * debugTypeDeep only looks at the first element), the overload found is the
 * same each time: each node remembers it per type combination. Anything else
 * (maps, nested lists, messages) takes cel-js's path.
 */
const MISS = Symbol('miss');

/** A small-int tag that determines debugTypeDeep(v), or 0 when it does not. */
function typeTag(v: unknown): number {
  switch (typeof v) {
    case 'string':
      return 1;
    case 'bigint':
      return 2;
    case 'number':
      return 3;
    case 'boolean':
      return 4;
    case 'object':
      if (v === null) return 5;
      if (Array.isArray(v)) {
        if (v.length === 0) return 6;
        const t = typeTag(v[0]);
        return t > 0 && t <= 5 ? 6 + t : 0;
      }
      return 0;
    default:
      return 0;
  }
}

function binaryCache(node: Node, candidates: Candidates, fallback: Handle, ev: Ev): Handle {
  const cache = new Map<number, Overload>();
  const ls = node.leftStaticType;
  const rs = node.rightStaticType;
  const concat = node.op === '+';
  return (l, r) => {
    // list + list: one overload (list<V> + list<V>, V unified to dyn) whatever the element types.
    if (concat && Array.isArray(l) && Array.isArray(r) && !ls && !rs) {
      let o = cache.get(-1);
      if (o === undefined) {
        const found = candidates.findBinaryOverload(ev.debugTypeDeep(l).wrappedType, ev.debugTypeDeep(r).wrappedType);
        if (!found) return fallback(l, r, node, ev);
        o = found;
        cache.set(-1, o);
      }
      return o.handler(l, r, node, ev);
    }
    const lt = ls ? 0 : typeTag(l);
    const rt = rs ? 0 : typeTag(r);
    if ((!ls && lt === 0) || (!rs && rt === 0)) return fallback(l, r, node, ev);
    const key = lt * 16 + rt;
    let o = cache.get(key);
    if (o === undefined) {
      const found = candidates.findBinaryOverload(ls || ev.debugTypeDeep(l).wrappedType, rs || ev.debugTypeDeep(r).wrappedType);
      if (!found) return fallback(l, r, node, ev);
      o = found;
      cache.set(key, o);
    }
    return o.handler(l, r, node, ev);
  };
}

function unaryCache(node: Node, candidates: Candidates, fallback: Handle, ev: Ev): Handle {
  const cache = new Map<number, Overload>();
  const operand = node.args as Node;
  const staticType = operand.checkedType?.hasDynType === false ? operand.checkedType : undefined;
  return (v) => {
    const t = staticType ? 0 : typeTag(v);
    if (!staticType && t === 0) return fallback(v, node, ev);
    let o = cache.get(t);
    if (o === undefined) {
      const found = candidates.findUnaryOverload(ev.debugRuntimeType(v, operand.checkedType));
      if (!found) return fallback(v, node, ev);
      o = found;
      cache.set(t, o);
    }
    return o.handler(v);
  };
}

/** callFn / callRecFn with the declaration cached per argument type tags; MISS: let cel-js do it. */
function callCache(node: Node, candidates: Candidates, argNodes: Node[], receiver: Node | undefined, ev: Ev): (values: unknown[]) => unknown {
  const cache = new Map<number, Overload>();
  const nodes = receiver ? [receiver, ...argNodes] : argNodes;
  const statics = nodes.map((n) => n.checkedType?.hasDynType === false);
  if (nodes.length > 6) return () => MISS;
  return (values) => {
    let key = 0;
    for (let i = 0; i < nodes.length; i++) {
      const t = statics[i] ? 15 : typeTag(values[i]);
      if (t === 0) return MISS;
      key = key * 16 + t;
    }
    let o = cache.get(key);
    if (o === undefined) {
      const types = argNodes.map((n, i) => ev.debugRuntimeType(values[receiver ? i + 1 : i], n.checkedType));
      const found = receiver ? candidates.findFunction(types, ev.debugRuntimeType(values[0], receiver.checkedType)) : candidates.findFunction(types);
      if (!found) return MISS;
      o = found;
      cache.set(key, o);
    }
    try {
      return o.handler.apply(ev, values);
    } catch (e) {
      // callFunctionHandler's attachErrorAst
      if (e instanceof EvaluationError || e instanceof ParseError || e instanceof CelTypeError) throw (e as unknown as { withAst(n: Node): Error }).withAst(node);
      throw e;
    }
  };
}

/*
 * Optional chains ending in orValue (`c.?securityContext.?privileged.orValue(false)`,
 * the bread and butter of Pod Security rules) without an Optional per step:
 * each `.?` step yields the value or ABSENT. Each step is charged 1 unit before
 * its operand, as the metered `run` charges the node (an Optional has size 0).
 * A step that is not a plain map lookup (lists, messages, non-string keys)
 * calls the node's original cel-js handler and unwraps its Optional.
 */
const ABSENT = Symbol('absent');

type OptionalHandle = Handle & { [ORIGINAL]?: Handle };

function optionalChain(node: Node, ev: Ev): Compiled | undefined {
  if (node.op !== '.?' || node.meta.alternate !== undefined || node.meta.macro !== undefined) return undefined;
  const original = (node.handle as OptionalHandle | undefined)?.[ORIGINAL];
  const target = (node.args as [Node, string])[0];
  const key = node.right;
  if (original === undefined || target === undefined || typeof key !== 'string') return undefined;
  const inner = optionalChain(target, ev);
  const tf = inner ?? c(target, ev);
  return (ctx) => {
    const m = activeMeter();
    if (m !== undefined && ++m.used > m.limit) throw new CostLimitExceeded(m);
    const got = tf(ctx);
    if (got === ABSENT) return ABSENT;
    // A chain step yields the field's value itself; any other target yields a
    // CEL value, which may be an Optional (unwrapped once, as cel-js does).
    let obj = got;
    if (inner === undefined && obj instanceof Optional) {
      if (!obj.hasValue()) return ABSENT;
      obj = obj.value();
    }
    if (obj !== null && typeof obj === 'object') {
      const ctor = (obj as { constructor?: unknown }).constructor;
      if (ctor === Object || ctor === undefined) {
        const v = Object.hasOwn(obj, key) ? (obj as Record<string, unknown>)[key] : undefined;
        return v === undefined ? ABSENT : v;
      }
      if (obj instanceof Map) {
        const v: unknown = obj.get(key);
        return v === undefined ? ABSENT : v;
      }
    }
    // cel-js's own handler, on the value as an Optional if the chain unwrapped one.
    const left = inner !== undefined ? Optional.of(got) : got;
    const r = original(left, key, node, ev);
    return r instanceof Optional ? (r.hasValue() ? r.value() : ABSENT) : r;
  };
}

/** A list literal whose elements are all literals: its values and the charge of its elements. */
function literalList(node: Node): { values: unknown[]; elementUnits: number } | undefined {
  if (node.op !== 'list' || node.meta.alternate !== undefined || node.meta.macro !== undefined) return undefined;
  const items = node.args as Node[];
  if (items.length === 0 || !items.every((a) => a.op === 'value' && a.meta.alternate === undefined && a.meta.macro === undefined)) return undefined;
  const values = items.map((a) => a.args);
  const elementUnits = values.reduce<number>((n, v) => n + 1 + (typeof v === 'object' || typeof v === 'string' ? sizeCost(v) : 0), 0);
  return { values, elementUnits };
}

/** A list literal of string literals, with what evaluating it charges (its node's 1 + size, and its elements'). */
function literalStrings(node: Node): { values: string[]; units: number } | undefined {
  const literal = literalList(node);
  if (literal === undefined || !literal.values.every((v) => typeof v === 'string')) return undefined;
  return { values: literal.values as string[], units: 1 + sizeCost(literal.values) + literal.elementUnits };
}
