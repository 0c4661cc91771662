/**
 * Applies the cost model (cost.ts) to cel-js: which node charges what, from
 * the CEL values its function or operator receives, before it runs.
 *
 * After type-checking, compile() calls {@link installCharges} on the AST:
 * each node whose work depends on the size of its inputs (library calls,
 * `==`/`!=`/`<`…/`in`/`+`, comprehensions over maps) gets its cel-js
 * `handle` wrapped so that the interpreter charges before calling it; the
 * compiled closures (compiler.ts) call {@link callCost}, {@link binaryCost}
 * and {@link rangeCost} at the same points, so both charge the same units
 * (test/policy/cel/compiler.test.ts checks equality). Calls and operators
 * whose cost accounts for their result are also marked "precharged": the
 * meter then does not charge the size of their result a second time.
 */
import { activeMeter, charge, markPrecharged } from './meter.ts';
import { aggregateElements, aggregateTraversal, costOf, regexSize } from './cost.ts';

/** The original (uncharged) handle of a wrapped node, for compiler.ts's inline caches. */
export const UNCHARGED = Symbol('uncharged handle');

/** Units left before the active meter's limit: the cap of every size measurement. */
function remaining(): number {
  const m = activeMeter();
  return m === undefined ? Number.POSITIVE_INFINITY : Math.max(0, m.limit - m.used);
}

const len = (v: unknown): number => (typeof v === 'string' || v instanceof Uint8Array ? v.length : 0);

function isAggregate(v: unknown): boolean {
  if (v === null || typeof v !== 'object') return false;
  if (Array.isArray(v) || v instanceof Map || v instanceof Set) return true;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === null || proto === Object.prototype;
}

/** Keys of a map held as a JS object (or a Map), without listing them when the size is known. */
function keyCount(v: unknown): number {
  if (v instanceof Map || v instanceof Set) return v.size;
  if (isAggregate(v) && !Array.isArray(v)) return Object.keys(v as object).length;
  return 0;
}

/** The elements of a list for sets.*: the sum over its elements (0 when empty, as cel-go). */
function setSize(v: unknown): number {
  if (!Array.isArray(v) || v.length === 0) return 0;
  return aggregateElements(v, remaining());
}

function joinLength(list: unknown, separator: number): number {
  if (!Array.isArray(list)) return 0;
  let n = list.length > 0 ? separator * (list.length - 1) : 0;
  for (const e of list) n += len(e);
  return n;
}

const walkString = (args: unknown[]): number => costOf.stringTraversal(len(args[0]));

/**
 * Per function name (after compile()'s renames: `portalMatches`,
 * `sets_contains`, …), the cost of one call from its values (the receiver
 * first for a method call).
 */
const CALLS: Readonly<Record<string, (args: unknown[]) => number>> = {
  contains: ([s, sub]) => (typeof s === 'string' ? costOf.contains(s.length, len(sub)) : 0),
  startsWith: ([, p]) => costOf.startsWith(len(p)),
  endsWith: ([, p]) => costOf.endsWith(len(p)),
  lowerAscii: walkString,
  upperAscii: walkString,
  trim: walkString,
  substring: walkString,
  charAt: walkString,
  reverse: walkString,
  strings_quote: walkString,
  indexOf: ([r]) => (Array.isArray(r) ? costOf.listTraversal(aggregateTraversal(r, remaining())) : costOf.stringTraversal(len(r))),
  lastIndexOf: ([r]) => (Array.isArray(r) ? costOf.listTraversal(aggregateTraversal(r, remaining())) : costOf.stringTraversal(len(r))),
  replace: ([s, from, to, n]) => costOf.replace(len(s), len(from), len(to), typeof n === 'bigint' ? Number(n) : -1),
  split: ([s]) => costOf.split(len(s)),
  join: ([l, sep]) => costOf.join(joinLength(l, len(sep))),
  format: ([f, args]) => costOf.format(len(f), aggregateTraversal(args, remaining())),
  portalMatches: ([s, p]) => costOf.regex(len(s), regexSize(len(p))),
  find: ([s, p]) => costOf.regex(len(s), regexSize(len(p))),
  findAll: ([s, p]) => costOf.regex(len(s), regexSize(len(p))),
  sets_contains: ([a, b]) => costOf.sets(setSize(a), setSize(b)),
  sets_equivalent: ([a, b]) => costOf.sets(setSize(a), setSize(b)),
  sets_intersects: ([a, b]) => costOf.sets(setSize(a), setSize(b)),
  isSorted: ([l]) => costOf.listTraversal(aggregateTraversal(l, remaining())),
  sum: ([l]) => costOf.listTraversal(aggregateTraversal(l, remaining())),
  min: ([l]) => costOf.listTraversal(aggregateTraversal(l, remaining())),
  max: ([l]) => costOf.listTraversal(aggregateTraversal(l, remaining())),
  size: ([v]) => (typeof v === 'string' ? costOf.stringTraversal(v.length) : v instanceof Map || v instanceof Set || Array.isArray(v) || v instanceof Uint8Array ? 0 : costOf.stringTraversal(keyCount(v))),
  // Parsers and conversions of a string (or bytes) argument; 0 for other overloads (e.g. CIDR.ip()).
  url: walkString,
  isURL: walkString,
  quantity: walkString,
  isQuantity: walkString,
  ip: walkString,
  isIP: walkString,
  cidr: walkString,
  isCIDR: walkString,
  semver: walkString,
  isSemver: walkString,
  ip_isCanonical: ([s]) => costOf.ipIsCanonical(len(s)),
  containsIP: ([c, x]) => costOf.containsAddress(String(c).length, typeof x === 'string' ? x.length : String(x).length),
  containsCIDR: ([c, x]) => costOf.containsAddress(String(c).length, typeof x === 'string' ? x.length : String(x).length),
  getQuery: ([u]) => costOf.stringTraversal(String(u).length),
  getEscapedPath: ([u]) => costOf.stringTraversal(String(u).length),
  validate: ([f, s]) => costOf.regex(len(s), (f as { regexSize?: number } | null)?.regexSize ?? 0),
  base64_encode: walkString,
  base64_decode: walkString,
  string: walkString,
  bytes: walkString,
  int: walkString,
  uint: walkString,
  double: walkString,
  duration: walkString,
  hex: walkString,
  base64: walkString,
  json: walkString,
  ofNonZeroValue: ([, v]) => costOf.stringTraversal(keyCount(v)),
};

/** The cost of a call to `name` with these values (receiver first), or 0. */
export function callCost(name: string, args: unknown[]): number {
  const f = CALLS[name];
  return f === undefined ? 0 : f(args);
}

/** True when calls to `name` have a size-dependent cost (and their result is charged by it). */
export function isCostedCall(name: string): boolean {
  return Object.hasOwn(CALLS, name);
}

const COSTED_OPERATORS = new Set(['==', '!=', '<', '<=', '>', '>=', 'in', '+']);

/** The cost of a binary operator on these operands, or 0. */
export function binaryCost(op: string, l: unknown, r: unknown): number {
  switch (op) {
    case '==':
    case '!=':
      if (typeof l === 'string' && typeof r === 'string') return costOf.compareStrings(l.length, r.length);
      if (l instanceof Uint8Array && r instanceof Uint8Array) return costOf.compareStrings(l.length, r.length);
      if (isAggregate(l) && isAggregate(r)) {
        const cap = remaining();
        return costOf.equalsAggregates(aggregateTraversal(l, cap), aggregateTraversal(r, cap));
      }
      return 0;
    case '<':
    case '<=':
    case '>':
    case '>=':
      return (typeof l === 'string' && typeof r === 'string') || (l instanceof Uint8Array && r instanceof Uint8Array) ? costOf.compareStrings(len(l), len(r)) : 0;
    case 'in':
      if (!Array.isArray(r)) return 0;
      return costOf.inList(r.length, isAggregate(l) ? aggregateTraversal(l, remaining()) : 1);
    case '+':
      if (Array.isArray(l) && Array.isArray(r)) return costOf.concat(l.length, r.length);
      return typeof l === 'string' || l instanceof Uint8Array ? costOf.concat(len(l), len(r)) : 0;
    default:
      return 0;
  }
}

/** The cost of starting a comprehension over `coll` (listing a map's keys), or 0. */
export function rangeCost(coll: unknown): number {
  return Array.isArray(coll) ? 0 : costOf.mapRange(keyCount(coll));
}

type Handle = ((...args: unknown[]) => unknown) & { [UNCHARGED]?: Handle };

interface AstNode {
  op: string;
  args: unknown;
  handle?: Handle;
  meta?: { alternate?: unknown };
}

function isNode(v: unknown): v is AstNode {
  return v !== null && typeof v === 'object' && typeof (v as { op?: unknown }).op === 'string' && 'args' in v;
}

/** Every node of a checked AST, macro expansions (alternates, comprehension parts) included, once each. */
function visitAll(root: unknown, visit: (n: AstNode) => void): void {
  const seen = new Set<object>();
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const v = stack.pop();
    if (Array.isArray(v)) {
      for (const x of v) stack.push(x);
      continue;
    }
    if (!isNode(v) || seen.has(v)) continue;
    seen.add(v);
    visit(v);
    stack.push(v.args, v.meta?.alternate);
    if (v.op === 'comprehension' && v.args !== null && typeof v.args === 'object') {
      const a = v.args as { iterable?: unknown; init?: unknown; step?: unknown };
      stack.push(a.iterable, a.init, a.step);
    }
  }
}

/** The function name of a call or method-call node. */
export function callName(n: { op: string; args: unknown }): string | undefined {
  if ((n.op === 'call' || n.op === 'rcall') && Array.isArray(n.args) && typeof n.args[0] === 'string') return n.args[0];
  return undefined;
}

function wrap(original: Handle, charged: Handle): Handle {
  return Object.assign(charged, { [UNCHARGED]: original });
}

/**
 * Wraps the handles of the size-dependent nodes of a checked AST (see the
 * module comment). Idempotent per node.
 */
export function installCharges(root: unknown): void {
  visitAll(root, (n) => {
    const h = n.handle;
    if (typeof h !== 'function' || h[UNCHARGED] !== undefined) return;
    const name = callName(n);
    if (name !== undefined && isCostedCall(name)) {
      markPrecharged(n);
      n.handle =
        n.op === 'call'
          ? wrap(h, (values: unknown, ast: unknown, ev: unknown) => {
              charge(callCost(name, values as unknown[]));
              return h(values, ast, ev);
            })
          : wrap(h, (values: unknown, ev: unknown, ast: unknown) => {
              charge(callCost(name, values as unknown[]));
              return h(values, ev, ast);
            });
      return;
    }
    if (COSTED_OPERATORS.has(n.op) && Array.isArray(n.args) && n.args.length === 2) {
      markPrecharged(n);
      const op = n.op;
      n.handle = wrap(h, (l: unknown, r: unknown, ast: unknown, ev: unknown) => {
        charge(binaryCost(op, l, r));
        return h(l, r, ast, ev);
      });
      return;
    }
    if (n.op === 'comprehension') {
      n.handle = wrap(h, (coll: unknown, args: unknown, ev: unknown, ctx: unknown) => {
        charge(rangeCost(coll));
        return h(coll, args, ev, ctx);
      });
    }
  });
}
