/**
 * A fast path for optional field selection (`x.?f`, `x[?k]`) on JSON maps.
 *
 * cel-js answers `x.?f` on a map without `f` by throwing, catching and
 * discarding an EvaluationError, whose construction (stack trace plus a
 * formatted source excerpt) costs several microseconds; Pod Security
 * expressions select absent optional fields constantly
 * (`c.?securityContext.?privileged.orValue(false)`), which made them ~20x
 * slower than the JSON Schema rules. After type-checking, compile() swaps the
 * handler of each such node for this one: a plain own-property lookup for
 * maps, and cel-js's own handler for everything else (lists, messages,
 * errors), so the semantics are unchanged.
 */
import { Optional } from '@marcbachmann/cel-js';
import { walk, type AstNode } from './source.ts';

type Handle = (left: unknown, right: unknown, ast: unknown, ev: unknown) => unknown;
const NONE = Optional.none();

/** The handler fast() wrapped, for compiler.ts's optional chains. */
export const ORIGINAL = Symbol('original optional handler');

function fast(original: Handle): Handle {
  const handle = function optionalField(left: unknown, right: unknown, ast: unknown, ev: unknown): unknown {
    let obj = left;
    if (obj instanceof Optional) {
      if (!obj.hasValue()) return NONE;
      obj = obj.value();
    }
    if (typeof right === 'string' && obj !== null && typeof obj === 'object') {
      const ctor = (obj as { constructor?: unknown }).constructor;
      if (ctor === Object || ctor === undefined) {
        const v = Object.hasOwn(obj, right) ? (obj as Record<string, unknown>)[right] : undefined;
        return v === undefined ? NONE : Optional.of(v);
      }
      if (obj instanceof Map) {
        const v: unknown = obj.get(right);
        return v === undefined ? NONE : Optional.of(v);
      }
    }
    return original(left, right, ast, ev);
  };
  return Object.assign(handle, { [ORIGINAL]: original });
}

/** Installs the fast path on every checked optional selection of a program. */
export function installFastOptionals(root: unknown): void {
  walk(root, (n: AstNode & { handle?: unknown }) => {
    if ((n.op === '.?' || n.op === '[?]') && typeof n.handle === 'function') n.handle = fast(n.handle as Handle);
  });
}
