/** A JSON object: not null, not an array (what a manifest's documents and their metadata must be). */
export function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
