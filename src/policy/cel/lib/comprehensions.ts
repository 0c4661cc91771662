/**
 * Two-variable comprehensions (cel-go ext.TwoVarComprehensions, Kubernetes
 * 1.33+): `all(i, v, p)`, `exists(i, v, p)`, `existsOne(i, v, p)`,
 * `transformList(i, v, [filter,] expr)`, `transformMap(k, v, [filter,] expr)`,
 * `transformMapEntry(k, v, [filter,] expr)`. For a list the first variable is
 * the index, for a map the key.
 *
 * Declared as cel-js macros, with only the documented macro hooks
 * (`checker.check`, `evaluator.run`, `ctx.forkWithVariable`,
 * `setIterValue`), so that cel-js type-checks them and its evaluation (the
 * fallback, and the differential tests' reference) runs them. Portal's
 * generated code (codegen.ts) compiles them itself.
 */
import type { Environment } from '@marcbachmann/cel-js';
import { celError } from './errors.ts';

interface Ctx {
  forkWithVariable(name: string, type: unknown): Ctx;
  setIterValue(v: unknown, ev: unknown): Ctx;
}
interface Checker {
  check(node: unknown, ctx: Ctx): { name?: string };
  getType(name: string): unknown;
}
interface Ev {
  run(node: unknown, ctx: Ctx): unknown;
}
interface Macro {
  receiver: unknown;
  k: string;
  v: string;
  filter: unknown;
  body: unknown;
  dyn?: unknown;
}

function tryRun(ev: Ev, node: unknown, ctx: Ctx): unknown {
  try {
    return ev.run(node, ctx);
  } catch (e) {
    return e;
  }
}

type Kind = 'all' | 'exists' | 'existsOne' | 'transformList' | 'transformMap' | 'transformMapEntry';

function identifier(node: unknown, what: string): string {
  const n = node as { op?: string; args?: unknown };
  if (n.op === 'id' && typeof n.args === 'string') return n.args;
  throw celError(`${what}: the iteration variables must be simple identifiers`);
}

function entries(coll: unknown): [unknown, unknown][] {
  if (Array.isArray(coll)) return coll.map((x, i) => [BigInt(i), x]);
  if (coll instanceof Map) return [...coll.entries()];
  if (coll !== null && typeof coll === 'object') return Object.keys(coll).map((k) => [k, (coll as Record<string, unknown>)[k]]);
  throw celError('two-variable comprehensions need a list or a map');
}

function evaluate(kind: Kind) {
  return (ev: Ev, m: Macro, ctx: Ctx): unknown => {
    const coll = ev.run(m.receiver, ctx);
    // Only cel-js's own evaluation runs this (a fallback expression, charged
    // per node before it runs, engine.ts); generated code compiles these
    // macros itself and charges each step.
    const bind = (k: unknown, v: unknown): Ctx => ctx.forkWithVariable(m.k, m.dyn).setIterValue(k, ev).forkWithVariable(m.v, m.dyn).setIterValue(v, ev);
    const items = entries(coll);
    switch (kind) {
      case 'all':
      case 'exists': {
        // CEL's logic: a decisive result wins over errors; otherwise an error is the result.
        const decisive = kind === 'exists';
        let error: unknown;
        for (const [k, v] of items) {
          const r = tryRun(ev, m.body, bind(k, v));
          if (r === decisive) return decisive;
          if (r instanceof Error) error ??= r;
          else if (typeof r !== 'boolean') throw celError(`${kind}: the predicate must give a bool`);
        }
        if (error) throw error;
        return !decisive;
      }
      case 'existsOne': {
        let n = 0;
        for (const [k, v] of items) if (ev.run(m.body, bind(k, v)) === true) n++;
        return n === 1;
      }
      case 'transformList': {
        const out: unknown[] = [];
        for (const [k, v] of items) {
          const c = bind(k, v);
          if (m.filter !== undefined && ev.run(m.filter, c) !== true) continue;
          out.push(ev.run(m.body, c));
        }
        return out;
      }
      case 'transformMap':
      case 'transformMapEntry': {
        const out: Record<string, unknown> = {};
        for (const [k, v] of items) {
          const c = bind(k, v);
          if (m.filter !== undefined && ev.run(m.filter, c) !== true) continue;
          const r = ev.run(m.body, c);
          if (kind === 'transformMap') {
            out[String(k)] = r;
            continue;
          }
          const pairs = r instanceof Map ? [...r.entries()] : Object.entries(r as object);
          if (pairs.length !== 1) throw celError('transformMapEntry: the expression must give a map of exactly one entry');
          const [[key, value]] = pairs as [[unknown, unknown]];
          if (Object.hasOwn(out, String(key))) throw celError(`transformMapEntry: duplicate key ${String(key)}`);
          out[String(key)] = value;
        }
        return out;
      }
    }
  };
}

function typeCheck(kind: Kind) {
  return (checker: Checker, m: Macro, ctx: Ctx): unknown => {
    checker.check(m.receiver, ctx);
    m.dyn = checker.getType('dyn');
    const vCtx = ctx.forkWithVariable(m.k, m.dyn).forkWithVariable(m.v, m.dyn);
    if (m.filter !== undefined) checker.check(m.filter, vCtx);
    checker.check(m.body, vCtx);
    if (kind === 'transformList') return checker.getType('list');
    if (kind === 'transformMap' || kind === 'transformMapEntry') return checker.getType('map');
    return checker.getType('bool');
  };
}

export function registerComprehensions(env: Environment): void {
  const kinds: [Kind, string, boolean][] = [
    ['all', 'bool', false],
    ['exists', 'bool', false],
    ['existsOne', 'bool', false],
    ['transformList', 'list<dyn>', true],
    ['transformMap', 'map<dyn, dyn>', true],
    ['transformMapEntry', 'map<dyn, dyn>', true],
  ];
  for (const [kind, result, filterable] of kinds) {
    for (const receiver of ['list', 'map']) {
      const make = (withFilter: boolean) => ({ args, receiver: recv }: { args: unknown[]; receiver: unknown }) => ({
        receiver: recv,
        k: identifier(args[0], kind),
        v: identifier(args[1], kind),
        filter: withFilter ? args[2] : undefined,
        body: withFilter ? args[3] : args[2],
        typeCheck: typeCheck(kind),
        evaluate: evaluate(kind),
      });
      env.registerFunction(`${receiver}.${kind}(ast, ast, ast): ${result}`, make(false));
      if (filterable) env.registerFunction(`${receiver}.${kind}(ast, ast, ast, ast): ${result}`, make(true));
    }
  }
}
