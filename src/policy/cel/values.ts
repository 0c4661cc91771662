/**
 * JSON ⇄ CEL values. Kubernetes objects arrive as JSON, where every number is
 * a double; CEL (and the API server's view of a Pod) types integral fields
 * such as `runAsUser` or `containerPort` as `int`. So integral numbers become
 * bigint (cel-js's `int`), others stay doubles, and objects become
 * null-prototype maps (a key named `__proto__` is then just a key).
 *
 * The conversion is a deep copy, done once per input object: a WeakMap keyed
 * by the caller's object lets every rule evaluated against the same request
 * share it.
 */

const converted = new WeakMap<object, unknown>();

/** The CEL value for a JSON value. Cached per object identity. */
export function toCel(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case 'number':
      return Number.isInteger(value) && Number.isSafeInteger(value) ? BigInt(value) : value;
    case 'string':
    case 'boolean':
    case 'bigint':
      return value;
    case 'object': {
      const hit = converted.get(value);
      if (hit !== undefined) return hit;
      let out: unknown;
      if (Array.isArray(value)) {
        out = value.map((v) => toCel(v));
      } else if (value instanceof Uint8Array || value instanceof Map) {
        out = value;
      } else {
        const o: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
        for (const [k, v] of Object.entries(value)) if (v !== undefined) o[k] = toCel(v);
        out = o;
      }
      converted.set(value, out);
      return out;
    }
    default:
      return null;
  }
}

/** A CEL result as JSON (int → number where safe, else string; maps → objects). */
export function fromCel(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case 'bigint':
      return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value.toString();
    case 'object': {
      if (Array.isArray(value)) return value.map((v) => fromCel(v));
      if (value instanceof Map) return Object.fromEntries([...value.entries()].map(([k, v]) => [String(k), fromCel(v)]));
      if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
      if (value instanceof Set) return [...value].map((v) => fromCel(v));
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto === null || proto === Object.prototype) {
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fromCel(v)]));
      }
      return String(value);
    }
    default:
      return value;
  }
}
