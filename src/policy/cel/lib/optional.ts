/**
 * What cel-js's optional library lacks and Kubernetes offers:
 * `optional.ofNonZeroValue(x)` (none for the zero value of x's type).
 */
import { Optional, type Environment } from '@marcbachmann/cel-js';

function isZero(v: unknown): boolean {
  if (v === null || v === false || v === 0 || v === 0n || v === '') return true;
  if (Array.isArray(v) || v instanceof Uint8Array) return v.length === 0;
  if (v instanceof Map) return v.size === 0;
  if (typeof v === 'object' && Object.getPrototypeOf(v) === null) return Object.keys(v).length === 0;
  if (typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) return Object.keys(v).length === 0;
  if (typeof v === 'object' && 'valueOf' in v) {
    const x = (v as { valueOf(): unknown }).valueOf();
    return x === 0n || x === 0;
  }
  return false;
}

export function registerOptional(env: Environment): void {
  // cel-js models the `optional` namespace as a receiver of type OptionalNamespace.
  env.registerFunction('OptionalNamespace.ofNonZeroValue(dyn): optional<dyn>', (_ns: unknown, v: unknown) => (isZero(v) ? Optional.none() : Optional.of(v)));
}
