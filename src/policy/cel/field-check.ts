/**
 * Field references checked against the schemas of the kinds an expression
 * sees (issue 33 item 1), as a ValidatingAdmissionPolicy's type checking
 * does: `object.spec.replcas` on a Deployment names a field no Deployment can
 * have, and would fail ("no such key") on every request it meets.
 *
 * One walk over the parsed expression follows what is rooted at `object` /
 * `oldObject` (and what the caller binds: composition variables, whose
 * expressions were walked before), through field selection, indexing,
 * comprehension variables (`all`, `exists`, `map`, …) and `cel.bind`. A value
 * is followed as the list of types it has, one per matched kind (a union
 * when the rule matches several kinds, or a `?:`/`+` joins two followed
 * values). A selection is a problem only when no type of the value can have
 * the field. Not followed, so never a problem:
 *   - the last field under `has()`, and everything after `.?f` or `[?k]`;
 *   - into `x-kubernetes-preserve-unknown-fields`, maps (their values are
 *     followed, any key is fine) and schemas that say nothing;
 *   - anything else (function results, literals, `request`, `params`).
 *
 * Linear in the expression's nodes times the matched kinds (at most
 * MAX_TYPES per value). Pure: no I/O.
 */
import { resolveType, type Shape, type TypeRef } from '../kind-schemas/schema-node.ts';
import { isNode, type Node } from './codegen-ast.ts';
import { unescapeFieldName } from './source.ts';

/** One type a followed value has, with what its component names resolve to. */
export interface Typed {
  /** The kind it belongs to, as problems name it (`apps/v1 Deployment`). */
  readonly label: string;
  readonly type: TypeRef;
  readonly components: Readonly<Record<string, Shape | string>>;
}

/** A value the walk follows: where it is in the object, and its possible types. */
export interface Followed {
  /** Path from the object's root (`spec.containers[*]`), '' for the root. */
  readonly path: string;
  readonly types: readonly Typed[];
}

/** A field no type of its value can have. */
export interface FieldProblem {
  /** `spec.replcas`. */
  readonly path: string;
  /** The kinds that cannot have it, each once. */
  readonly kinds: readonly string[];
}

/** Beyond this many types, a union is no longer followed (unions of unions grow). */
export const MAX_TYPES = 64;

const COMPREHENSIONS: ReadonlySet<string> = new Set(['all', 'exists', 'exists_one', 'existsOne', 'map', 'filter', 'transformList', 'transformMap', 'transformMapEntry', 'sortBy']);

type Scope = ReadonlyMap<string, Followed | undefined>;

/** The problems of one parsed expression, and what its value is (for a variable's expression). */
export function checkFields(ast: unknown, scope: Scope, variables: ReadonlyMap<string, Followed | undefined>): { problems: FieldProblem[]; value: Followed | undefined } {
  const problems: FieldProblem[] = [];
  const walker = new Walker(problems, variables);
  const value = walker.value(ast, scope);
  return { problems, value };
}

export function join(path: string, field: string): string {
  return path === '' ? field : `${path}.${field}`;
}

function union(a: Followed | undefined, b: Followed | undefined): Followed | undefined {
  if (a === undefined || b === undefined) return undefined;
  const types = [...a.types, ...b.types.filter((t) => !a.types.some((x) => x.label === t.label && x.type === t.type))];
  return types.length > MAX_TYPES ? undefined : { path: a.path, types };
}

/** `t.f` on every type; `missing` when none can have it. */
export function selectField(v: Followed, field: string): Followed | 'missing' {
  const types: Typed[] = [];
  for (const t of v.types) {
    const r = resolveType(t.type, t.components);
    if (r.kind === 'any') types.push({ ...t, type: 'any' });
    else if (r.kind === 'shape') {
      const s = r.shape;
      const p = s.p !== undefined && Object.hasOwn(s.p, field) ? s.p[field] : undefined;
      if (p !== undefined) types.push({ ...t, type: p });
      else if (s.a !== undefined) types.push({ ...t, type: s.a });
      else if (s.u === 1 || (s.p === undefined && s.i === undefined)) types.push({ ...t, type: 'any' });
    }
  }
  return types.length === 0 ? 'missing' : { path: join(v.path, field), types };
}

/** The element of a list or the value of a map (`[*]`); undefined when not followed. */
export function element(v: Followed, what: 'item' | 'value' | 'either'): Followed | undefined {
  const types: Typed[] = [];
  for (const t of v.types) {
    const r = resolveType(t.type, t.components);
    if (r.kind !== 'shape') return undefined;
    const next = what === 'item' ? r.shape.i : what === 'value' ? r.shape.a : (r.shape.i ?? r.shape.a);
    if (next === undefined) return undefined;
    types.push({ ...t, type: next });
  }
  return { path: `${v.path}[*]`, types };
}

/** True when every type is a list (comprehension variables are then items, else keys). */
function isList(v: Followed): boolean {
  return v.types.every((t) => {
    const r = resolveType(t.type, t.components);
    return r.kind === 'shape' && r.shape.i !== undefined;
  });
}

class Walker {
  readonly seen = new Set<string>();

  constructor(
    readonly problems: FieldProblem[],
    readonly variables: ReadonlyMap<string, Followed | undefined>,
  ) {}

  /** Walks `n` and returns what its value is, if followed. */
  value(n: unknown, scope: Scope): Followed | undefined {
    if (!isNode(n)) {
      if (Array.isArray(n)) for (const x of n) this.value(x, scope);
      return undefined;
    }
    switch (n.op) {
      case 'id':
        return typeof n.args === 'string' ? scope.get(n.args) : undefined;
      case '.':
        return this.select(n, scope, false);
      case '[]':
        return this.index(n, scope);
      case '?:': {
        const [c, a, b] = n.args as [unknown, unknown, unknown];
        this.value(c, scope);
        return union(this.value(a, scope), this.value(b, scope));
      }
      case '+': {
        const [a, b] = n.args as [unknown, unknown];
        return union(this.value(a, scope), this.value(b, scope));
      }
      case 'call':
        return this.call(n, scope);
      case 'rcall':
        return this.rcall(n, scope);
      default:
        // `.?f`, `[?k]`, operators, literals: walk inside, follow nothing out.
        this.value(n.args, scope);
        return undefined;
    }
  }

  select(n: Node, scope: Scope, guarded: boolean): Followed | undefined {
    const [target, raw] = n.args as [unknown, string];
    // Kubernetes escapes property names that are not CEL identifiers (`__dash__`).
    const field = unescapeFieldName(raw);
    if (isNode(target) && target.op === 'id' && target.args === 'variables' && !scope.has('variables')) return this.variables.get(field);
    const t = this.value(target, scope);
    return t === undefined ? undefined : this.field(t, field, guarded);
  }

  field(t: Followed, field: string, guarded: boolean): Followed | undefined {
    const r = selectField(t, field);
    if (r !== 'missing') return r;
    const path = join(t.path, field);
    // Each field once per expression, however often it is named.
    if (!guarded && !this.seen.has(path)) {
      this.seen.add(path);
      this.problems.push({ path, kinds: [...new Set(t.types.map((x) => x.label))] });
    }
    return undefined;
  }

  index(n: Node, scope: Scope): Followed | undefined {
    const [a, b] = n.args as [unknown, unknown];
    const t = this.value(a, scope);
    this.value(b, scope);
    if (t === undefined) return undefined;
    if (isNode(b) && b.op === 'value' && typeof b.args === 'string') {
      // `m['key']` on a map is its value; on an object, the field (checked as `.key` would be).
      const v = element(t, 'value');
      if (v !== undefined) return v;
      return this.field(t, b.args, false);
    }
    return element(t, 'either');
  }

  call(n: Node, scope: Scope): Followed | undefined {
    const [name, args] = n.args as [string, unknown[]];
    const only = Array.isArray(args) && args.length === 1 ? args[0] : undefined;
    // has(x.f): x is checked, f is what is asked about.
    if (name === 'has' && isNode(only) && only.op === '.') this.select(only, scope, true);
    else this.value(args, scope);
    return undefined;
  }

  rcall(n: Node, scope: Scope): Followed | undefined {
    const [name, target, args] = n.args as [string, unknown, unknown[]];
    const list = Array.isArray(args) ? args : [];
    if (name === 'bind' && isNode(target) && target.op === 'id' && target.args === 'cel' && list.length === 3) {
      const [v, init, body] = list;
      const bound = this.value(init, scope);
      return isNode(v) && typeof v.args === 'string' ? this.value(body, new Map([...scope, [v.args, bound]])) : undefined;
    }
    const t = this.value(target, scope);
    if (!COMPREHENSIONS.has(name) || !isNode(list[0]) || list[0].op !== 'id') {
      this.value(list, scope);
      return undefined;
    }
    const twoVars = list.length >= 3 && isNode(list[1]) && list[1].op === 'id' && name !== 'map' && name !== 'filter';
    const names = (twoVars ? list.slice(0, 2) : list.slice(0, 1)).map((x) => (x as Node).args as string);
    const listTarget = t !== undefined && isList(t);
    const item = t === undefined ? undefined : listTarget ? element(t, 'item') : element(t, 'value');
    const inner = new Map(scope);
    // One variable: a list's item, a map's key. Two: index and item, or key and value.
    if (twoVars) {
      inner.set(names[0]!, undefined);
      inner.set(names[1]!, item);
    } else inner.set(names[0]!, listTarget ? item : undefined);
    this.value(list.slice(names.length), inner);
    return undefined;
  }
}
