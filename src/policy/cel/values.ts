/**
 * JSON ⇄ CEL values. Kubernetes objects arrive as JSON, where every number is
 * a double; CEL (and the API server's view of a Pod) types integral fields
 * such as `runAsUser` or `containerPort` as `int`. So integral numbers become
 * bigint (cel-js's `int`), others stay doubles.
 *
 * The conversion is a deep copy into plain objects (cel-js reads map entries
 * with Object.hasOwn, so inherited members are never visible; a `__proto__`
 * key is defined as an own property). Not cached: only cel-js's own
 * evaluation (a fallback expression) needs it, since the generated code
 * reads the JSON as parsed.
 */

function convert(value: unknown): unknown {
  switch (typeof value) {
    case 'number':
      return Number.isSafeInteger(value) ? BigInt(value) : value;
    case 'string':
    case 'boolean':
    case 'bigint':
      return value;
    case 'object': {
      if (value === null) return null;
      if (Array.isArray(value)) {
        const out = new Array<unknown>(value.length);
        for (let i = 0; i < value.length; i++) out[i] = convert(value[i]);
        return out;
      }
      if (value instanceof Uint8Array || value instanceof Map) return value;
      const out: Record<string, unknown> = {};
      for (const k in value) {
        if (!Object.hasOwn(value, k)) continue;
        const v = (value as Record<string, unknown>)[k];
        if (v === undefined) continue;
        if (k === '__proto__') Object.defineProperty(out, k, { value: convert(v), enumerable: true, writable: true, configurable: true });
        else out[k] = convert(v);
      }
      return out;
    }
    default:
      return null;
  }
}

/** The CEL value for a JSON value. */
export function toCel(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  return convert(value);
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
