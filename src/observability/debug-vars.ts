/**
 * `/debug/vars`: named sections, each a function producing JSON-serialisable
 * state (like Go's expvar). Components register a section (e.g.
 * `leader_election`) and the probes server renders them all.
 */
export type DebugSection = () => unknown;

export class DebugVars {
  readonly #sections = new Map<string, DebugSection>();

  /** Registers (or replaces) a section; returns the function that removes it. */
  register(name: string, section: DebugSection): () => void {
    this.#sections.set(name, section);
    return () => {
      if (this.#sections.get(name) === section) this.#sections.delete(name);
    };
  }

  /** Every section's current value; a section that throws reports its error instead. */
  snapshot(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [name, section] of this.#sections) {
      try {
        out[name] = section();
      } catch (err) {
        out[name] = { error: err instanceof Error ? err.message : String(err) };
      }
    }
    return out;
  }
}
