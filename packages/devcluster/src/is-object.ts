/** A JSON object: not null, not an array (the devcluster's one copy; src/ has its own in src/util, which this package may not import). */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
