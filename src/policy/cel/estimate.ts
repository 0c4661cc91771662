/**
 * An estimate of the worst-case cost of an expression, made once at
 * compile time from its AST, in the units of the runtime meter (1 per node
 * plus the cost model of cost.ts), in the spirit of cel-go's
 * `checker.CostEstimator` that the API server runs on CRD validation rules.
 *
 * cel-go bounds list and string sizes with the schema's maxItems and
 * maxLength; Portal's rules have no schema for the object, so every list,
 * map or string read from the input is assumed to hold
 * {@link ASSUMED_INPUT_SIZE} elements or characters. The figure is then a
 * comparison, not a promise: a rule whose estimate is near or over the
 * per-expression limit (1,000,000) with inputs of that size is one to look
 * at (nested comprehensions over the input, quadratic library calls). The
 * runtime meter, not this estimate, enforces the limits.
 *
 * Shown per expression in /debug/vars (`cel.estimatedCost`).
 */
import { costOf, regexSize, traversal } from './cost.ts';

/** Elements (or characters) assumed for each list, map or string of the input. */
export const ASSUMED_INPUT_SIZE = 1_000;
/** Estimates saturate here (an expression can nest comprehensions 250 deep). */
const CAP = 1e15;

interface Node {
  op: string;
  args: unknown;
}

interface Estimate {
  /** Worst-case cost of evaluating the node. */
  cost: number;
  /** Worst-case size of its value when it is a list, map or string. */
  size: number;
}

const isNode = (v: unknown): v is Node => v !== null && typeof v === 'object' && typeof (v as Node).op === 'string';
const cap = (n: number): number => (Number.isFinite(n) ? Math.min(n, CAP) : CAP);
const ITERATING: ReadonlySet<string> = new Set(['all', 'exists', 'exists_one', 'existsOne', 'map', 'filter', 'transformList', 'transformMap', 'transformMapEntry']);

function est(n: unknown, scope: Map<string, number>): Estimate {
  if (!isNode(n)) return { cost: 0, size: 0 };
  const args = n.args;
  switch (n.op) {
    case 'value':
      return { cost: 1, size: typeof args === 'string' ? args.length : 0 };
    case 'id': {
      const local = scope.get(args as string);
      return { cost: 1, size: local ?? ASSUMED_INPUT_SIZE };
    }
    case '.':
    case '.?': {
      const t = est((args as unknown[])[0], scope);
      return { cost: cap(t.cost + 1 + traversal(ASSUMED_INPUT_SIZE)), size: ASSUMED_INPUT_SIZE };
    }
    case 'list': {
      const items = (args as unknown[]).map((a) => est(a, scope));
      return { cost: cap(1 + items.reduce((s, e) => s + e.cost, 0) + traversal(items.length)), size: items.length };
    }
    case 'map': {
      const entries = (args as [unknown, unknown][]).map(([k, v]) => est(k, scope).cost + est(v, scope).cost);
      return { cost: cap(1 + entries.reduce((s, c) => s + c, 0)), size: entries.length };
    }
    case 'call':
    case 'rcall':
      return call(n, scope);
    default: {
      const parts = (Array.isArray(args) ? args : [args]).map((a) => est(a, scope));
      const [l, r] = parts;
      let extra = 0;
      let size = 0;
      if (l !== undefined && r !== undefined) {
        if (n.op === 'in') extra = costOf.inList(r.size);
        if (n.op === '==' || n.op === '!=' || n.op === '<' || n.op === '<=' || n.op === '>' || n.op === '>=') extra = costOf.compareStrings(l.size, r.size);
        if (n.op === '+') {
          extra = costOf.concat(l.size, r.size);
          size = l.size + r.size;
        }
        if (n.op === '[]' || n.op === '[?]') size = ASSUMED_INPUT_SIZE;
      }
      if (n.op === '?:') size = Math.max(...parts.map((p) => p.size));
      return { cost: cap(1 + extra + parts.reduce((s, e) => s + e.cost, 0)), size };
    }
  }
}

function call(n: Node, scope: Map<string, number>): Estimate {
  const rcall = n.op === 'rcall';
  const a = n.args as unknown[];
  const name = a[0] as string;
  const receiver = rcall ? a[1] : undefined;
  const args = (rcall ? a[2] : a[1]) as unknown[];
  if (rcall && ITERATING.has(name) && args.length >= 2 && args.every(isNode)) {
    const recv = est(receiver, scope);
    const vars = args.slice(0, args.length === 2 || name === 'map' ? 1 : 2).filter((v): v is Node => isNode(v) && v.op === 'id');
    const inner = new Map(scope);
    for (const v of vars) inner.set(v.args as string, ASSUMED_INPUT_SIZE);
    const body = args.slice(vars.length).reduce<number>((s, x) => s + est(x, inner).cost, 0);
    return { cost: cap(2 + recv.cost + recv.size * (2 + body)), size: recv.size };
  }
  const parts = [...(receiver !== undefined ? [receiver] : []), ...args].map((x) => est(x, scope));
  const sizes = parts.map((p) => p.size);
  let extra = traversal(sizes[0] ?? 0);
  if (name === 'portalMatches' || name === 'find' || name === 'findAll') extra = costOf.regex(sizes[0] ?? 0, regexSize(sizes[1] ?? 0));
  if (name === 'sets_contains' || name === 'sets_equivalent' || name === 'sets_intersects') extra = costOf.sets(sizes[0] ?? 0, sizes[1] ?? 0);
  if (name === 'replace') extra = costOf.replace(sizes[0] ?? 0, sizes[1] ?? 0, sizes[2] ?? 0);
  if (name === 'contains') extra = costOf.contains(sizes[0] ?? 0, sizes[1] ?? 0);
  return { cost: cap(1 + extra + parts.reduce((s, e) => s + e.cost, 0)), size: Math.max(0, ...sizes) };
}

/** The estimated worst-case cost of a checked AST (see the module comment). */
export function estimateCost(ast: unknown): number {
  return Math.round(est(ast, new Map()).cost);
}
